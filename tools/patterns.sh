#!/usr/bin/env bash
# Times one of bench/patterns/NAME.cpp against its PyTorch twin NAME.py, alternating the two
# ROUNDS times (default 2) on the same thread count, and prints each case's best time of the
# rounds for both and their ratio (Mantissa / PyTorch; below 1: Mantissa is faster).
#   bash tools/patterns.sh sweep7                  # every case, one thread, fp32
#   THREADS=2 AMP=1 bash tools/patterns.sh sweep8 lstm   # cases matching "lstm", bf16 autocast
#   bash tools/patterns.sh seg_gan seg [bf16]      # the whole-step programs: their own output
# Builds the program first (cmake --build build --target pattern_NAME). PyTorch: Debian's
# python3-torch at /usr/bin/python3, with OpenBLAS's AVX-512 kernels where the CPU has them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
name="${1:?usage: tools/patterns.sh NAME [ARGS...] (NAME: a file of bench/patterns)}"
shift
build="${BUILD_DIR:-build}"
threads="${THREADS:-1}"
rounds="${ROUNDS:-2}"
[[ -f "bench/patterns/$name.cpp" ]] || { echo "patterns: no bench/patterns/$name.cpp" >&2; exit 2; }
cmake --build "$build" --target "pattern_$name" >/dev/null
prog="$build/bench/patterns/$name"
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
grep -q avx512f /proc/cpuinfo && export OPENBLAS_CORETYPE=SkylakeX
# The programs read AMP when it is set at all: pass it on only when asked for.
run_env=(env -u AMP)
[[ "${AMP:-}" == 1 ]] && run_env=(env AMP=1)
lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/cpu: /'
echo "threads: $threads, rounds: $rounds, autocast: ${AMP:-off}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  "${run_env[@]}" "$prog" "$@" >"$tmp/m$r.txt"
  "${run_env[@]}" /usr/bin/python3 "bench/patterns/$name.py" "$@" >"$tmp/p$r.txt"
done
if ! grep -qE '^[A-Za-z0-9_]+ +[0-9.]+ us$' "$tmp/m1.txt"; then  # a whole-step program: its own lines
  cat "$tmp"/m*.txt "$tmp"/p*.txt
  exit 0
fi
awk '
  FNR == 1 { file++ }
  { t = $2 + 0; key = $1
    if (FILENAME ~ /\/m[0-9]+\.txt$/) { if (!(key in m) || t < m[key]) m[key] = t; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
    else if (!(key in p) || t < p[key]) p[key] = t }
  END { printf "%-22s %12s %12s %7s\n", "case", "mantissa us", "pytorch us", "ratio"
        for (i = 1; i <= n; ++i) { k = order[i]
          printf "%-22s %12.1f %12.1f %7.2f\n", k, m[k], p[k], (k in p && p[k] > 0) ? m[k] / p[k] : 0 } }
' "$tmp"/m*.txt "$tmp"/p*.txt
