#!/usr/bin/env python3
"""Runs ONNX models through qconv (qconv-driver graph) and, where they are
importable, ONNX Runtime and OpenVINO, on the same inputs; prints per model a
table of the ms of each at each thread count, the ratios, and the agreement of
the outputs of every pair.

  bench/compare.py MODEL.onnx [MODEL.onnx ...] [--driver=build/qconv-driver]
                   [--threads=1,2] [--reps=10] [--rounds=3] [--seed=1] [--keep=DIR]
                   [--tokens=1,32] [--peers=ort,openvino] [--per-layer[=all]]
                   [--ort-opt=all|none] [--ort-config=KEY=VALUE ...]
                   [--ov-config=KEY=VALUE ...] [--driver-arg=ARG ...]

Peers, each optional and never a build or test dependency: ONNX Runtime (CPU
execution provider, graph optimizations ORT_ENABLE_ALL, intra-op threads as
given, inter-op 1) and OpenVINO (the CPU plugin, compiled with NUM_STREAMS 1,
PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS as given and
INFERENCE_PRECISION_HINT f32, the inputs' shapes made static). Install them in
a venv: python3 -m venv V && V/bin/pip install onnxruntime openvino onnx numpy,
then run V/bin/python bench/compare.py ...; without either only qconv's times
print. --peers picks among those installed.

Timing: --rounds rounds (default 3), each running qconv, ORT and OpenVINO once
in turn; each run is the best of --reps (qconv: the driver's after_best_ms, the
graph after the passes; a peer: after one warm-up, the best of --reps calls of
InferenceSession.run / InferRequest.infer); the table has the best over the
rounds. ratio = peer ms / qconv ms (above 1: qconv is faster).

Agreement, per output and pair (qconv-ort, qconv-openvino, ort-openvino):
max_steps, the largest difference in quantization steps (the step is the scale
of the DequantizeLinear that produces the output, 1 for an integer output;
without one the absolute difference, abs:..., and it over the largest |b|,
max_rel:...), differ, the share of elements that differ at all, and
rel_l2 = ||a - b|| / ||b||, b the second of the pair.
qconv_status is the driver's own check of the lowered graph against the graph
as written in f32: within TOL_STEPS (8) quantization steps of the output when
every output is a DequantizeLinear of one scale (a quantized network: the
lowering may put a value one step off per layer, docs/semantics.md §10), else
within its f32 tolerance; a --driver-arg=--tol... replaces it.

--per-layer: after the timing, at the first thread count, OpenVINO's executed
primitives (profiling on: count and ms per layer type and primitive, e.g.
Convolution brgconv_avx512_amx_1x1_I8) and ORT's optimized graph (op types by
domain, e.g. com.microsoft QLinearConv; with profiling, ms per op type), each
with its 10 slowest nodes (per node the best of --reps); --per-layer=all lists
every executed node.

A symbolic dim (dim_param, or none) is 1, or each of --tokens in turn (a table
per value; a model without one runs once), e.g. the FFN models' [1, tokens,
1024] input. --ort-config adds an
ORT session config entry: ORT rewrites opset 21 blocked DequantizeLinear +
MatMul into its MatMulNBits at accuracy level 4 (activations quantized to
int8: ~3e-3 relative) unless given session.qdq_matmulnbits_accuracy_level=0
(f32, as the model's semantics). --ov-config adds or replaces an OpenVINO
compile property: OpenVINO (2026.4) likewise quantizes the activations of
MatMulNBits and blocked-weight MatMuls to int8 in groups of 32 (~2e-3
relative) unless given DYNAMIC_QUANTIZATION_GROUP_SIZE=0.

Inputs: f32 inputs uniform in [-1, 1), integer ones uniform over their range,
from --seed; written as .npy and given to the driver with --input. numpy and
onnx (Debian: python3-numpy, python3-onnx) are needed.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

TOL_STEPS = 8  # qconv_status's bound in output steps for quantized networks
PEERS = ("ort", "openvino")

try:
    import onnx
    from onnx import numpy_helper
except ImportError:  # the inputs and steps are then unknown
    onnx = None
try:
    import onnxruntime as ort
except ImportError:
    ort = None
try:
    import openvino as ov
except ImportError:
    ov = None

NP_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 10: np.float16}


def fname(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def has_symbolic_dims(path):
    g = onnx.load(path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    return any(not d.HasField("dim_value") for i in g.input if i.name not in inits
               for d in i.type.tensor_type.shape.dim)


def model_io(path, sym=1):
    """(inputs [(name, dtype, shape)], {output: step or None}, every output a
    DequantizeLinear) from the model file; symbolic dims are `sym`."""
    m = onnx.load(path)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    ins = []
    for i in g.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else sym for d in tt.shape.dim]
        ins.append((i.name, NP_TYPES.get(tt.elem_type, np.float32), dims))
    producer = {o: n for n in g.node for o in n.output}
    steps = {}
    all_dq = len(g.output) > 0
    for o in g.output:
        step = None
        tt = o.type.tensor_type
        if tt.elem_type in (2, 3, 6):
            step = 1.0
        name = o.name
        n = producer.get(name)
        while n is not None and n.op_type == "Identity":
            n = producer.get(n.input[0])
        if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            s = numpy_helper.to_array(inits[n.input[1]])
            if s.size == 1:
                step = float(s.reshape(-1)[0])
        else:
            all_dq = False
        steps[name] = step
    return ins, steps, all_dq


def make_inputs(ins, seed, folder):
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dt, shape in ins:
        if np.issubdtype(dt, np.integer):
            info = np.iinfo(dt)
            v = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dt)
        else:
            v = rng.uniform(-1, 1, size=shape).astype(dt)
        feeds[name] = v
        np.save(os.path.join(folder, fname(name) + ".npy"), v)
    return feeds


def run_qconv(driver, model, feeds, folder, threads, reps, extra=()):
    out = os.path.join(folder, "qconv_out_%d" % threads)
    cmd = [driver, "graph", model, "--threads=%d" % threads, "--reps=%d" % reps, "--output-dir=" + out]
    cmd += list(extra)
    for name in feeds:
        cmd.append("--input=%s=%s" % (name, os.path.join(folder, fname(name) + ".npy")))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Exit status 1 with a summary line: the driver's own comparison of the
    # graph as written and lowered went past its tolerance (a lowered network
    # may differ by quantization steps, docs/semantics.md §10); the agreement
    # with the peers is printed in the table.
    if r.returncode != 0 and not (r.returncode == 1 and "op=graph " in r.stdout):
        sys.exit("compare: %s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr))
    summary = [l for l in r.stdout.splitlines() if l.startswith("op=graph ")][-1]
    kv = dict(t.split("=", 1) for t in summary.split() if "=" in t)
    outs = {}
    for f in os.listdir(out):
        if f.endswith(".npy"):
            outs[f[:-4]] = np.load(os.path.join(out, f))
    return float(kv.get("after_best_ms", kv["after_ms"])), outs, kv.get("status", "?")


def best_of(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best


class OrtPeer:
    name = "ort"

    def __init__(self, model, feeds, threads, args, profile_dir=None):
        so = ort.SessionOptions()
        for kv in args.ort_config:
            key, value = kv.split("=", 1)
            so.add_session_config_entry(key, value)
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[args.ort_opt]
        if profile_dir:
            so.log_severity_level = 3  # no warning about the hardware-specific saved graph
            so.optimized_model_filepath = os.path.join(profile_dir, "ort_optimized.onnx")
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(profile_dir, "ort_profile")
        self.session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.feeds = feeds
        self.names = [o.name for o in self.session.get_outputs()]
        self.outs = dict(zip(self.names, self.session.run(self.names, feeds)))  # also the warm-up

    def time(self, reps):
        return best_of(lambda: self.session.run(self.names, self.feeds), reps)


def ov_config(threads, args, profile=False):
    cfg = {
        "NUM_STREAMS": "1",
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": str(threads),
        "INFERENCE_PRECISION_HINT": "f32",
    }
    if profile:
        cfg["PERF_COUNT"] = "YES"
    for kv in args.ov_config:
        key, value = kv.split("=", 1)
        cfg[key] = value
    return cfg


class OpenVinoPeer:
    name = "openvino"
    core = None

    def __init__(self, model, feeds, threads, args, profile=False):
        if OpenVinoPeer.core is None:
            OpenVinoPeer.core = ov.Core()
        m = self.core.read_model(model)
        # Static shapes: the values of the symbolic dims this run uses.
        m.reshape({i.get_any_name(): list(feeds[i.get_any_name()].shape) for i in m.inputs
                   if i.get_any_name() in feeds})
        self.compiled = self.core.compile_model(m, "CPU", ov_config(threads, args, profile))
        self.request = self.compiled.create_infer_request()
        self.feeds = feeds
        self.request.infer(feeds)  # warm-up
        self.outs = {}
        for o in self.compiled.outputs:
            data = np.array(self.request.get_tensor(o).data, copy=True)
            for n in o.get_names():
                self.outs[n] = data

    def time(self, reps):
        return best_of(lambda: self.request.infer(self.feeds), reps)


def short_error(e):
    """The informative lines of a peer's exception (OpenVINO's carry a few
    lines of source locations and headers first)."""
    noise = ("Exception from", "Check 'false'", "FrontEnd API failed", "Summary:", "Model wasn't",
             "Failed operations", "-- Conversion is failed")
    lines = [l.strip() for l in str(e).splitlines() if l.strip() and not l.strip().startswith(noise)]
    return " / ".join(lines[:3])[:400] or type(e).__name__


def agreement(a, b, step):
    """(max cell, differ %, rel_l2) of a against b."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        return "shapes differ", "", ""
    d = np.abs(a - b)
    if not d.size:
        return "0", "0", "0"
    share = float(np.mean(d > 0))
    nb = float(np.linalg.norm(b))
    rel = float(np.linalg.norm(a - b)) / nb if nb > 0 else (0.0 if not d.any() else float("inf"))
    if step:
        mx = "%.3g" % (float(d.max()) / step)
    else:  # no step: the largest absolute difference, and it over the largest |b|
        mb = float(np.abs(b).max())
        mx = "abs:%.3g" % float(d.max()) + (" max_rel:%.3g" % (float(d.max()) / mb) if mb > 0 else "")
    return mx, "%.4f" % (100 * share), "%.3g" % rel


def table(rows, right=()):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        print("  " + "  ".join(cells).rstrip())


def ms(v):
    return "%.3f" % v


def per_layer_openvino(model, feeds, threads, args, everything):
    peer = OpenVinoPeer(model, feeds, threads, args, profile=True)
    best = {}
    info = {}
    for _ in range(max(1, args.reps)):
        peer.request.infer(feeds)
        for p in peer.request.get_profiling_info():
            if p.status == ov.ProfilingInfo.Status.EXECUTED:
                t = p.real_time.total_seconds() * 1e3
                best[p.node_name] = min(best.get(p.node_name, float("inf")), t)
                info[p.node_name] = (p.node_type, p.exec_type)
    # layerType and primitiveType from the runtime graph (the primitives as executed).
    for op in peer.compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        keys = set(rt.keys())
        name = op.get_friendly_name()
        if name in info and "layerType" in keys and "primitiveType" in keys:
            info[name] = (rt["layerType"].astype(str), rt["primitiveType"].astype(str))
    counts = collections.Counter(info[n] for n in best)
    total = collections.Counter()
    for n, t in best.items():
        total[info[n]] += t
    print("  openvino %s, %d thread(s): %d executed nodes, %.3f ms (sum of per-node best of %d)" % (
        ov.__version__.split("-")[0], threads, len(best), sum(best.values()), max(1, args.reps)))
    rows = [("layerType", "primitiveType", "count", "ms")]
    for key, c in sorted(counts.items(), key=lambda kv: -total[kv[0]]):
        rows.append((key[0], key[1], c, ms(total[key])))
    table(rows, right=(2, 3))
    top = sorted(best.items(), key=lambda kv: -kv[1])
    print("  openvino slowest nodes:" if not everything else "  openvino nodes, slowest first:")
    rows = [("node", "layerType", "primitiveType", "ms")]
    for n, t in top if everything else top[:10]:
        rows.append((n, info[n][0], info[n][1], ms(t)))
    table(rows, right=(3,))


def per_layer_ort(model, feeds, threads, args, everything, folder):
    d = tempfile.mkdtemp(prefix="ort_", dir=folder)
    peer = OrtPeer(model, feeds, threads, args, profile_dir=d)
    for _ in range(max(1, args.reps)):
        peer.session.run(peer.names, feeds)
    prof = peer.session.end_profiling()
    opt = os.path.join(d, "ort_optimized.onnx")
    ops = collections.Counter()
    if os.path.exists(opt):
        g = onnx.load(opt, load_external_data=False).graph
        ops = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in g.node)
    best, kind = {}, {}
    with open(prof) as f:
        events = json.load(f)
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        n = e["name"][:-len("_kernel_time")]
        kind[n] = e.get("args", {}).get("op_name", "?")
        best[n] = min(best.get(n, float("inf")), e["dur"] / 1e3)
    total = collections.Counter()
    for n, t in best.items():
        total[kind[n]] += t
    print("  ort %s, %d thread(s), optimized graph: %d nodes; %.3f ms (sum of per-node best of %d)" % (
        ort.__version__, threads, sum(ops.values()), sum(best.values()), max(1, args.reps)))
    rows = [("domain", "op_type", "count", "ms")]
    for (dom, op), c in sorted(ops.items(), key=lambda kv: (-total.get(kv[0][1], 0), -kv[1])):
        rows.append((dom, op, c, ms(total[op]) if op in total else "-"))
    table(rows, right=(2, 3))
    top = sorted(best.items(), key=lambda kv: -kv[1])
    print("  ort slowest nodes:" if not everything else "  ort nodes, slowest first:")
    rows = [("node", "op_type", "ms")]
    for n, t in top if everything else top[:10]:
        rows.append((n, kind[n], ms(t)))
    table(rows, right=(2,))


def compare_model(model, sym, peers, threads, a, folder):
    ins, steps, all_dq = model_io(model, 1 if sym is None else sym)
    feeds = make_inputs(ins, a.seed, folder)
    extra = list(a.driver_arg)
    if all_dq and not any(x.startswith("--tol") for x in extra):
        extra.append("--tol-steps=%d" % TOL_STEPS)
    label = os.path.basename(model) + ("" if sym is None else " tokens=%d" % sym)
    outs_desc = ", ".join("%s step=%s" % (n, "%.4g" % s if s else "none") for n, s in steps.items())
    print("\n%s  (outputs: %s; best of %d reps x %d rounds)" % (label, outs_desc, a.reps, a.rounds), flush=True)
    times = []  # (threads, qconv ms, status, {peer: ms or error})
    agree = []  # (threads, pair, output, max, differ, rel_l2)
    for t in threads:
        live = {}
        errors = {}
        for p in peers:
            try:
                live[p] = (OrtPeer if p == "ort" else OpenVinoPeer)(model, feeds, t, a)
            except Exception as e:  # a peer that cannot run this model: say so, go on
                errors[p] = short_error(e)
        best = {p: float("inf") for p in live}
        qbest, qouts, status = float("inf"), None, "?"
        for _ in range(a.rounds):
            qms, outs, st = run_qconv(a.driver, model, feeds, folder, t, a.reps, extra)
            if qouts is None:
                qouts, status = outs, st
            elif st != "ok":
                status = st
            qbest = min(qbest, qms)
            for p, peer in live.items():
                best[p] = min(best[p], peer.time(a.reps))
        times.append((t, qbest, status, {p: best.get(p, errors.get(p)) for p in peers}))
        results = [("qconv", {n: qouts.get(fname(n)) for n in steps})]
        results += [(p, live[p].outs) for p in peers if p in live]
        for i in range(len(results)):
            for j in range(i + 1, len(results)):
                for n, step in steps.items():
                    x, y = results[i][1].get(n), results[j][1].get(n)
                    cells = agreement(x, y, step) if x is not None and y is not None else ("missing", "", "")
                    agree.append((t, "%s vs %s" % (results[i][0], results[j][0]), n) + cells)
        del live
    head = ["threads", "qconv_ms", "qconv_status"]
    for p in peers:
        head += ["%s_ms" % p, "%s/qconv" % p]
    rows = [tuple(head)]
    for t, qms, status, pm in times:
        row = [t, ms(qms), status]
        for p in peers:
            v = pm[p]
            row += [ms(v), "%.3f" % (v / qms)] if isinstance(v, float) else ["failed", ""]
        rows.append(tuple(row))
    table(rows, right=tuple(i for i in range(len(head)) if i != 2))
    failed = {}
    for t, _, _, pm in times:
        for p in peers:
            if not isinstance(pm[p], float) and pm[p] not in failed.setdefault(p, []):
                failed[p].append(pm[p])
    for p, msgs in failed.items():
        for m in msgs:
            print("  %s failed: %s" % (p, m))
    if agree:
        multi = len(steps) > 1
        rows = [("agreement", "threads") + (("output",) if multi else ()) + ("max_steps", "differ%", "rel_l2")]
        for t, pair, n, mx, share, rel in agree:
            rows.append((pair, t) + ((n,) if multi else ()) + (mx, share, rel))
        table(rows, right=tuple(range(1, len(rows[0]))))
    if a.per_layer:
        everything = a.per_layer == "all"
        t = threads[0]
        if "openvino" in peers and "openvino" not in failed:
            try:
                per_layer_openvino(model, feeds, t, a, everything)
            except Exception as e:
                print("  openvino per-layer: failed: %s" % short_error(e))
        if "ort" in peers and "ort" not in failed:
            try:
                per_layer_ort(model, feeds, t, a, everything, folder)
            except Exception as e:
                print("  ort per-layer: failed: %s" % short_error(e))
        if not peers:
            print("  --per-layer: no peer to profile (qconv's own: qconv-driver graph MODEL --report=table)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--driver", default=os.path.join(root, "build", "qconv-driver"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of qconv, ORT and OpenVINO in turn; the best of each over the rounds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the inputs and outputs in this folder")
    ap.add_argument("--tokens", help="comma-separated values for the symbolic dims (default 1), a table each "
                    "(models without symbolic dims run once)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help="comma-separated, of: ort, openvino (those installed; default both; empty: qconv only)")
    ap.add_argument("--per-layer", nargs="?", const="summary", choices=["summary", "all"],
                    help="after the timing, the peers' executed kernels per type and their slowest nodes "
                         "(=all: every node)")
    ap.add_argument("--ort-opt", default="all", choices=["all", "none"],
                    help="ORT's graph optimizations: all (the comparison: QDQ fused into its integer kernels) "
                         "or none (QDQ run as written, in float: the graph's own semantics)")
    ap.add_argument("--ort-config", action="append", default=[], metavar="KEY=VALUE",
                    help="an ORT session config entry (repeatable), e.g. "
                         "session.qdq_matmulnbits_accuracy_level=0: ORT fuses blocked DequantizeLinear + "
                         "MatMul into MatMulNBits at accuracy level 4 (int8 activations) unless told")
    ap.add_argument("--ov-config", action="append", default=[], metavar="KEY=VALUE",
                    help="an OpenVINO compile property (repeatable), added to or replacing NUM_STREAMS=1, "
                         "PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS=<threads>, INFERENCE_PRECISION_HINT=f32; "
                         "e.g. DYNAMIC_QUANTIZATION_GROUP_SIZE=0: OpenVINO quantizes the activations of "
                         "compressed-weight MatMuls to int8 in groups of 32 unless told")
    ap.add_argument("--driver-arg", action="append", default=[], metavar="ARG",
                    help="an argument for qconv-driver graph (repeatable), e.g. --driver-arg=--dq "
                         "(the opt-in dynamic quantization of the compressed MatMul's activations)")
    a = ap.parse_args()
    if onnx is None:
        sys.exit("compare: needs the onnx module (Debian: python3-onnx) to read the models' inputs")
    for kv in a.ort_config + a.ov_config:
        if "=" not in kv:
            ap.error("expected KEY=VALUE, got %r" % kv)
    if a.reps < 1 or a.rounds < 1:
        ap.error("--reps and --rounds must be at least 1")
    wanted = [p for p in a.peers.split(",") if p]
    for p in wanted:
        if p not in PEERS:
            ap.error("--peers: unknown peer %r (known: %s)" % (p, ", ".join(PEERS)))
    found = {"ort": ort, "openvino": ov}
    have = ["%s %s" % ("onnxruntime" if p == "ort" else "openvino", found[p].__version__.split("-")[0])
            for p in PEERS if found[p] is not None]
    print("compare: peers found: %s%s" % (", ".join(have) if have else "none",
          "" if len(have) == len(PEERS) else
          " (install the missing ones in a venv: python3 -m venv V && V/bin/pip install onnxruntime openvino "
          "onnx numpy; then V/bin/python bench/compare.py ...)"))
    peers = [p for p in wanted if found[p] is not None]
    print("compare: comparing qconv%s" % "".join(" with " + p if i == 0 else ", " + p for i, p in enumerate(peers)))
    threads = [int(t) for t in a.threads.split(",")]
    syms = [int(t) for t in a.tokens.split(",")] if a.tokens else [None]
    runs = [(m, s) for m in a.models for s in (syms if has_symbolic_dims(m) else [None])]
    for model, sym in runs:
        folder = a.keep or tempfile.mkdtemp(prefix="compare_")
        os.makedirs(folder, exist_ok=True)
        try:
            compare_model(model, sym, peers, threads, a, folder)
        finally:
            if not a.keep:
                shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
