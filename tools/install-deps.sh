#!/usr/bin/env bash
# Installs Mantissa's build, test and data dependencies on Debian 12, and only what is
# missing: when every package is present it runs no apt-get at all (CI and repeat runs
# stay fast, and work offline). Extra package names may be passed as arguments.
#   bash tools/install-deps.sh [extra-package ...]
set -euo pipefail

packages=(
  cmake make g++             # the toolchain (g++ brings libgomp for OpenMP)
  libeigen3-dev              # Eigen 3.4: CPU GEMM and vectorised math
  zlib1g-dev                 # reading .gz IDX files
  libgtest-dev libgmock-dev googletest  # GoogleTest / GoogleMock: tests/
  libbenchmark-dev           # Google Benchmark: bench/
  nlohmann-json3-dev         # test fixtures, safetensors headers
  libcli11-dev               # example argument parsing
  libopenmpi-dev openmpi-bin # distributed/: data-parallel training over MPI (mpirun in the tests)
  dataset-fashion-mnist      # default data: /usr/share/datasets/fashion-mnist
  fortunes                   # transformer example text: /usr/share/games/fortunes
  clang-format               # tools/format.sh: the style check CI runs
  clang-tidy                 # tools/tidy.sh: bugprone/performance checks on changed files
  libdnnl-dev                # oneDNN 2.6: bf16/fp32 CPU matmul and convolution (optional: Eigen without it)
  libonnx-dev libprotobuf-dev  # ONNX 1.12 + protobuf: the exporter, mantissa::onnx (optional: not built without them)
  python3-onnx               # the examples' --export smoke tests check the written model with onnx.checker
  libonnx-testdata           # ONNX's backend node tests, run through Mantissa's ops (tests/onnx/test_onnx_node_suite.cpp)
  nodejs                     # tools/onnx-run.js runs ONNX Runtime (installed once by tools/onnx-runtime.sh with npm; its test skips without it)
  python3-matplotlib         # tools/plot_runs.py only (plots of --metrics files); no build or test needs it
  "$@"
)

# One dpkg-query for all; db:Status-Status is "installed" only when fully installed
# (not for config-files or half-installed leftovers). Unknown names print nothing.
declare -A installed=()
while read -r name status; do
  [[ $status == installed ]] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  [[ -n ${installed[$p]:-} ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
