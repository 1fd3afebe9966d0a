#!/usr/bin/env bash
# Installs what is missing, builds Release into build/ and runs the main job:
# qconv-driver over ResNet-50 (mb1), u8:s8:u8 with a per-channel zero point and
# a per-channel FakeQuantize, correctness + performance, every implementation
# side by side; then the dispatcher's choice against oneDNN brgconv (ratio=) with a
# per-tensor zero point; then the graph example (examples/ffn_u4.qg) without and with
# the conv1x1 -> MatMul rewrite; then a quantized ResNet-50 read from ONNX (generated once into
# build/models/ by scripts/make_models.py), judged in output steps as every quantized network is
# (tol=steps:8: status=ok means the lowered int8 network is within 8 quantization steps of the
# output of the same network run as written in f32); last PP-OCRv4's text detector (fetched once
# from PyPI into build/models/ocr/ by scripts/ocr_demo.py; skipped when PyPI cannot be reached) on a
# synthetic page, its regions boxed in build/reports/ocr/page_boxes.png, and the same detector quantized by
# ONNX Runtime against ONNX Runtime and OpenVINO where a Python with them is given (QCONV_PEERS_PYTHON;
# page_boxes_qdq.png). The conv jobs print a table (--report=table):
# one row per layer, unimplemented runs collapsed to one line per implementation,
# totals, and last the folder (build/reports/<timestamp>/) with the raw key=value
# log and a plot. Extra arguments are passed to the conv runs (e.g. --threads=1).
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"

qconv_install_deps
qconv_configure
qconv_build qconv-driver

driver="$QCONV_BUILD/qconv-driver"
# One int8 peak per run: the first table measures it (best of seven pinned runs,
# its spread printed), the later tables of this run read it from this file.
export QCONV_PEAK_FILE="$QCONV_BUILD/peak.$$.txt"
trap 'rm -f "$QCONV_PEAK_FILE"' EXIT

echo "== conv: ResNet-50 mb1, u8:s8:u8, per-channel zp, FakeQuantize per channel, all implementations"
"$driver" conv --batch="$QCONV_ROOT/bench/shapes/shapes_resnet_50" --mb=1 \
  --dt=u8:s8:u8 --zp=channel:random --post-ops=fq:per_channel \
  --mode=CP --impl=all --report=table "$@"

echo "== conv: ResNet-50 mb1, u8:s8:u8, per-tensor zp, ReLU: the dispatcher's choice against oneDNN brgconv (ratio)"
"$driver" conv --batch="$QCONV_ROOT/bench/shapes/shapes_resnet_50" --mb=1 \
  --dt=u8:s8:u8 --zp=tensor:128 --post-ops=relu --mode=P --impl=auto --report=table "$@"

echo "== graph: transformer feed-forward block (u4 weights, group 128) before/after the conv1x1 -> MatMul rewrite"
"$driver" graph "$QCONV_ROOT/examples/ffn_u4.qg"

echo "== graph: quantized ResNet-50 (QDQ, u8 activations, per-channel s8 weights; ONNX, made by scripts/make_models.py) as written and after the passes"
models="$QCONV_BUILD/models"
[ -f "$models/resnet50_qdq.onnx" ] ||
  /usr/bin/python3 "$QCONV_ROOT/scripts/make_models.py" "$models" --models=resnet50_qdq --size=224
"$driver" graph "$models/resnet50_qdq.onnx" --reps=1

echo "== graph: PP-OCRv4's text detector (the model PyPI's rapidocr-onnxruntime 1.4.4 ships) on a synthetic page, as written and after the passes; the regions it finds boxed on the page"
ocr="$models/ocr"
ocr_report="$QCONV_BUILD/reports/ocr"
fetched=0
/usr/bin/python3 "$QCONV_ROOT/scripts/ocr_demo.py" fetch "$ocr" || fetched=$?
if [ "$fetched" -eq 3 ]; then
  echo "skipped: PyPI cannot be reached for the model (scripts/ocr_demo.py fetch)"
elif [ "$fetched" -ne 0 ]; then
  echo "skipped: the model could not be fetched (scripts/ocr_demo.py fetch exited $fetched, its reason above)"
else
  rm -rf "$ocr_report" && mkdir -p "$ocr_report"
  /usr/bin/python3 "$QCONV_ROOT/scripts/ocr_demo.py" page "$ocr_report/page"
  "$driver" graph "$ocr/ch_PP-OCRv4_det_infer.onnx" --input=x="$ocr_report/page.npy" \
    --output-dir="$ocr_report/det" --reps=1
  /usr/bin/python3 "$QCONV_ROOT/scripts/ocr_demo.py" boxes "$ocr_report/page" "$ocr_report"/det/*.npy \
    "$ocr_report/page_boxes.png"
  echo "== graph: the same detector quantized by ONNX Runtime (quantize_static, QDQ) on the page, its regions boxed; qconv against ONNX Runtime and OpenVINO, 1 thread"
  # The quantized model and the peers need ONNX Runtime from PyPI, which the library
  # never does: a Python that has onnxruntime, onnx and numpy (QCONV_PEERS_PYTHON, else
  # python3 when it has them). The probability map's last quantization step is up to
  # 0.9 in logits, so a level one step apart in it moves a pixel's probability by up
  # to 204 output steps: the run is judged per pixel share (at most 3 % differing;
  # ONNX Runtime and OpenVINO differ from each other on 1.4 %), the regions by
  # scripts/ocr_reference.py check (IoU of the p > 0.3 regions against ONNX Runtime's).
  peers_py="${QCONV_PEERS_PYTHON:-}"
  if [ -z "$peers_py" ] && python3 -c "import onnxruntime, onnx, numpy" 2>/dev/null; then peers_py=python3; fi
  if [ -z "$peers_py" ]; then
    echo "skipped: needs ONNX Runtime (python3 -m venv V && V/bin/pip install onnxruntime openvino onnx numpy; then QCONV_PEERS_PYTHON=V/bin/python ./run.sh)"
  else
    data="${QCONV_OCR_REFERENCE:-$HOME/.cache/qconv/ocr_reference}"
    [ -f "$data/det_qdq.onnx" ] || "$peers_py" "$QCONV_ROOT/scripts/ocr_reference.py" make "$data" --models="$ocr"
    "$driver" graph "$data/det_qdq.onnx" --input=x="$ocr_report/page.npy" --output-dir="$ocr_report/det_qdq" \
      --reps=1 --tol-steps=255:0.03
    /usr/bin/python3 "$QCONV_ROOT/scripts/ocr_demo.py" boxes "$ocr_report/page" "$ocr_report"/det_qdq/*.npy \
      "$ocr_report/page_boxes_qdq.png"
    "$peers_py" "$QCONV_ROOT/bench/compare.py" "$ocr/ch_PP-OCRv4_det_infer.onnx" \
      --input=x="$ocr_report/page.npy" --driver="$driver" --threads=1 --reps=3 --rounds=2
    "$peers_py" "$QCONV_ROOT/bench/compare.py" "$data/det_qdq.onnx" \
      --input=x="$ocr_report/page.npy" --driver="$driver" --threads=1 --reps=3 --rounds=2 \
      --driver-arg=--tol-steps=255:0.03
  fi
fi

# Further main jobs follow here, each one driver command with a heading line.
