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
#   graph          on top, primitives only   qconv, core, graph
#   tools          the driver                everything below graph, tests/support/testdata.h
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
    graph) echo "qconv/ core/ graph/" ;;
    tools) echo "qconv/ core/ rows/ reference/ kernels/ dispatch/ tools/ tests/support/testdata.h" ;;
  esac
}

bad=0
for folder in include/qconv core rows reference kernels dispatch graph tools; do
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
[ "$bad" -eq 0 ] && echo "layering: every include points down"
exit "$bad"
