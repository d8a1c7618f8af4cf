#!/usr/bin/env bash
# Compares bench_roofline binaries row by row in one run: the binaries alternate for ROUNDS
# rounds and each row keeps its best GB/s per binary (on a shared machine, the minimum time is
# the least disturbed). Counts of rows below the 50 % line move with the memcpy baseline from run
# to run; a row's GB/s between two builds measured this way is what a kernel change is judged by.
#   cp build/bench/bench_roofline /tmp/roofline-before   # then rebuild
#   bash tools/roofline-ab.sh 'softmax|layer_norm' 3 /tmp/roofline-before build/bench/bench_roofline
set -euo pipefail
(($# >= 3)) || { echo "usage: $0 FILTER ROUNDS BINARY..." >&2; exit 1; }
filter=$1 rounds=$2
shift 2
for ((i = 0; i < rounds; i++)); do
  for b in "$@"; do
    "$b" --benchmark_filter="$filter" --benchmark_min_time=0.05 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
      awk -v bin="$b" '/real_time/ { n = $1; sub("/real_time", "", n); g = $NF; sub("G/s", "", g); print n, bin, g }'
  done
done | awk '{ k = $1 " " $2; if (!(k in best) || $3 > best[k]) best[k] = $3 } END { for (k in best) print k, best[k] }' |
  sort | awk '{ if ($1 != row) { if (row != "") print ""; printf "%-40s", $1; row = $1 } printf "  %s %s GB/s", $2, $3 } END { print "" }'
