#!/bin/sh
# CTest case driver_graph_onnx_ffn_*: an FFN model of scripts/make_models.py
# (--reference) run by `qconv-driver graph` on the script's input, at every
# cap given (auto, then e.g. avx2): both MatMuls must run on a compressed
# MatMul row (jit:matmul_wc_*, never the reference), and the output must be
# within MAX_REL of the float64 reference, relative to its largest value
# (docs/semantics.md §7 bounds each element by 1e-5 · Σ|x·deq(w)|).
#   check_ffn_model.sh DRIVER PYTHON MAKE_MODELS MODEL_BASE MAX_REL [ISA ...]
driver=$1 python=$2 script=$3 base=$4 max_rel=$5
shift 5
if [ ! -f "$base.expected.npy" ]; then
  echo "skipped: $base.expected.npy was not made (onnx_make_models skipped or failed)"
  exit 0
fi
for isa in auto "$@"; do
  cap=""
  [ "$isa" = auto ] || cap="--isa=$isa"
  out=$("$driver" graph "$base.onnx" --input=x="$base.input.npy" --output-dir="$base.out.$isa" \
    --reps=1 --threads=1 $cap 2>&1) || { echo "$out"; exit 1; }
  echo "$out" | tail -n 1
  rows=$(echo "$out" | grep -c '^graph=after .* op=MatMul impl="jit:matmul_wc_')
  if [ "$rows" != 2 ]; then
    echo "$out" | grep 'op=MatMul'
    echo "check_ffn_model: $isa: $rows of the 2 MatMuls on a jit:matmul_wc row"
    exit 1
  fi
  "$python" "$script" --compare-rel "$base" "$base.out.$isa/y.npy" "$max_rel" || exit 1
done
