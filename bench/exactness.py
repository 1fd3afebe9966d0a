#!/usr/bin/env python3
"""Exactness of int8 convolution: qconv and the peers against integer arithmetic.

  bench/exactness.py [--driver=build/qconv-driver] [--peers=ort,openvino|none] [--threads=1] [--folder=DIR]

Writes small QDQ models (QuantizeLinear -> DequantizeLinear -> Conv -> QuantizeLinear
-> DequantizeLinear; u8 activations, per-channel s8 weights), runs each with
`qconv-driver graph` and with ONNX Runtime and OpenVINO where they import, and
compares every output with the integer result: the int32 sum of u8 x s8
products, scaled by sx*sw/sy, rounded half to even, plus the output zero
point (what an int8 engine computes; docs/semantics.md section 10). Prints per
case and engine the largest distance from it in output steps and the share
of outputs more than one step away.

The cases:
  pairs_1x1   1x1, IC 64: neighbouring input channels carry weights of the same
              sign whose magnitudes add up past 128 (|w| near 127 is what
              per-channel quantization gives each channel's largest weight),
              activations near 255;
  pairs_3x3   the same with a 3x3 window and padding 1;
  uniform     3x3, weights and activations uniform over their whole range.
A u8 x s8 product pair summed in 16 bits (vpmaddubsw, the int8 path of CPUs
without VNNI) overflows on the first two cases; the int32 sum does not.
Exit 1 when qconv is more than one step from the integer result anywhere
(the CTest `exactness_qconv` runs this with --peers=none); the peers' distances
are only reported.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("skipped: python3 cannot import onnx")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
SX, SY, ZY = 0.02, 4.0, 128  # input scale, output scale and zero point


def case_data(name, rng):
    """(weights [OC, IC, K, K] int8, per-channel scales, u8 input, pad)."""
    if name == "uniform":
        w = rng.integers(-127, 128, size=(32, 64, 3, 3)).astype(np.int8)
        x = rng.integers(0, 256, size=(1, 64, 12, 12))
        return w, np.full(32, 0.0005, np.float32), x, 1
    k = 1 if name == "pairs_1x1" else 3
    w = rng.integers(-127, 128, size=(16, 64, k, k)).astype(np.int8)
    w[:, 0::2] = rng.integers(100, 128, size=w[:, 0::2].shape)
    w[:, 1::2] = rng.integers(90, 128, size=w[:, 1::2].shape)
    w[1::2] = -w[1::2]  # odd output channels: both negative
    x = rng.integers(200, 256, size=(1, 64, 10, 10))
    return w, np.full(16, 0.01 / (k * k), np.float32), x, k // 2


def write_model(path, w, ws, shape, pad):
    oc = w.shape[0]
    c = lambda a, n: numpy_helper.from_array(np.asarray(a), n)
    inits = [c(np.float32(SX), "xs"), c(np.uint8(0), "xz"), c(w, "wq"), c(ws, "ws"), c(np.zeros(oc, np.int8), "wz"),
             c(np.float32(SY), "ys"), c(np.uint8(ZY), "yz")]
    k = w.shape[2]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["c"], kernel_shape=[k, k], pads=[pad] * 4),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    out = [1, oc, shape[2] + 2 * pad - k + 1, shape[3] + 2 * pad - k + 1]
    g = helper.make_graph(nodes, "exactness", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def integer_result(w, ws, xq, pad):
    """The int32 sums of u8 x s8 products, requantized (float64, half to even)."""
    k = w.shape[2]
    xp = np.pad(xq.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - k + 1, xp.shape[3] - k + 1
    acc = np.zeros((1, w.shape[0], oh, ow), np.int64)
    for i in range(k):
        for j in range(k):
            acc += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.int64), xp[:, :, i:i + oh, j:j + ow])
    q = np.clip(np.rint(acc * (SX * ws.astype(np.float64)[None, :, None, None]) / SY) + ZY, 0, 255)
    return ((q - ZY) * SY).astype(np.float32)


def run_qconv(driver, model, x_path, out_dir, threads):
    cmd = [driver, "graph", model, "--input=x=" + x_path, "--output-dir=" + out_dir, "--threads=%d" % threads,
           "--reps=1"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1):
        sys.exit("exactness: %s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr))
    return np.load(os.path.join(out_dir, "y.npy"))


def peer_runners(names, threads):
    runners = {}
    if "ort" in names:
        try:
            import onnxruntime as ort

            def run_ort(model, x):
                so = ort.SessionOptions()
                so.intra_op_num_threads = threads
                s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                return s.run(None, {"x": x})[0]
            runners["ort"] = run_ort
        except ImportError:
            print("exactness: onnxruntime does not import; left out")
    if "openvino" in names:
        try:
            import openvino as ov

            def run_ov(model, x):
                c = ov.Core().compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads})
                return c({"x": x})[c.output(0)]
            runners["openvino"] = run_ov
        except ImportError:
            print("exactness: openvino does not import; left out")
    return runners


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return "unknown"
    keep = [f for f in ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "amx_int8") if f in flags]
    return " ".join(keep) or "none of avx2, avx_vnni, avx512f, avx512_vnni, amx_int8"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--driver", default=os.path.join(HERE, "..", "build", "qconv-driver"))
    ap.add_argument("--peers", default="ort,openvino")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--folder", default=None)
    a = ap.parse_args()
    folder = a.folder or tempfile.mkdtemp(prefix="qconv_exactness_")
    os.makedirs(folder, exist_ok=True)
    peers = peer_runners([] if a.peers == "none" else a.peers.split(","), a.threads)
    print("exactness: CPU flags: %s; engines: qconv%s" % (cpu_flags(), "".join(", " + p for p in peers)))
    print("%-10s %-9s %9s %9s" % ("case", "engine", "max_steps", "off_by_>1"))
    worst = 0.0
    rng = np.random.default_rng(7)
    for name in ("pairs_1x1", "pairs_3x3", "uniform"):
        w, ws, xq, pad = case_data(name, rng)
        model = os.path.join(folder, name + ".onnx")
        write_model(model, w, ws, xq.shape, pad)
        x = (xq * SX).astype(np.float32)
        x_path = os.path.join(folder, name + ".x.npy")
        np.save(x_path, x)
        exact = integer_result(w, ws, xq, pad)
        outs = {"qconv": run_qconv(a.driver, model, x_path, os.path.join(folder, name + ".qconv"), a.threads)}
        for p, run in peers.items():
            outs[p] = run(model, x)
        for engine, y in outs.items():
            steps = np.abs(y.astype(np.float64) - exact) / SY
            print("%-10s %-9s %9.0f %8.1f%%" % (name, engine, steps.max(), 100.0 * np.mean(steps > 1.001)))
            if engine == "qconv":
                worst = max(worst, float(steps.max()))
    if worst > 1.001:
        print("exactness: FAILED: qconv is %.0f steps from the integer result" % worst)
        return 1
    print("exactness: qconv within 1 step of the integer result on every case (max %.0f)" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
