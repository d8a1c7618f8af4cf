#!/usr/bin/env bash
# Sanitizer builds of the test suite with clang-14 (CPU only):
#   bash tools/sanitize.sh [asan|tsan|all]      (default all)
#  asan: ASan + UBSan (with -fsanitize=float-cast-overflow: only clang reports float-to-int
#        casts) over the whole suite, in build-asan. By hand (too slow for CI, which replays
#        the fuzz corpus in every build instead).
#  tsan: TSan over the two-thread programs of test_reliability_threads (two threads training
#        their own models, two running inference on one shared model through oneDNN) and the
#        DataLoader, autograd-engine and training tests (test_data, test_autograd, test_train),
#        in build-tsan. CI's last step (tools/run-tests.sh): cold, about 530 CPU-seconds to
#        build the library and these four tests and run them (about 5 minutes on 2 cores; the
#        runs are about 40 s of it; docs/reliability.md "Threads").
# TSan runs with OMP_NUM_THREADS=1: the OpenMP runtime (clang's libomp, and the libgomp of
# libdnnl) is not TSan-instrumented, so its barriers would be reported as races. For the same
# reason TSan ignores what uninstrumented libraries do (ignore_noninstrumented_modules, as
# libomp's own warning advises): each DataLoader worker sets its OpenMP team size, and libomp
# hands a finished worker's per-thread block to the next under its own (invisible) lock. The build
# needs oneDNN (MANTISSA_ONEDNN=ON), so the two-thread programs go through its primitives.
# Environment: JOBS (default: cores), NICE (default 19), CTEST_JOBS (default 2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
which=${1:-all}
[[ $which == asan || $which == tsan || $which == all ]] || { echo "usage: $0 [asan|tsan|all]" >&2; exit 2; }
# libFuzzer and the sanitizer runtimes, and clang's OpenMP runtime (libomp: the library's
# find_package(OpenMP) with clang).
bash tools/install-deps.sh clang-14 libclang-rt-14-dev libomp-14-dev

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
  # -O1 and line tables only: a quicker build, and all TSan's stacks need. The libraries TSan
  # does not need (examples, benchmarks, ONNX, MPI) are not configured.
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B build-tsan "${common[@]}" "${launcher[@]}" -DMANTISSA_BUILD_EXAMPLES=OFF -DMANTISSA_ONEDNN=ON \
    -DMANTISSA_ONNX=OFF -DMANTISSA_DIST=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
  tsan_tests=(test_reliability_threads test_data test_autograd test_train)
  "${nice[@]}" cmake --build build-tsan -j "${JOBS:-$(nproc)}" --target "${tsan_tests[@]}"
  # clang-14's TSan cannot map its shadow memory with more than 28 bits of mmap randomness
  # (newer kernels' default is 32): run the tests without address randomization there.
  norandom=()
  if (($(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28) > 28)); then norandom=(setarch "$(uname -m)" -R); fi
  for t in "${tsan_tests[@]}"; do
    OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1 \
      "${nice[@]}" "${norandom[@]}" build-tsan/tests/$t || status=1
  done
fi
exit $status
