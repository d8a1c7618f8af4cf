#!/bin/bash
# CTest smoke test of the transformer example (examples/transformer/CMakeLists.txt).
# Usage: smoke_test.sh path/to/transformer
set -u
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A tiny text with a learnable pattern: 3 000 characters of "abc abd abe ..." lines.
for i in $(seq 1 250); do printf 'abc abd abe\n'; done > "$work/tiny.txt"
tiny=(--text "$work/tiny.txt" --layers 1 --heads 2 --d-model 16 --context 16 --batch-size 8 --lr 1e-2
      --warmup 2 --eval-every 0 --eval-batches 2 --seed 3)

# 1. Training lowers the loss; the sample holds only characters of the text.
out=$("$bin" "${tiny[@]}" --steps 40 --sample 80 --prompt "ab" --dropout 0.1) || fail "training run failed: $out"
echo "$out" | grep '^final:'
first=$(echo "$out" | sed -n 's/^final:.* first_loss=\([0-9.]*\).*/\1/p')
last=$(echo "$out" | sed -n 's/^final:.* train_loss=\([0-9.]*\).*/\1/p')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "loss did not fall: $first -> $last"
sample=$(echo "$out" | sed -n '/^--- sample/,/^--- end of sample/p' | sed '1d;$d')
[ -n "$sample" ] || fail "no sample"
[ -z "$(printf '%s' "$sample" | tr -d 'abcde \n')" ] || fail "sample has characters outside the vocabulary: $sample"

# 2. Exact resume: 12 steps straight == 6 steps, stop, resume to 12 (fp16 AMP with dropout:
# model, optimizer, scheduler, scaler, RNG and data position all have to come back).
resume_args=("${tiny[@]}" --steps 12 --amp fp16 --dropout 0.1 --sample 0)
straight=$("$bin" "${resume_args[@]}" | sed -n 's/^final:.* params=\([0-9a-f]*\).*/\1/p')
"$bin" "${resume_args[@]}" --stop-at 6 --save "$work/ck.safetensors" > /dev/null || fail "interrupted run failed"
resumed=$("$bin" "${resume_args[@]}" --resume "$work/ck.safetensors" | sed -n 's/^final:.* params=\([0-9a-f]*\).*/\1/p')
[ -n "$straight" ] && [ "$straight" = "$resumed" ] || fail "resumed parameters $resumed != uninterrupted $straight"
echo "resume: parameters $resumed in both runs"

# 2b. The LSTM language model (--model lstm) learns the same text, under fp16 autocast too.
for amp in off fp16; do
  out=$("$bin" "${tiny[@]}" --model lstm --steps 40 --sample 0 --amp "$amp") || fail "lstm $amp run failed: $out"
  echo "$out" | grep '^final:'
  first=$(echo "$out" | sed -n 's/^final:.* first_loss=\([0-9.]*\).*/\1/p')
  last=$(echo "$out" | sed -n 's/^final:.* train_loss=\([0-9.]*\).*/\1/p')
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' || fail "lstm $amp: loss did not fall: $first -> $last"
done

# 3. Bad input: a clear message and a non-zero exit.
expect_error() {  # expect_error "message part" args...
  local want=$1
  shift
  local msg
  if msg=$("$bin" "$@" 2>&1); then fail "no error for: $*"; fi
  echo "$msg" | grep -q -- "$want" || fail "error for '$*' lacks '$want': $msg"
  echo "ok: $(echo "$msg" | tail -1)"
}
: > "$work/empty.txt"
printf 'abc\xff\xfeabc\n' > "$work/latin1.txt"
printf 'short text\n' > "$work/short.txt"
expect_error "is empty" --text "$work/empty.txt"
expect_error "not valid UTF-8" --text "$work/latin1.txt"
expect_error "longer than the context" --text "$work/short.txt" --context 16
expect_error "was written for" --text "$work/tiny.txt" --layers 1 --heads 2 --d-model 32 --context 16 --steps 12 \
  --resume "$work/ck.safetensors"
expect_error "not in the vocabulary" "${tiny[@]}" --steps 1 --sample 5 --prompt "xyz"
expect_error "cannot open" --text "$work/missing.txt"
expect_error "model" "${tiny[@]}" --model rnn
expect_error "supports --model gpt only" "${tiny[@]}" --model lstm --steps 1 --export "$work/lstm.onnx"
echo "transformer smoke test passed"
