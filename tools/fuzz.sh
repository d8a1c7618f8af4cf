#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, ASan + UBSan, CPU only) and runs each one.
#   bash tools/fuzz.sh [RUNS] [HARNESS...]     # RUNS per harness (default 100000);
#                                              # harnesses: safetensors checkpoint idx cifar
# Environment: BUILD_DIR (default build-fuzz), JOBS (default: cores), NICE (default 19).
# Each run starts from tests/fuzz/corpus/<harness> plus tests/fixtures/hostile, keeps new
# coverage in build-fuzz/corpus/<harness> (not committed), and fails on any crash, leak,
# input slower than 1 s (-timeout) or allocation over 1 GB (-malloc_limit_mb, -rss_limit_mb).
# Per harness it prints execs, peak RSS and the slowest replayed input; crashes are written
# to build-fuzz/artifacts/<harness>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh clang-14 libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes

runs=${1:-100000}
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(safetensors checkpoint idx cifar)
build_dir=${BUILD_DIR:-build-fuzz}
nice=(nice -n "${NICE:-19}")

flags="-fsanitize=fuzzer-no-link,address,undefined -fsanitize=float-cast-overflow -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O1 with line tables: quick to build, fast enough to fuzz, readable stack traces.
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
  -DMANTISSA_CUDA=OFF -DMANTISSA_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DMANTISSA_BUILD_EXAMPLES=OFF -DMANTISSA_BUILD_BENCH=OFF >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=(--target "fuzz_$h" --target "replay_fuzz_$h"); done
"${nice[@]}" cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in "${harnesses[@]}"; do
  corpus=$build_dir/corpus/$h artifacts=$build_dir/artifacts/$h
  mkdir -p "$corpus" "$artifacts"
  log=$build_dir/fuzz_$h.log
  echo "== fuzz_$h: $runs runs"
  if ! "${nice[@]}" "$build_dir/tests/fuzz_$h" -runs="$runs" -timeout=1 -malloc_limit_mb=1024 -rss_limit_mb=2048 \
      -max_len=1048576 -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "$corpus" tests/fuzz/corpus/"$h" tests/fixtures/hostile >"$log" 2>&1; then
    echo "   FAILED (see $log and $artifacts/)"
    status=1
  fi
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done|SUMMARY" "$log" | sed 's/^/   /' || true
  # The slowest input of the (grown) corpus, timed without libFuzzer.
  "${nice[@]}" "$build_dir/tests/replay_fuzz_$h" "$corpus" tests/fuzz/corpus/"$h" tests/fixtures/hostile | sed 's/^/   /' ||
    status=1
done
exit $status
