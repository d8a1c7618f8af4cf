#!/bin/bash
# CTest smoke test of the DCGAN example (examples/dcgan/CMakeLists.txt).
# Usage: smoke_test.sh path/to/dcgan
set -u
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
quick=(--limit 512 --batch-size 32 --width 8 --noise 16 --epochs 2 --seed 1)

# 1. fp16 under one GradScaler, then bf16: both models train (the discriminator tells real
# from generated: D(x) > D(G(z))), losses are finite, a sample grid per epoch is a PNG.
for amp in fp16 bf16; do
  out=$("$bin" "${quick[@]}" --amp "$amp" --samples-dir "$work/$amp") || fail "$amp run failed: $out"
  echo "$out" | grep -E '^(epoch|final)'
  line=$(echo "$out" | grep '^final:') || fail "$amp: no final line"
  real=$(echo "$line" | sed -n 's/.* D(x)=\([0-9.]*\).*/\1/p')
  fake=$(echo "$line" | sed -n 's/.* D(G(z))=\([0-9.]*\).*/\1/p')
  awk -v r="$real" -v f="$fake" 'BEGIN { exit !(r > f) }' || fail "$amp: D(x) $real not above D(G(z)) $fake"
  echo "$line" | grep -Eq 'd_loss=[0-9]+\.[0-9]+ g_loss=[0-9]+\.[0-9]+' || fail "$amp: non-finite losses: $line"
  for e in 1 2; do
    png="$work/$amp/samples-epoch$e.png"
    [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$png is not a PNG"
  done
done

# 2. Bad flags fail with a message.
err=$("$bin" --amp fp8 2>&1) && fail "--amp fp8 was accepted"
echo "$err" | grep -q "amp" || fail "no message for --amp fp8: $err"
err=$("$bin" --data-dir "$work/none" 2>&1) && fail "a missing data dir was accepted"
echo "$err" | grep -q "cannot read the data set" || fail "no message for a missing data dir: $err"
echo "dcgan smoke test passed"
