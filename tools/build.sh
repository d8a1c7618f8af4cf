#!/usr/bin/env bash
# Configures and builds Mantissa (Release, CUDA backend when nvcc is found).
#   bash tools/build.sh [--target NAME]... [-DVAR=VALUE]...
# Environment: BUILD_DIR (default build), BUILD_TYPE (Release), MANTISSA_CUDA (AUTO|ON|OFF),
# JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${BUILD_DIR:-build}
targets=()
cmake_args=()
while (($#)); do
  case $1 in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done

cmake -S . -B "$build_dir" \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DMANTISSA_CUDA="${MANTISSA_CUDA:-AUTO}" \
  "${cmake_args[@]}"
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"
