#!/usr/bin/env bash
# Installs ONNX Runtime for the exporter's runtime tests (tests/onnx/test_onnx_runtime.cpp):
# npm's onnxruntime-node, whose package carries libonnxruntime.so for linux-x64, into a cache
# folder outside the repository (MANTISSA_ORT_DIR, default ~/.cache/mantissa-ort). Needs node
# and npm (Debian: apt-get install nodejs npm). tools/onnx-run.js runs a model with it.
set -euo pipefail
dir="${MANTISSA_ORT_DIR:-$HOME/.cache/mantissa-ort}"
version="${MANTISSA_ORT_VERSION:-1.20.1}"
mkdir -p "$dir"
cd "$dir"
# --ignore-scripts: the package's install script would download a GPU build; the CPU library ships
# inside the tarball.
npm install --ignore-scripts --no-audit --no-fund "onnxruntime-node@$version"
node -e "require('onnxruntime-node'); console.log('onnxruntime-node $version in $dir')"
