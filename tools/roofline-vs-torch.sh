#!/usr/bin/env bash
# Every bench_roofline row next to PyTorch's rate for the same op, shapes, dtype and bytes
# (tools/roofline_torch.py) and next to memcpy, measured in one run: the two alternate for ROUNDS
# rounds, each side's row a mean over its calls (as Google Benchmark reports; a best single call
# flattered PyTorch's copies by 10-30 %), and each row keeps its best round per side.
# "x torch" above 1 is Mantissa faster; rows where PyTorch is faster are marked.
#   bash tools/roofline-vs-torch.sh                  # 1M elements, 1 and 2 threads, 2 rounds
#   bash tools/roofline-vs-torch.sh 'softmax.*/(64K|4M)/' 3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${BUILD_DIR:-build}
filter=${1:-/1M/} rounds=${2:-2}
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "roofline-vs-torch: PyTorch is not installed (apt-get install python3-torch)" >&2
  exit 1
fi
[[ -f $build/CMakeCache.txt ]] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
log=$(mktemp) rows=$(mktemp)
trap 'rm -f "$log" "$rows"' EXIT
cmake --build "$build" -j "${JOBS:-2}" --target bench_roofline >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
grep -q avx512f /proc/cpuinfo && export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export OMP_NUM_THREADS=2 # the pool both sides size their one- and two-thread rows from
for ((i = 0; i < rounds; i++)); do
  "$build/bench/bench_roofline" --benchmark_filter="($filter)|^memcpy/" --benchmark_min_time=0.05 2>/dev/null |
    sed 's/\x1b\[[0-9;]*m//g' |
    awk '/real_time/ { n = $1; sub("/real_time", "", n); g = $NF; sub("G/s", "", g); print n, "mantissa", g }' >>"$rows"
  /usr/bin/python3 tools/roofline_torch.py --filter "$filter" --min-time 0.1 |
    awk '$2 != "unsupported" { print $1, "torch", $2 }' >>"$rows"
done
/usr/bin/python3 - "$rows" "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    name, side, gbps = line.split()
    best[(name, side)] = max(best.get((name, side), 0.0), float(gbps))
print(f"# {sys.argv[2]}; best GB/s of each side over the rounds")
print(f"{'op/dtype/numel/threads':40} {'Mantissa':>9} {'PyTorch':>9} {'x torch':>8} {'memcpy':>9} {'share':>6}")
slower, below = 0, []
for name in sorted({n for n, s in best if s == "mantissa" and not n.startswith("memcpy")}):
    m, t = best[(name, "mantissa")], best.get((name, "torch"))
    _, dt, rest = name.split("/", 2)
    cp = best.get(("memcpy/" + ("e4/" if dt == "fp32" else "e2/") + rest, "mantissa"))
    mark = "  PyTorch faster" if t and t > m else ""
    slower += bool(mark)
    if cp and t and m < 0.5 * cp and rest.split("/")[0].endswith("M"):
        below.append(m / t)
    print(f"{name:40} {m:9.2f} {t if t else float('nan'):9.2f} {m / t if t else float('nan'):8.2f} "
          f"{cp if cp else float('nan'):9.2f} {100 * m / cp if cp else float('nan'):5.0f}%{mark}")
print(f"\n{slower} rows where PyTorch is faster")
if below:
    print(f"{len(below)} rows at >= 1M elements below 50 % of memcpy; against PyTorch they run "
          f"{min(below):.2f}x to {max(below):.1f}x its rate")
PY
