#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang-14, ASan + UBSan, CPU only) and runs each one.
#   bash tools/fuzz.sh [RUNS] [HARNESS...]     # RUNS per harness (default 100000);
#                                              # harnesses: safetensors checkpoint idx cifar
# Environment: BUILD_DIR (default build-fuzz), JOBS (default: cores), NICE (default 19),
# TMPDIR (where each input is written; default /dev/shm when writable).
# Each run starts from tests/fuzz/corpus/<harness> plus the files of tests/fixtures/hostile
# meant for that reader (by name: st_* for safetensors and checkpoint, idx_* for idx, cifar_*
# for cifar) that fit its input size limit (-max_len, below), keeps new coverage in
# build-fuzz/corpus/<harness> (not committed), and fails on any crash, leak, input slower
# than 1 s (-timeout) or allocation over 1 GB (-malloc_limit_mb, -rss_limit_mb). Afterwards
# every harness replays its grown corpus and ALL of tests/fixtures/hostile (as CTest does),
# printing the slowest input. Per harness it prints execs, exec/s and peak RSS; crashes are
# written to build-fuzz/artifacts/<harness>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install-deps.sh clang-14 libclang-rt-14-dev time  # libFuzzer, sanitizer runtimes, /usr/bin/time

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

# Each input is written to a file (the readers take paths): on tmpfs when there is one.
[[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]] && export TMPDIR=/dev/shm
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Largest input libFuzzer may make, per harness: room for the committed fixtures of that
# reader (the deep-nesting safetensors headers are 20 kB), and a few CIFAR records (3073 bytes
# each). The CIFAR cap keeps the 24 kB decompression-bomb fixture out of the mutated corpus:
# every mutant of it inflates 18 MB before the record limit stops it (41 exec/s instead of
# thousands). The bomb is still replayed below and by CTest (fuzz_replay.cifar).
declare -A max_len=([safetensors]=65536 [checkpoint]=65536 [idx]=4096 [cifar]=16384)
declare -A fixtures=([safetensors]=st_ [checkpoint]=st_ [idx]=idx_ [cifar]=cifar_)
# libFuzzer's -timeout is wall-clock time, and a process at nice 19 on a busy machine can be
# descheduled for over a second. So a timeout is replayed alone: if the input takes under
# 1 s of CPU time it was a stall, logged as such, and fuzzing resumes (the grown corpus kept)
# for the remaining runs; if it takes 1 s or more it is a real hang and fails the run.
cpu_seconds() {  # cpu_seconds CMD...: user + system seconds of CMD
  local t
  t=$(mktemp)
  /usr/bin/time -o "$t" -f "%U %S" "$@" >/dev/null 2>&1 || true
  awk '{ s = $1 + $2 } END { print (NR ? s : 99) }' "$t"  # no reading: counted as a hang
  rm -f "$t"
}
status=0
for h in "${harnesses[@]}"; do
  corpus=$build_dir/corpus/$h artifacts=$build_dir/artifacts/$h seeds=$build_dir/seeds/$h
  rm -rf "$seeds"
  mkdir -p "$corpus" "$artifacts" "$seeds"
  # The reader's own hostile fixtures that fit -max_len (longer ones libFuzzer would cut).
  find tests/fixtures/hostile -maxdepth 1 -type f -name "${fixtures[$h]}*" -size -"$((max_len[$h] + 1))"c \
    -exec cp {} "$seeds/" \;
  log=$build_dir/fuzz_$h.log
  : >"$log"
  echo "== fuzz_$h: $runs runs, inputs up to ${max_len[$h]} bytes"
  done_runs=0 seconds=0 peak_rss=0 stalls=0 segment=0
  while ((done_runs < runs)); do
    segment=$((segment + 1))
    seg_log=$build_dir/fuzz_$h.$segment.log
    t0=$(date +%s)
    ok=1
    "${nice[@]}" "$build_dir/tests/fuzz_$h" -runs=$((runs - done_runs)) -timeout=1 -malloc_limit_mb=1024 \
      -rss_limit_mb=1024 -max_len="${max_len[$h]}" -print_final_stats=1 -artifact_prefix="$artifacts/" \
      "$corpus" tests/fuzz/corpus/"$h" "$seeds" >"$seg_log" 2>&1 || ok=0
    seconds=$((seconds + $(date +%s) - t0))
    cat "$seg_log" >>"$log"
    execs=$(awk '/^stat::number_of_executed_units/ { print $2 }' "$seg_log")
    rss=$(awk '/^stat::peak_rss_mb/ { print $2 }' "$seg_log")
    done_runs=$((done_runs + ${execs:-0}))
    ((${rss:-0} > peak_rss)) && peak_rss=$rss
    ((ok)) && break
    unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$seg_log" | tail -1)
    if grep -q "^SUMMARY: libFuzzer: timeout" "$seg_log" && [[ -n $unit ]]; then
      cpu=$(cpu_seconds "$build_dir/tests/replay_fuzz_$h" "$unit")
      if awk -v c="$cpu" 'BEGIN { exit !(c < 1) }'; then
        echo "   stall after $done_runs runs: $unit took ${cpu} s of CPU replayed alone; resuming"
        stalls=$((stalls + 1))
        mkdir -p "$build_dir/stalls/$h"
        mv "$unit" "$build_dir/stalls/$h/"  # kept for a second look, out of the failures
        continue
      fi
      echo "   TIMEOUT reproduced: $unit takes ${cpu} s of CPU"
    fi
    echo "   FAILED (see $seg_log and $artifacts/)"
    grep -E "^SUMMARY|^==[0-9]+==.*ERROR" "$seg_log" | sed 's/^/   /' || true
    status=1
    break
  done
  echo "   executions: $done_runs in $seconds s ($((done_runs / (seconds > 0 ? seconds : 1))) exec/s)," \
    "peak RSS $peak_rss MB, $stalls stall(s) resumed"
  # The slowest input of the (grown) corpus and of all hostile fixtures, timed without libFuzzer.
  "${nice[@]}" "$build_dir/tests/replay_fuzz_$h" "$corpus" tests/fuzz/corpus/"$h" tests/fixtures/hostile | sed 's/^/   /' ||
    status=1
done
exit $status
