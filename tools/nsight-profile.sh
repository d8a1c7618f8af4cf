#!/usr/bin/env bash
# Records the MNIST example's AMP training with NVIDIA's profilers on a GPU machine and prints
# where the time went and how busy the tensor cores were (docs/profiling.md):
#   1. Nsight Systems over a short run: the timeline with Mantissa's NVTX ranges (ops, modules
#      by dotted path, backward nodes, optimizer, scaler, data, one "train_step" per step),
#      then the NVTX and GPU-kernel summaries.
#   2. Nsight Compute over exactly one training step (the NVTX range train_step): per kernel,
#      the tensor pipes' utilization (sm__pipe_tensor_op_hmma_cycles_active, and on Hopper
#      the warpgroup MMA pipe sm__pipe_tensor_op_gmma_cycles_active), SM and DRAM throughput.
#   3. The built-in profiler on a few steps (without ncu's kernel replay): each GEMM's FLOPs
#      over its CUDA-event time, and the AMP report.
#
#   tools/nsight-profile.sh [build-dir]        # default build dir: build-nsight (configured and built here)
#   AMP=bf16 MODEL=mlp OUT=/tmp/ns tools/nsight-profile.sh
# Needs: an NVIDIA GPU, nvidia-smi, nsys and ncu (the CUDA toolkit's Nsight tools, on PATH or in
# /usr/local/cuda/bin), the CUDA build dependencies, Debian's dataset-fashion-mnist, python3.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-nsight}
amp=${AMP:-fp16}
model=${MODEL:-cnn}
out=${OUT:-$build/nsight}
jobs=${JOBS:-$(nproc)}

die() {
  echo "nsight-profile: $*" >&2
  exit 1
}

[[ $amp == fp16 || $amp == bf16 ]] || die "AMP must be fp16 or bf16, not '$amp'"
[[ $model == cnn || $model == mlp ]] || die "MODEL must be cnn or mlp, not '$model'"
PATH=$PATH:/usr/local/cuda/bin
command -v nvidia-smi >/dev/null || die "no nvidia-smi: this needs a machine with an NVIDIA GPU and its driver"
gpu=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -n1 || true)
[[ -n $gpu ]] || die "nvidia-smi finds no GPU"
command -v nsys >/dev/null || die "nsys (Nsight Systems) not found on PATH or in /usr/local/cuda/bin"
command -v ncu >/dev/null || die "ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin"
command -v python3 >/dev/null || die "python3 is needed to summarise the reports"
[[ -d /usr/share/datasets/fashion-mnist ]] || die "no Fashion-MNIST: apt-get install dataset-fashion-mnist"
echo "== GPU: $gpu; $(nsys --version | head -n1); $(ncu --version | tail -n1)"

# The example, built for this GPU only (compute capability "9.0" -> 90).
arch=$(echo "$gpu" | awk -F', *' '{print $2}' | tr -d ' .')
exe=$build/examples/mnist/mnist
if [[ ! -x $exe ]]; then
  echo "== building $exe (CUDA architecture ${arch:-default})"
  arch_flag=()
  [[ $arch =~ ^[0-9]+$ ]] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMANTISSA_CUDA=ON -DMANTISSA_BUILD_TESTS=OFF \
    -DMANTISSA_BUILD_BENCH=OFF -DMANTISSA_BUILD_EXAMPLES=ON "${arch_flag[@]}" >/dev/null
  cmake --build "$build" -j "$jobs" --target mnist >/dev/null
fi
mkdir -p "$out"
# NVTX ranges on whatever the environment says; a few host threads (the GPU does the work).
export MANTISSA_NVTX=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
args=(--device cuda --amp "$amp" --model "$model" --epochs 1)

echo "== the example runs on the GPU"
"$exe" "${args[@]}" --limit 256 >"$out/check.log" 2>&1 || {
  cat "$out/check.log"
  die "the example failed on cuda (built without CUDA? remove $build and rerun)"
}

echo "== 1. Nsight Systems: 32 steps ($out/timeline.nsys-rep)"
nsys profile --trace=cuda,nvtx,osrt --force-overwrite=true --output="$out/timeline" \
  "$exe" "${args[@]}" --limit 4096 --batch-size 128 >"$out/nsys-run.log" 2>&1 || {
  tail -n 20 "$out/nsys-run.log"
  die "nsys profile failed"
}
# Report names since Nsight Systems 2023 (nvtx_sum, cuda_gpu_kern_sum), else the older ones.
nsys stats --force-export=true --format=table --report nvtx_sum --report cuda_gpu_kern_sum \
  "$out/timeline.nsys-rep" >"$out/nsys-stats.txt" 2>&1 ||
  nsys stats --force-export=true --format=table --report nvtxsum --report gpukernsum \
    "$out/timeline.nsys-rep" >"$out/nsys-stats.txt" 2>&1 || {
  cat "$out/nsys-stats.txt"
  die "nsys stats failed"
}
head -n 80 "$out/nsys-stats.txt"

echo "== 2. Nsight Compute: one training step ($out/step.ncu-rep)"
metrics=gpu__time_duration.sum
metrics+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed
# Hopper (9.x) and later run large GEMMs as warpgroup MMAs, counted on their own pipe.
if [[ $arch =~ ^[0-9]+$ ]] && ((arch >= 90)); then
  metrics+=,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
fi
# --limit 128 with batch 128: exactly one step, which the NVTX range train_step encloses.
if ! ncu --nvtx --nvtx-include "train_step/" --metrics "$metrics" --force-overwrite --export "$out/step" \
  "$exe" "${args[@]}" --limit 128 --batch-size 128 >"$out/ncu-run.log" 2>&1; then
  tail -n 20 "$out/ncu-run.log"
  grep -q ERR_NVGPUCTRPERM "$out/ncu-run.log" &&
    echo "GPU performance counters need permission: run as root, or see NVIDIA's ERR_NVGPUCTRPERM page" >&2
  die "ncu failed"
fi
ncu --import "$out/step.ncu-rep" --csv --page raw >"$out/step.csv"

echo "== 3. the built-in profiler: 3 steps after 5 of warmup ($out/builtin.json)"
"$exe" "${args[@]}" --limit 2048 --batch-size 128 --profile "$out/builtin.json" --amp-report >"$out/builtin.log" 2>&1 || {
  tail -n 20 "$out/builtin.log"
  die "the profiled run failed"
}
sed -n '/^AMP report/,/^epoch/p' "$out/builtin.log" | grep -v '^epoch'

echo "== per-kernel tensor-core utilization (one $amp training step of the $model)"
python3 - "$out/step.csv" "$out/builtin.json" <<'EOF'
import csv, json, sys
from collections import defaultdict

# ncu --page raw: a header row, a units row, then one row per profiled kernel launch.
rows = [r for r in csv.reader(open(sys.argv[1], newline="")) if r]
start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
header, data = rows[start], rows[start + 2:]
col = {name: header.index(name) for name in header}
def value(row, metric):
    try:
        return float(row[col[metric]].replace(",", ""))
    except (KeyError, ValueError):
        return float("nan")
tensor = [m for m in ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                      "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active") if m in col]
kernels = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])  # launches, ns, ns-weighted tensor %, SM %, DRAM %
for r in data:
    ns = value(r, "gpu__time_duration.sum")
    k = kernels[r[col["Kernel Name"]][:70]]
    k[0] += 1
    k[1] += ns
    k[2] += ns * max((value(r, m) for m in tensor), default=0.0)
    k[3] += ns * value(r, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    k[4] += ns * value(r, "dram__throughput.avg.pct_of_peak_sustained_elapsed")
total = sum(k[1] for k in kernels.values()) or 1.0
print(f"{'kernel':72} {'calls':>5} {'time us':>9} {'% step':>7} {'tensor %':>9} {'SM %':>6} {'DRAM %':>7}")
for name, (n, ns, t, sm, dram) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
    print(f"{name:72} {n:5d} {ns / 1e3:9.1f} {100 * ns / total:7.1f} {t / ns if ns else 0:9.1f} "
          f"{sm / ns if ns else 0:6.1f} {dram / ns if ns else 0:7.1f}")
busy = sum(k[2] for k in kernels.values()) / total
print(f"{len(data)} kernel launches, {total / 1e3:.1f} us; tensor pipes busy {busy:.1f}% of the step's kernel time")

# The built-in profiler's steps: the FLOPs it counted over each op's CUDA-event time.
events = json.load(open(sys.argv[2]))["traceEvents"]
gemms = defaultdict(lambda: [0, 0.0, 0.0])
for e in events:
    a = e.get("args", {})
    if e.get("cat") == "op" and a.get("flops") and a.get("gpu_ms", -1) > 0:
        g = gemms[(e["name"], a["compute_dtype"], a["shapes"])]
        g[0] += 1
        g[1] += a["gpu_ms"]
        g[2] += a["flops"]
print(f"\n{'GEMM-shaped op (built-in profiler)':60} {'dtype':>9} {'calls':>5} {'GPU ms':>8} {'TFLOP/s':>8}")
for (name, dtype, shapes), (n, ms, flops) in sorted(gemms.items(), key=lambda kv: -kv[1][1]):
    print(f"{(name + ' ' + shapes)[:60]:60} {dtype:>9} {n:5d} {ms:8.3f} {flops / ms / 1e9:8.2f}")
EOF
echo "== reports in $out: timeline.nsys-rep (nsys-ui), step.ncu-rep (ncu-ui), builtin.json (ui.perfetto.dev)"
