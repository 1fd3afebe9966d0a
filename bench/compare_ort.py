#!/usr/bin/env python3
"""Runs ONNX models through qconv (qconv-driver graph) and, where it is
importable, ONNX Runtime, on the same inputs; prints per model the ms of each
at 1 and 2 threads, the ratio, and the agreement of the outputs.

  bench/compare_ort.py MODEL.onnx [MODEL.onnx ...] [--driver=build/qconv-driver]
                       [--threads=1,2] [--reps=10] [--seed=1] [--keep=DIR] [--tokens=1,32]
                       [--ort-config=KEY=VALUE ...] [--driver-arg=ARG ...]

qconv's time is the driver's after_best_ms (the graph after the passes, the
best of --reps runs; after_ms, the median, from drivers without it); ONNX Runtime's the best of --reps runs of InferenceSession.run
(CPU execution provider, graph optimizations ORT_ENABLE_ALL, intra-op threads
as given, inter-op 1) after one warm-up run. ratio = ORT ms / qconv ms (above 1:
qconv is faster). Agreement, per output: the largest difference in quantization
steps (the step is the scale of the DequantizeLinear that produces the output,
1 for an integer output; without one, the absolute difference is printed) and
the share of elements that differ at all; for a float output without a step
also max_rel, the largest difference over the largest |ORT value|.
qconv_status is the driver's own check of the lowered graph against the graph
as written in f32: within TOL_STEPS (8) quantization steps of the output when
every output is a DequantizeLinear of one scale (a quantized network: the
lowering may put a value one step off per layer, docs/semantics.md §10), else
within its f32 tolerance; a --driver-arg=--tol... replaces it.

A symbolic dim (dim_param, or none) is 1, or each of --tokens in turn (a line
per value, tokens=T), e.g. the FFN models' [1, tokens, 1024] input.
--ort-config=KEY=VALUE adds an ORT session config entry; ORT rewrites opset 21
blocked DequantizeLinear + MatMul into its MatMulNBits at accuracy level 4
(activations quantized to int8: ~3e-3 relative) unless given
session.qdq_matmulnbits_accuracy_level=0 (f32, as the model's semantics).

Inputs: f32 inputs uniform in [-1, 1), integer ones uniform over their range,
from --seed; written as .npy and given to the driver with --input. ONNX Runtime
is an optional peer (pip install onnxruntime on a machine that reaches PyPI),
never a build or test dependency: without it only qconv's times are printed.
numpy is needed; onnx (python3-onnx) finds the output steps.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

TOL_STEPS = 8  # qconv_status's bound in output steps for quantized networks

try:
    import onnx
    from onnx import numpy_helper
except ImportError:  # the steps are then unknown
    onnx = None
try:
    import onnxruntime as ort
except ImportError:
    ort = None

NP_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 10: np.float16}


def model_io(path, sym=1):
    """(inputs [(name, dtype, shape)], {output: step or None}) from the model file; symbolic
    dims are `sym`."""
    if onnx is None:
        return None, {}
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
        np.save(os.path.join(folder, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy"), v)
    return feeds


def run_qconv(driver, model, feeds, folder, threads, reps, extra=()):
    out = os.path.join(folder, "qconv_out_%d" % threads)
    cmd = [driver, "graph", model, "--threads=%d" % threads, "--reps=%d" % reps, "--output-dir=" + out]
    cmd += list(extra)
    for name in feeds:
        cmd.append("--input=%s=%s" % (name, os.path.join(folder, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy")))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Exit status 1 with a summary line: the driver's own comparison of the
    # graph as written and lowered went past its f32 tolerance (a lowered
    # network may differ by quantization steps, docs/semantics.md §10); the
    # agreement that matters here is the one with ONNX Runtime, printed below.
    if r.returncode != 0 and not (r.returncode == 1 and "op=graph " in r.stdout):
        sys.exit("compare_ort: %s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr))
    summary = [l for l in r.stdout.splitlines() if l.startswith("op=graph ")][-1]
    kv = dict(t.split("=", 1) for t in summary.split() if "=" in t)
    outs = {}
    for f in os.listdir(out):
        if f.endswith(".npy"):
            outs[f[:-4]] = np.load(os.path.join(out, f))
    return float(kv.get("after_best_ms", kv["after_ms"])), outs, kv.get("status", "?")


def run_ort(model, feeds, threads, reps, level, config=()):
    so = ort.SessionOptions()
    for kv in config:
        key, value = kv.split("=", 1)
        so.add_session_config_entry(key, value)
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[level]
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    res = s.run(names, feeds)  # warm-up
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        s.run(names, feeds)
        best = min(best, (time.perf_counter() - t) * 1e3)
    return best, dict(zip(names, res))


def agreement(q, o, step):
    q = q.astype(np.float64).reshape(-1)
    o = o.astype(np.float64).reshape(-1)
    if q.shape != o.shape:
        return "shapes differ"
    d = np.abs(q - o)
    share = float(np.mean(d > 0)) if d.size else 0.0
    if step:
        return "max_steps=%.3g differ=%.4f%%" % (float(d.max()) / step, 100 * share)
    m = float(np.abs(o).max()) if o.size else 0.0
    rel = (" max_rel=%.3g" % (float(d.max()) / m)) if m > 0 else ""
    return "max_abs=%.3g%s differ=%.4f%%" % (float(d.max()), rel, 100 * share)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--driver", default=os.path.join(root, "build", "qconv-driver"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the inputs and outputs in this folder")
    ap.add_argument("--tokens", help="comma-separated values for the symbolic dims (default 1), a line each")
    ap.add_argument("--ort-opt", default="all", choices=["all", "none"],
                    help="ORT's graph optimizations: all (the comparison: QDQ fused into its integer kernels) "
                         "or none (QDQ run as written, in float: the graph's own semantics)")
    ap.add_argument("--ort-config", action="append", default=[], metavar="KEY=VALUE",
                    help="an ORT session config entry (repeatable), e.g. "
                         "session.qdq_matmulnbits_accuracy_level=0: ORT fuses blocked DequantizeLinear + "
                         "MatMul into MatMulNBits at accuracy level 4 (int8 activations) unless told")
    ap.add_argument("--driver-arg", action="append", default=[], metavar="ARG",
                    help="an argument for qconv-driver graph (repeatable), e.g. --driver-arg=--dq "
                         "(the opt-in dynamic quantization of the compressed MatMul's activations)")
    a = ap.parse_args()
    if onnx is None:
        sys.exit("compare_ort: needs the onnx module (Debian: python3-onnx) to read the models' inputs")
    if ort is None:
        print("compare_ort: onnxruntime is not importable: qconv only (pip install onnxruntime for the comparison)")
    else:
        print("compare_ort: onnxruntime %s" % ort.__version__)
    threads = [int(t) for t in a.threads.split(",")]
    syms = [int(t) for t in a.tokens.split(",")] if a.tokens else [None]
    for model, sym in [(m, s) for m in a.models for s in syms]:
        folder = a.keep or tempfile.mkdtemp(prefix="compare_ort_")
        os.makedirs(folder, exist_ok=True)
        try:
            ins, steps, all_dq = model_io(model, 1 if sym is None else sym)
            feeds = make_inputs(ins, a.seed, folder)
            extra = list(a.driver_arg)
            if all_dq and not any(x.startswith("--tol") for x in extra):
                extra.append("--tol-steps=%d" % TOL_STEPS)
            for t in threads:
                qms, qouts, status = run_qconv(a.driver, model, feeds, folder, t, a.reps, extra)
                line = "model=%s%s threads=%d qconv_ms=%.3f qconv_status=%s" % (
                    os.path.basename(model), "" if sym is None else " tokens=%d" % sym, t, qms, status)
                if ort is not None:
                    oms, oouts = run_ort(model, feeds, t, a.reps, a.ort_opt, a.ort_config)
                    line += " ort_ms=%.3f ratio=%.3f" % (oms, oms / qms)
                    for name, ov in oouts.items():
                        qv = qouts.get(re.sub(r"[^A-Za-z0-9_.-]", "_", name))
                        line += " %s:%s" % (name, agreement(qv, ov, steps.get(name)) if qv is not None else "missing")
                print(line, flush=True)
        finally:
            if not a.keep:
                shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
