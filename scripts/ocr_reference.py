#!/usr/bin/env python3
"""The three PP-OCR models of the PyPI wheel rapidocr-onnxruntime 1.4.4 (text
detection, direction classification, recognition) through `qconv-driver graph`
and ONNX Runtime on the same fixed inputs; prints per model the largest
absolute difference of the outputs and that difference over the largest
|ONNX Runtime output| (max_rel).

  scripts/ocr_reference.py [--models=DIR] [--cache=DIR] [--driver=build/qconv-driver]
                           [--out=DIR] [--seed=1] [--threads=N] [--tol=1e-3]

Needs numpy and onnxruntime (a venv: python3 -m venv V && V/bin/pip install
onnxruntime numpy; then V/bin/python scripts/ocr_reference.py). The models are
read from --models, else from CACHE/rapidocr_onnxruntime/models, where this
script installs the wheel (pip install --no-deps --target CACHE
rapidocr-onnxruntime==1.4.4) when they are absent; the library never needs it.
CACHE defaults to ~/.cache/qconv/rapidocr.

Inputs ([1, 3, H, W] f32, each written to OUT/NAME.input.npy): uniform in
[-1, 1) from --seed for det (1x3x640x640), cls (1x3x48x192) and rec
(1x3x48x320), and for det also the synthetic document page of
scripts/ocr_demo.py (`det_page`). The driver reads each model with its input's
shape bound (--input=x=FILE: every symbolic dim takes its value) and writes
its output to OUT/NAME/; ONNX Runtime's is OUT/NAME.ort.npy (for det_page:
scripts/ocr_demo.py iou OUT/det_page.ort.npy OUT/det_page/*.npy). Exit status
1 when some max_rel is above --tol.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

MODELS = [
    ("det", "ch_PP-OCRv4_det_infer.onnx", (1, 3, 640, 640)),
    ("cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192)),
    ("rec", "ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320)),
]
WHEEL = "rapidocr-onnxruntime==1.4.4"


def models_dir(args):
    if args.models:
        return args.models
    cache = args.cache or os.path.expanduser("~/.cache/qconv/rapidocr")
    d = os.path.join(cache, "rapidocr_onnxruntime", "models")
    if not all(os.path.isfile(os.path.join(d, f)) for _, f, _ in MODELS):
        print(f"installing {WHEEL} into {cache}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", cache, WHEEL],
                       check=True)
    return d


def page_input(out):
    """The synthetic page of scripts/ocr_demo.py (None when it cannot be made)."""
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ocr_demo.py")
    base = os.path.join(out, "det_page")
    r = subprocess.run([sys.executable, demo, "page", base, "--size=640"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"det_page skipped: ocr_demo.py failed: {r.stderr.strip()}", file=sys.stderr)
        return None
    return np.load(base + ".npy").astype(np.float32)


def ort_run(model, x, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def qconv_run(driver, model, in_file, out_dir, threads):
    cmd = [driver, "graph", model, f"--input=x={in_file}", f"--output-dir={out_dir}", "--reps=1"]
    if threads:
        cmd.append(f"--threads={threads}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    summary = [l for l in r.stdout.splitlines() if l.startswith("op=graph")]
    if r.returncode != 0 or not summary:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    ms = dict(kv.split("=", 1) for kv in summary[-1].split() if "=" in kv).get("after_ms", "?")
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    if len(files) != 1:
        raise RuntimeError(f"{out_dir}: expected one output file, found {files}")
    return np.load(os.path.join(out_dir, files[0])), ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models")
    ap.add_argument("--cache")
    ap.add_argument("--driver", default="build/qconv-driver")
    ap.add_argument("--out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    mdir = models_dir(args)
    out = args.out or tempfile.mkdtemp(prefix="ocr_reference.")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    cases = [(name, f, rng.uniform(-1, 1, size=shape).astype(np.float32)) for name, f, shape in MODELS]
    page = page_input(out)
    if page is not None:
        cases.insert(1, ("det_page", MODELS[0][1], page))
    bad = 0
    for name, f, x in cases:
        model = os.path.join(mdir, f)
        in_file = os.path.join(out, name + ".input.npy")
        np.save(in_file, x)
        ref = ort_run(model, x, args.threads)
        np.save(os.path.join(out, name + ".ort.npy"), ref)
        got, ms = qconv_run(args.driver, model, in_file, os.path.join(out, name), args.threads)
        if got.shape != ref.shape:
            print(f"model={name} shape={list(got.shape)} ort_shape={list(ref.shape)} status=mismatch")
            bad += 1
            continue
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        max_abs = float(diff.max())
        max_ref = float(np.abs(ref).max())
        rel = max_abs / max_ref if max_ref > 0 else (0.0 if max_abs == 0 else float("inf"))
        ok = rel <= args.tol
        bad += not ok
        print(f"model={name} input={list(x.shape)} output={list(ref.shape)} max_abs_diff={max_abs:.3g} "
              f"max_abs_ort={max_ref:.3g} max_rel={rel:.3g} qconv_ms={ms} status={'ok' if ok else 'mismatch'}")
    print(f"files in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
