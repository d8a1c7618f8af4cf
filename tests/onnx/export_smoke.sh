#!/bin/bash
# CTest smoke test of an example's --export (tests/onnx_examples.cmake):
#   export_smoke.sh WORK_DIR path/to/example [args...]
# Trains briefly with --save and --export, then exports again from --resume alone (no training);
# both files must pass ONNX's checker with full shape inference (python3-onnx, when installed).
set -u
work=$1
bin=$2
shift 2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
args=("$@")
if [[ "$(basename "$bin")" == transformer ]]; then
  for i in $(seq 1 250); do printf 'abc abd abe\n'; done > "$work/tiny.txt"
  args+=(--text "$work/tiny.txt")
fi
out=$("$bin" "${args[@]}" --save "$work/ck.safetensors" --export "$work/trained.onnx" 2>&1) || fail "training run: $out"
echo "$out" | grep '^exported' || fail "no export message: $out"
out=$("$bin" "${args[@]}" --resume "$work/ck.safetensors" --export "$work/resumed.onnx" 2>&1) || fail "resumed run: $out"
echo "$out" | grep '^exported' || fail "no export message after --resume: $out"
for f in trained resumed; do
  [ -s "$work/$f.onnx" ] || fail "$f.onnx missing"
  [ ! -e "$work/$f.onnx.tmp" ] || fail "$f.onnx.tmp left behind"
done
cmp -s "$work/trained.onnx" "$work/resumed.onnx" || fail "the model exported from --resume differs from the trained one"
if /usr/bin/python3 -c "import onnx" 2> /dev/null; then
  /usr/bin/python3 - "$work/trained.onnx" << 'PY' || fail "ONNX checker"
import sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
print("onnx checker ok:", [i.name for i in m.graph.input], "->", [o.name for o in m.graph.output], len(m.graph.node), "nodes")
PY
fi
echo "ok"
