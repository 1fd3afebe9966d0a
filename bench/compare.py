#!/usr/bin/env python3
"""Runs ONNX models through qconv (qconv-driver graph) and, where they are
importable, ONNX Runtime and OpenVINO, on the same inputs; prints per model a
table of the ms of each at each thread count, the ratios, and the agreement of
the outputs of every pair.

  bench/compare.py MODEL.onnx [MODEL.onnx ...] [--driver=build/qconv-driver]
                   [--threads=1,2] [--reps=10] [--rounds=3] [--seed=1] [--keep=DIR]
                   [--input=NAME=FILE.npy ...] [--tokens=1,32] [--peers=ort,openvino] [--per-layer[=all]]
                   [--ort-opt=all|none] [--ort-config=KEY=VALUE ...]
                   [--ov-config=KEY=VALUE ...] [--driver-arg=ARG ...] [--isa=NAME]

Peers, each optional and never a build or test dependency: ONNX Runtime (CPU
execution provider, graph optimizations ORT_ENABLE_ALL, intra-op threads as
given, inter-op 1; where its optimized session refuses a model, e.g. per-channel
activation zero points its QLinearConv does not take, the model as written
with a note under the table) and OpenVINO (the CPU plugin, compiled with NUM_STREAMS 1,
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
every executed node. With OpenVINO, --per-layer then joins the convolutions:
qconv's side is `qconv-driver graph MODEL --report=table` (the per-node laps of
the fastest of --reps profiled runs), OpenVINO's the profile of the fastest of
30 timed infers (after 3 warm-up ones), its per-node real_time scaled so that
it sums to that infer's wall time (the factor is printed). Each qconv
QConvolution row is matched with the OpenVINO Convolution / GroupConvolution /
FullyConnected nodes of the same ONNX Conv/Gemm/MatMul node (the qconv id
begins with the ONNX node's name or an output name and "_", the OpenVINO name
with one of them and "/"; the longest wins; a fused 1x1+dw row takes both
convolutions, from the driver's "fused into ... as its dw item" line). It
prints how many were joined of how many, the primitives of each side, then per
convolution: name, shape class (stem: the first conv; 1x1 s1 K=<ic>; 1x1 s2;
KxK s1; KxK s2; depthwise, groups == ic; 1x1+dw, a fused pair; fc, a
Gemm/MatMul), qconv's descriptor, qconv ms and row, OpenVINO ms and primitive
(exec_type), ov/qconv (above 1: qconv faster), sorted by class and name; then
per class the count, both ms and the ratio, the totals (the convolutions, the
rest, the whole run), and the 10 convolutions where qconv is furthest behind.

--isa=NAME caps the ISA: the driver gets --isa=NAME, and ONEDNN_MAX_CPU_ISA is
set for OpenVINO's oneDNN before openvino is imported (avx512_core_amx,
avx512_core_vnni, avx512_core, avx2_vnni, avx2 -> AVX512_CORE_AMX, ...; another
name is upper-cased). ORT's CPU provider (MLAS) does not read it and runs
uncapped. The caps print at the start; the joined table checks the names of
each side's convolution primitives against the cap (no amx below AMX, no
avx512 at AVX2 levels). OpenVINO 2026.4 honours it: with avx512_core_vnni its
convolutions run brgconv_avx512_1x1_I8 / brgconv_avx512_I8 instead of
brgconv_avx512_amx_*.

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
# The peers are imported by import_peers(), after main has set
# ONEDNN_MAX_CPU_ISA for --isa: OpenVINO's oneDNN reads it when it loads.
ort = None
ov = None

# qconv's ISA names (qconv-driver --isa) as oneDNN's ONEDNN_MAX_CPU_ISA values.
ISA_ONEDNN = {
    "avx512_core_amx": "AVX512_CORE_AMX",
    "avx512_core_vnni": "AVX512_CORE_VNNI",
    "avx512_core_bf16": "AVX512_CORE_BF16",
    "avx512_core": "AVX512_CORE",
    "avx2_vnni": "AVX2_VNNI",
    "avx2": "AVX2",
}
ONNX_CONV_OPS = ("Conv", "ConvInteger", "QLinearConv", "Gemm", "MatMul", "MatMulInteger", "QLinearMatMul")
ONNX_FC_OPS = ("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul")
OV_PROFILE_WARMUP = 3  # the joined table: OpenVINO's warm-up infers,
OV_PROFILE_RUNS = 30  # then its timed infers (the fastest one's profile is kept)


def import_peers():
    """Imports ONNX Runtime and OpenVINO where installed (each stays None if not)."""
    global ort, ov
    try:
        import onnxruntime
        ort = onnxruntime
    except ImportError:
        pass
    try:
        import openvino
        ov = openvino
    except ImportError:
        pass


NP_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 10: np.float16}


def cpu_has_vnni():
    """Whether the CPU multiplies u8 x s8 with VNNI (AVX-512 VNNI, AVX-VNNI or AMX); True when unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), None)
    except OSError:
        return True
    return flags is None or any(v in flags for v in ("avx512_vnni", "avx_vnni", "amx_int8"))


def fname(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def has_symbolic_dims(path):
    g = onnx.load(path, load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    return any(not fixed_dim(d) for i in g.input if i.name not in inits
               for d in i.type.tensor_type.shape.dim)


def fixed_dim(d):
    """A dim with a size: dim_value > 0 (exporters write -1 or 0 for a dynamic
    one, as ONNX Runtime and OpenVINO read them)."""
    return d.HasField("dim_value") and d.dim_value > 0


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
        dims = [d.dim_value if fixed_dim(d) else sym for d in tt.shape.dim]
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

    def __init__(self, model, feeds, threads, args, profile_dir=None, opt=None):
        so = ort.SessionOptions()
        for kv in args.ort_config:
            key, value = kv.split("=", 1)
            so.add_session_config_entry(key, value)
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = {
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        }[opt or args.ort_opt]
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
    return peer


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


def qconv_layers(driver, model, feeds, folder, threads, reps, extra):
    """qconv-driver graph --report=table: ([(node, op, ms, implementation)] in
    table order, {dw conv: the 1x1 conv it is fused into}, the per-node total
    line, after_best_ms)."""
    cmd = [driver, "graph", model, "--report=table", "--threads=%d" % threads, "--reps=%d" % reps]
    cmd += list(extra)
    for name in feeds:
        cmd.append("--input=%s=%s" % (name, os.path.join(folder, fname(name) + ".npy")))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0 and not (r.returncode == 1 and "op=graph " in r.stdout):
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, (r.stdout + r.stderr)[-400:]))
    rows, fused, total_line, inside = [], {}, "", False
    for line in r.stdout.splitlines():
        if line.startswith("node "):
            inside = True
        elif inside and line.startswith("total"):
            inside = False
        elif inside:
            parts = line.split(None, 4)
            if len(parts) >= 4:
                rows.append((parts[0], parts[1], float(parts[2]), parts[4] if len(parts) > 4 else ""))
        elif line.startswith("per-node total"):
            total_line = line
        m = re.match(r"lower=conv conv=(\S+) .*fused into (\S+) as its dw item", line)
        if m:
            fused[m.group(1)] = m.group(2)
    summary = [l for l in r.stdout.splitlines() if l.startswith("op=graph ")]
    kv = dict(t.split("=", 1) for t in summary[-1].split() if "=" in t) if summary else {}
    return rows, fused, total_line, float(kv.get("after_best_ms", "nan"))


def openvino_fastest_profile(peer, feeds):
    """Warm-up infers, then OV_PROFILE_RUNS timed ones: (the fastest one's wall
    ms, its executed nodes [(node_name, node_type, exec_type, ms)])."""
    for _ in range(OV_PROFILE_WARMUP):
        peer.request.infer(feeds)
    best = (float("inf"), [])
    for _ in range(OV_PROFILE_RUNS):
        t = time.perf_counter()
        peer.request.infer(feeds)
        wall = (time.perf_counter() - t) * 1e3
        if wall < best[0]:
            best = (wall, [(p.node_name, p.node_type, p.exec_type, p.real_time.total_seconds() * 1e3)
                           for p in peer.request.get_profiling_info()
                           if p.status == ov.ProfilingInfo.Status.EXECUTED])
    return best


def onnx_convs(model):
    """The model's Conv/Gemm/MatMul nodes: [(label, op_type, {its name and
    output names})] in graph order."""
    g = onnx.load(model, load_external_data=False).graph
    return [(n.name or n.output[0], n.op_type, {k for k in [n.name] + list(n.output) if k})
            for n in g.node if n.op_type in ONNX_CONV_OPS]


def owner(name, keys, seps):
    """The index of the ONNX node whose longest key is `name` or begins it,
    followed by one of `seps`; None if none."""
    best, which = "", None
    for k, i in keys.items():
        if len(k) > len(best) and (name == k or any(name.startswith(k + s) for s in seps)):
            best, which = k, i
    return which


def descriptor(impl):
    """qconv's descriptor text in an implementation string and its fields."""
    m = re.search(r"\bg\d+mb\d+\S*", impl)
    if not m:
        return "", {}
    return m.group(0), {k: int(v) for k, v in re.findall(r"([a-z]+)(\d+)", m.group(0))}


def shape_class(f, stem, fc, dw_stride):
    """(sort key, label) of a convolution from its descriptor fields."""
    if stem:
        return (0, 0), "stem"
    if not f:
        return (9, 0), "?"
    ic, g, k, s = f.get("ic", 0), f.get("g", 1), (f.get("kh", 1), f.get("kw", 1)), f.get("sh", 1)
    if fc:
        return (7, ic), "fc K=%d" % ic
    if dw_stride:
        return (6, dw_stride), "1x1+dw s%d" % dw_stride
    if g > 1 and g == ic:
        return (5, s * 100 + k[0]), "depthwise %dx%d s%d" % (k[0], k[1], s)
    if k == (1, 1):
        return ((1, ic), "1x1 s1 K=%d" % ic) if s == 1 else ((2, s), "1x1 s%d" % s)
    return (3 if s == 1 else 4, s * 100 + k[0]), "%dx%d s%d" % (k[0], k[1], s)


def signed(v):
    return "%+.4f" % (0.0 if abs(v) < 5e-5 else v)


def natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def isa_check(cap, names):
    """A line on whether the primitive/row names keep under an ISA cap (by the
    names alone: amx above AVX512_CORE_AMX's level, avx512 above AVX2's)."""
    cap = cap.upper()
    banned = [] if "AMX" in cap else ["amx"]
    if not cap.startswith("AVX512") and "AMX" not in cap:
        banned.append("avx512")
    bad = sorted({n for n in names if any(b in n.lower() for b in banned)})
    if not banned:
        return "no cap below AMX to check"
    return ("honoured (no name has %s)" % " or ".join(banned) if not bad else
            "NOT honoured: %s" % ", ".join(bad))


def conv_table(model, feeds, threads, args, folder, extra, peer):
    """qconv's QConvolution rows joined with OpenVINO's Convolution /
    GroupConvolution / FullyConnected nodes of the same ONNX node, per layer,
    per shape class and in total."""
    rows, fused, total_line, after_best = qconv_layers(args.driver, model, feeds, folder, threads, args.reps, extra)
    convs = onnx_convs(model)
    keys = {k: i for i, (_, _, ks) in enumerate(convs) for k in ks}
    stem = next((i for i, c in enumerate(convs) if c[1] not in ONNX_FC_OPS), None)
    wall, prof = openvino_fastest_profile(peer, feeds)
    summed = sum(p[3] for p in prof)
    factor = wall / summed if summed > 0 else 1.0
    ov_conv = collections.defaultdict(list)  # ONNX index -> [(node, exec_type, scaled ms)]
    ov_loose, ov_total = [], 0
    for name, kind, exec_type, t in prof:
        if "Convolution" in kind or kind.startswith(("FullyConnected", "MatMul")):
            ov_total += 1
            i = owner(name, keys, ("/",))
            if i is None:
                ov_loose.append(name)
            else:
                ov_conv[i].append((name, exec_type, t * factor))
    dw_into = {}  # ONNX index of the 1x1 -> ONNX index of its fused dw
    for dw, into in fused.items():
        i, j = owner(into, keys, ("_",)), owner(dw, keys, ("_",))
        if i is not None and j is not None:
            dw_into[i] = j
    q_total = sum(r[2] for r in rows)
    joined, loose, covered = [], [], set()
    for node, op, qms, impl in rows:
        if op != "QConvolution":
            continue
        i = owner(node, keys, ("_",))
        if i is None:
            loose.append(node)
            continue
        j = dw_into.get(i) if ";dw:" in impl or node.endswith("_dw") else None
        parts = [i] + ([j] if j is not None else [])
        ovs = [x for p in parts for x in ov_conv.get(p, [])]
        if not ovs or any(p not in ov_conv for p in parts):
            loose.append(node)
            continue
        covered.update(parts)
        desc, f = descriptor(impl)
        m = re.search(r";dw:(\d+)", impl)
        dw_stride = int(m.group(1)) if m and j is not None else 0
        if dw_stride:
            desc += " +dw s%d" % dw_stride
        key, cls = shape_class(f, i == stem, convs[i][1] in ONNX_FC_OPS, dw_stride)
        label = "+".join(convs[p][0] for p in parts)
        row = impl.split()[0] if impl else "?"
        row = row[len("qconv:"):] if row.startswith("qconv:") else row
        prim = "+".join(sorted({x[1] for x in ovs}))
        joined.append((key, cls, label, desc, qms, row, sum(x[2] for x in ovs), prim))
    n_rows = sum(1 for r in rows if r[1] == "QConvolution")
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    print("  qconv vs openvino per convolution, %d thread(s)%s:" % (threads, (", ISA cap " + cap) if cap else ""))
    print("    qconv: the per-node laps of the fastest of %d profiled runs, %.4f ms (after_best_ms %.4f ms)" % (
        args.reps, q_total, after_best))
    print("    openvino: real_time of the fastest of %d profiled infers (after %d warm-up), summed %.4f ms, "
          "scaled by %.4f to its wall time %.4f ms" % (OV_PROFILE_RUNS, OV_PROFILE_WARMUP, summed, factor, wall))
    print("    joined %d of %d qconv convolution rows; ONNX Conv/Gemm/MatMul nodes covered %d of %d "
          "(%d as fused 1x1+dw pairs); openvino convolution nodes joined %d of %d" % (
              len(joined), n_rows, len(covered), len(convs), len(dw_into), ov_total - len(ov_loose), ov_total))
    if loose:
        print("    qconv rows not joined: %s" % ", ".join(loose))
    if ov_loose:
        print("    openvino nodes not joined: %s" % ", ".join(ov_loose))
    prims = collections.Counter(x[1] for v in ov_conv.values() for x in v)
    qrows = collections.Counter(j[5] for j in joined)
    print("    openvino convolution primitives: %s" % (", ".join("%s x%d" % kv for kv in prims.most_common()) or "none"))
    print("    qconv convolution rows: %s" % (", ".join("%s x%d" % kv for kv in qrows.most_common()) or "none"))
    if cap:
        print("    ISA cap %s: openvino %s; qconv %s" % (cap, isa_check(cap, prims), isa_check(cap, qrows)))
    if not rows:
        print("    qconv printed no per-node table (nothing lowered)")
    if not joined:
        return
    joined.sort(key=lambda j: (j[0], natural(j[2])))
    out = [("conv", "class", "descriptor", "qconv_ms", "qconv_row", "ov_ms", "ov_primitive", "ov/qconv")]
    for _, cls, label, desc, qms, row, oms, prim in joined:
        out.append((label, cls, desc, "%.4f" % qms, row, "%.4f" % oms, prim, "%.2f" % (oms / qms if qms else 0)))
    table(out, right=(3, 5, 7))
    by = collections.OrderedDict()
    for key, cls, _, _, qms, _, oms, _ in joined:
        c = by.setdefault(cls, [0, 0.0, 0.0])
        c[0] += 1
        c[1] += qms
        c[2] += oms
    jq, jo = sum(j[4] for j in joined), sum(j[6] for j in joined)
    print("  per shape class (ov/qconv above 1: qconv faster):")
    out = [("class", "count", "qconv_ms", "ov_ms", "ov/qconv", "qconv-ov")]
    for cls, (n, qms, oms) in by.items():
        out.append((cls, n, "%.4f" % qms, "%.4f" % oms, "%.2f" % (oms / qms if qms else 0), signed(qms - oms)))
    out.append(("convolutions", len(joined), "%.4f" % jq, "%.4f" % jo, "%.2f" % (jo / jq if jq else 0),
                signed(jq - jo)))
    out.append(("the rest", "", "%.4f" % (q_total - jq), "%.4f" % (wall - jo),
                "%.2f" % ((wall - jo) / (q_total - jq)) if q_total > jq else "", signed(q_total - jq - wall + jo)))
    out.append(("total", "", "%.4f" % q_total, "%.4f" % wall, "%.2f" % (wall / q_total if q_total else 0),
                signed(q_total - wall)))
    table(out, right=(1, 2, 3, 4, 5))
    gaps = sorted((j for j in joined if j[4] > j[6]), key=lambda j: j[6] - j[4])[:10]
    if gaps:
        print("  largest gaps where qconv is slower (qconv ms - ov ms):")
        out = [("conv", "class", "qconv_ms", "ov_ms", "gap")]
        for _, cls, label, _, qms, _, oms, _ in gaps:
            out.append((label, cls, "%.4f" % qms, "%.4f" % oms, signed(qms - oms)))
        table(out, right=(2, 3, 4))


def compare_model(model, sym, peers, threads, a, folder):
    ins, steps, all_dq = model_io(model, 1 if sym is None else sym)
    given = dict(kv.split("=", 1) for kv in a.input)
    ins = [(n, dt, np.load(given[n]).shape if n in given else shape) for n, dt, shape in ins]
    feeds = make_inputs(ins, a.seed, folder)
    for n, f in given.items():
        if n not in feeds:
            sys.exit("compare: --input=%s: the model has no input %s" % (n, n))
        feeds[n] = np.load(f).astype(feeds[n].dtype)
        np.save(os.path.join(folder, fname(n) + ".npy"), feeds[n])
    extra = list(a.driver_arg)
    if a.isa:
        extra.append("--isa=" + a.isa)
    if all_dq and not any(x.startswith("--tol") for x in extra):
        extra.append("--tol-steps=%d" % TOL_STEPS)
    label = os.path.basename(model) + ("" if sym is None else " tokens=%d" % sym)
    outs_desc = ", ".join("%s step=%s" % (n, "%.4g" % s if s else "none") for n, s in steps.items())
    print("\n%s  (outputs: %s; best of %d reps x %d rounds)" % (label, outs_desc, a.reps, a.rounds), flush=True)
    times = []  # (threads, qconv ms, status, {peer: ms or error})
    notes = {}  # what a reader must know about how a peer ran (insertion-ordered set)
    agree = []  # (threads, pair, output, max, differ, rel_l2)
    for t in threads:
        live = {}
        errors = {}
        for p in peers:
            try:
                live[p] = (OrtPeer if p == "ort" else OpenVinoPeer)(model, feeds, t, a)
            except Exception as e:  # a peer that cannot run this model: say so, go on
                errors[p] = short_error(e)
                if p == "ort" and a.ort_opt == "all":
                    # Its fused integer kernels refuse some valid models (QLinearConv takes one
                    # output zero point): the graph as written still gives its outputs and time.
                    try:
                        live[p] = OrtPeer(model, feeds, t, a, opt="none")
                        notes.setdefault("ort: its optimized session failed (%s); timed and compared as "
                                         "written (--ort-opt=none, QDQ in float)" % errors.pop(p), None)
                    except Exception as e2:
                        errors[p] += "; as written: " + short_error(e2)
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
    for n in notes:
        print("  " + n)
    if agree:
        multi = len(steps) > 1
        rows = [("agreement", "threads") + (("output",) if multi else ()) + ("max_steps", "differ%", "rel_l2")]
        for t, pair, n, mx, share, rel in agree:
            rows.append((pair, t) + ((n,) if multi else ()) + (mx, share, rel))
        table(rows, right=tuple(range(1, len(rows[0]))))
    if a.per_layer:
        everything = a.per_layer == "all"
        t = threads[0]
        ov_peer = None
        if "openvino" in peers and "openvino" not in failed:
            try:
                ov_peer = per_layer_openvino(model, feeds, t, a, everything)
            except Exception as e:
                print("  openvino per-layer: failed: %s" % short_error(e))
        if "ort" in peers and "ort" not in failed:
            try:
                per_layer_ort(model, feeds, t, a, everything, folder)
            except Exception as e:
                print("  ort per-layer: failed: %s" % short_error(e))
        if ov_peer is not None:
            try:
                conv_table(model, feeds, t, a, folder, extra, ov_peer)
            except Exception as e:
                print("  qconv vs openvino per convolution: failed: %s" % short_error(e))
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
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                    help="the input NAME from a NumPy file (its shape binds the symbolic dims), for every model")
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
    ap.add_argument("--isa", metavar="NAME",
                    help="cap the ISA: qconv-driver --isa=NAME and, for OpenVINO, ONEDNN_MAX_CPU_ISA (avx512_core_amx, "
                         "avx512_core_vnni, avx512_core, avx2_vnni, avx2 -> AVX512_CORE_AMX, ...); ORT stays uncapped")
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
    if a.isa:
        # Before OpenVINO is imported: its oneDNN reads the cap when it loads.
        os.environ["ONEDNN_MAX_CPU_ISA"] = ISA_ONEDNN.get(a.isa, a.isa.upper())
    import_peers()
    found = {"ort": ort, "openvino": ov}
    have = ["%s %s" % ("onnxruntime" if p == "ort" else "openvino", found[p].__version__.split("-")[0])
            for p in PEERS if found[p] is not None]
    print("compare: peers found: %s%s" % (", ".join(have) if have else "none",
          "" if len(have) == len(PEERS) else
          " (install the missing ones in a venv: python3 -m venv V && V/bin/pip install onnxruntime openvino "
          "onnx numpy; then V/bin/python bench/compare.py ...)"))
    peers = [p for p in wanted if found[p] is not None]
    print("compare: comparing qconv%s" % "".join(" with " + p if i == 0 else ", " + p for i, p in enumerate(peers)))
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA")
    print("compare: ISA caps: qconv %s; openvino %s; ort uncapped (its CPU provider's MLAS kernels do not "
          "read ONEDNN_MAX_CPU_ISA)" % (
              "--isa=" + a.isa if a.isa else "uncapped" + (" (ONEDNN_MAX_CPU_ISA=%s for its oneDNN rows)" % cap
                                                        if cap else ""),
              "ONEDNN_MAX_CPU_ISA=" + cap if cap else "uncapped"))
    if peers and not cpu_has_vnni():
        print("compare: this CPU has no VNNI: the peers' int8 kernels sum u8 x s8 pairs in 16 bits (vpmaddubsw), "
              "which saturates for large weight pairs, so their distance from qconv in steps includes that "
              "(bench/exactness.py measures it; qconv stays exact)")
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
