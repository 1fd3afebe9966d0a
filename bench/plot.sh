#!/usr/bin/env bash
# Turns Google Benchmark JSON (--benchmark_format=json) from bench_conv into a
# PNG bar chart: GOPS per layer, one bar per implementation, side by side.
#   build/bench/bench_conv --benchmark_format=json > conv.json
#   bench/plot.sh conv.json conv.png
# Benchmark names are "<impl>/<layer>"; the GOPS counter is plotted.
# A .tsv input is already the table to plot (header "layer<TAB>impl...", one
# row of GOPS per layer, '-' when missing): qconv-driver --report=table writes
# one next to its log.
set -euo pipefail
in=${1:?usage: plot.sh RESULT.json|RESULT.tsv OUT.png}
out=${2:-${in%.*}.png}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One row per layer, one column per implementation (missing cells are '-').
# The JSON is read with awk: Google Benchmark writes one field per line.
if [[ $in == *.tsv ]]; then
  cp "$in" "$tmp/data.tsv"
else
awk -F'"' '
  /"name":/     { name = $4 }
  /"run_type":/ { type = $4 }
  /"GOPS":/     { if (type == "aggregate") next
                  v = $3; gsub(/[:, ]/, "", v)
                  impl = name; sub(/\/.*/, "", impl)
                  layer = name; sub(/^[^\/]*\//, "", layer); sub(/\/.*/, "", layer); sub(/.*:/, "", layer)
                  if (!(impl in si)) { si[impl] = ++ni; impls[ni] = impl }
                  if (!(layer in sl)) { sl[layer] = ++nl; layers[nl] = layer }
                  g[impl, layer] = v }
  END { printf "layer"; for (i = 1; i <= ni; i++) printf "\t%s", impls[i]; print ""
        for (l = 1; l <= nl; l++) { printf "%s", layers[l]
          for (i = 1; i <= ni; i++) { k = impls[i] SUBSEP layers[l]; printf "\t%s", (k in g) ? g[k] : "-" }
          print "" } }' "$in" > "$tmp/data.tsv"
fi
ncol=$(head -1 "$tmp/data.tsv" | awk -F'\t' '{print NF}')
gnuplot <<GP
set terminal pngcairo size 1600,700 noenhanced
set output "$out"
set datafile separator "\t"
set datafile missing "-"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top right autotitle columnheader
set ylabel "GOPS"
set xtics rotate by -45 scale 0
set grid ytics
set title "qconv vs oneDNN per layer (higher is better)"
plot for [i=2:$ncol] "$tmp/data.tsv" using i:xtic(1)
GP
echo "wrote $out"
