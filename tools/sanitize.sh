#!/usr/bin/env bash
# Sanitizer builds of the test suite with clang-14 (CPU only; too slow for the 90-minute CI
# job, so run it by hand before a release; CI replays the fuzz corpus in every build instead):
#   bash tools/sanitize.sh [asan|tsan|all]      (default all)
#  asan: ASan + UBSan (with -fsanitize=float-cast-overflow: only clang reports float-to-int
#        casts) over the whole suite, in build-asan.
#  tsan: TSan over the DataLoader, autograd-engine and training tests (test_data,
#        test_autograd, test_train) and the two-thread programs of
#        test_reliability_threads (two threads training their own models, two running
#        inference on one shared model), in build-tsan. OMP_NUM_THREADS=1: the OpenMP
#        runtime is not TSan-instrumented, so its barriers would be reported as races.
# Environment: JOBS (default: cores), NICE (default 19), CTEST_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh clang-14 libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes

which=${1:-all}
nice=(nice -n "${NICE:-19}")
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMANTISSA_CUDA=OFF -DCMAKE_CXX_COMPILER=clang++-14
        -DMANTISSA_BUILD_BENCH=OFF)
status=0

if [[ $which == asan || $which == all ]]; then
  flags="-fsanitize=address,undefined -fsanitize=float-cast-overflow -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S . -B build-asan "${common[@]}" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  "${nice[@]}" cmake --build build-asan -j "${JOBS:-$(nproc)}"
  # allocator_may_return_null: tests that ask for absurd sizes expect a clean "out of memory".
  # The dist.* tests run without leak detection: Open MPI leaks ~120 KB at MPI_Finalize inside
  # its dlopen'ed components (unloaded by then, so no suppression can name them).
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    "${nice[@]}" ctest --test-dir build-asan --output-on-failure -j "${CTEST_JOBS:-2}" -E '^dist\.' || status=1
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    "${nice[@]}" ctest --test-dir build-asan --output-on-failure -j "${CTEST_JOBS:-2}" -R '^dist\.' || status=1
fi

if [[ $which == tsan || $which == all ]]; then
  cmake -S . -B build-tsan "${common[@]}" -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DMANTISSA_BUILD_EXAMPLES=OFF >/dev/null
  tsan_tests=(test_reliability_threads test_data test_autograd test_train)
  "${nice[@]}" cmake --build build-tsan -j "${JOBS:-$(nproc)}" --target "${tsan_tests[@]}"
  for t in "${tsan_tests[@]}"; do
    OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "${nice[@]}" build-tsan/tests/$t || status=1
  done
fi
exit $status
