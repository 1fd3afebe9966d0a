#!/usr/bin/env bash
# The layering check (CTest `layering`): every project include in the library
# and the driver points down (or within its folder), as docs/architecture.md
# states. Prints each include that points up and exits 1 when there is one.
#
#   include/qconv  the public API            qconv
#   core           its plumbing              + core
#   rows           the row interface         + rows
#   reference      the reference rows        + reference
#   kernels        JIT and oneDNN rows       + kernels
#   dispatch       tables, selection, cache  + dispatch
#   graph          on top, primitives only   qconv, core, and by stage:
#     graph/ir       IR, shape inference     + graph/ir
#     graph/ops      what each op computes   + graph/ir, graph/ops
#     graph/io       ONNX, text, npy         + graph/ir, graph/ops, graph/io
#     graph/passes   rewrites, lowering      + graph/ir, graph/ops, graph/passes
#     graph/exec     the executor            + graph/ir, graph/ops, graph/exec
#   tools          the driver                everything below graph, tests/support/testdata.h
#
# The kernel library (target qconv: include/qconv less graph*.h, core, rows,
# reference, kernels, dispatch) links no ONNX or protobuf and knows nothing of
# the graph library (target qconv_graph: graph/, include/qconv/graph*.h): none
# of its files includes a graph header (qconv/graph*.h, graph/) or an ONNX or
# protobuf header, in either include form.
set -euo pipefail
cd "$(dirname "$0")/.."

allowed() { # folder -> allowed include prefixes
  case "$1" in
    include/qconv) echo "qconv/" ;;
    core) echo "qconv/ core/" ;;
    rows) echo "qconv/ core/ rows/" ;;
    reference) echo "qconv/ core/ rows/ reference/" ;;
    kernels) echo "qconv/ core/ rows/ reference/ kernels/" ;;
    dispatch) echo "qconv/ core/ rows/ reference/ kernels/ dispatch/" ;;
    graph/ir) echo "qconv/ core/ graph/ir/" ;;
    graph/ops) echo "qconv/ core/ graph/ir/ graph/ops/" ;;
    graph/io) echo "qconv/ core/ graph/ir/ graph/ops/ graph/io/" ;;
    graph/passes) echo "qconv/ core/ graph/ir/ graph/ops/ graph/passes/" ;;
    graph/exec) echo "qconv/ core/ graph/ir/ graph/ops/ graph/exec/" ;;
    tools) echo "qconv/ core/ rows/ reference/ kernels/ dispatch/ tools/ tests/support/testdata.h" ;;
  esac
}

# Every graph source sits in one of the stage folders.
for f in graph/*; do
  if [ -f "$f" ]; then
    echo "layering: $f is outside the graph stages (graph/ir, ops, io, passes, exec)"
    exit 1
  fi
done

bad=0
for folder in include/qconv core rows reference kernels dispatch graph/ir graph/ops graph/io graph/passes graph/exec tools; do
  read -r -a ok <<<"$(allowed "$folder")"
  while IFS= read -r hit; do
    file=${hit%%:*}
    inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$hit")
    fine=0
    for prefix in "${ok[@]}"; do
      [[ $inc == "$prefix"* ]] && fine=1
    done
    if [ "$fine" -eq 0 ]; then
      echo "layering: $file includes \"$inc\", above its layer ($folder may include: ${ok[*]})"
      bad=1
    fi
  done < <(grep -rnE '^#include "' "$folder" --include='*.h' --include='*.cpp' || true)
done
# The kernel library's files: no graph, ONNX or protobuf header.
while IFS= read -r hit; do
  file=${hit%%:*}
  [[ $file == include/qconv/graph* ]] && continue
  inc=$(sed -E 's/.*#include [<"]([^>"]+)[>"].*/\1/' <<<"$hit")
  echo "layering: $file includes \"$inc\": the qconv library (kernels, dispatch, core) does not see the graph library, ONNX or protobuf"
  bad=1
done < <(grep -rnE '^#include [<"](qconv/graph|graph/|onnx/|google/protobuf/)' include/qconv core rows reference kernels dispatch \
  --include='*.h' --include='*.cpp' --include='*.hpp' --include='*.inc' || true)
# Inside kernels/jit/: the families' folders (docs/architecture.md).
jit_allowed() {
  case "$1" in
    base) echo "base" ;;
    conv) echo "base conv" ;;
    conv_dw) echo "base conv conv_dw" ;;
    conv_amx) echo "base conv conv_amx" ;;
    matmul) echo "base matmul" ;;
    *) echo "" ;;
  esac
}
for dir in kernels/jit/*/; do
  family=$(basename "$dir")
  read -r -a ok <<<"$(jit_allowed "$family")"
  if [ "${#ok[@]}" -eq 0 ]; then
    echo "layering: $dir is not a family of docs/architecture.md's kernels/jit table"
    bad=1
    continue
  fi
  while IFS= read -r hit; do
    file=${hit%%:*}
    inc=$(sed -E 's/.*#include "kernels\/jit\/([^/"]+)\/.*/\1/' <<<"$hit")
    fine=0
    for f in "${ok[@]}"; do [[ $inc == "$f" ]] && fine=1; done
    if [ "$fine" -eq 0 ]; then
      echo "layering: $file includes kernels/jit/$inc/, above its family ($family may include: ${ok[*]})"
      bad=1
    fi
  done < <(grep -rnE '^#include "kernels/jit/' "$dir" --include='*.h' --include='*.cpp' || true)
done
if compgen -G "kernels/jit/*.h" >/dev/null || compgen -G "kernels/jit/*.cpp" >/dev/null; then
  echo "layering: kernels/jit/ holds files outside a family folder: $(ls kernels/jit/*.h kernels/jit/*.cpp 2>/dev/null | tr '\n' ' ')"
  bad=1
fi
[ "$bad" -eq 0 ] && echo "layering: every include points down; the qconv library includes no graph, ONNX or protobuf header"
exit "$bad"
