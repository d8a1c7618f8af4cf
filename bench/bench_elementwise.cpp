// Elementwise float32 ops at 16M elements (64 MiB per tensor, far beyond cache): add, relu
// and gelu as a user calls them (a new result tensor per call), next to memcpy of one tensor
// into a preallocated buffer. Bandwidth counts bytes read + written: add moves 3 tensors,
// relu/gelu and memcpy 2. Goal: each op >= 0.5x memcpy's bandwidth. memcpy_omp, the copy
// on all OpenMP threads, is shown too: the ops are threaded, plain memcpy is not.
//   build/bench/bench_elementwise --benchmark_min_time=0.2
#include <mantissa.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "ratio_reporter.h"

namespace mt = mantissa;

namespace {

constexpr int64_t kNumel = int64_t(1) << 24;

// Untimed calls before the timed loop. The first result buffers are memory the process
// has not touched yet, and on these VMs faulting in 64 MiB of it costs ~200 ms (the host
// backs guest pages lazily): timed, that one iteration outlasts --benchmark_min_time and
// is reported as the op's time. After these calls the caching allocator hands the same
// block back every iteration.
template <typename Op>
void warm_up(Op op) {
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(op().raw_data());
}

void set_bytes(benchmark::State& state, int tensors_moved) {
  state.counters["BYTES"] =
      benchmark::Counter(double(tensors_moved) * double(kNumel) * sizeof(float) * double(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

template <typename Op>
void unary_op(benchmark::State& state, Op op) {
  mt::manual_seed(1);
  mt::Tensor x = mt::randn({kNumel});
  warm_up([&] { return op(x); });
  for (auto _ : state) {
    mt::Tensor y = op(x);
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2);
}

void mantissa_add(benchmark::State& state) {
  mt::manual_seed(1);
  mt::Tensor a = mt::randn({kNumel}), b = mt::randn({kNumel});
  warm_up([&] { return a + b; });
  for (auto _ : state) {
    mt::Tensor y = a + b;
    benchmark::DoNotOptimize(y.raw_data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3);
}

void mantissa_relu(benchmark::State& state) {
  unary_op(state, [](const mt::Tensor& x) { return mt::relu(x); });
}

void mantissa_gelu(benchmark::State& state) {
  unary_op(state, [](const mt::Tensor& x) { return mt::gelu(x); });
}

void memcpy_baseline(benchmark::State& state) {
  std::vector<float> src = mt::randn({kNumel}).to_vector<float>(), dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2);
}

// The same copy split over the OpenMP threads the ops use: the bandwidth ceiling for them.
void memcpy_omp(benchmark::State& state) {
  std::vector<float> src = mt::randn({kNumel}).to_vector<float>(), dst(src.size());
  for (auto _ : state) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t b = kNumel * t / nt, e = kNumel * (t + 1) / nt;
      std::memcpy(dst.data() + b, src.data() + b, size_t(e - b) * sizeof(float));
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2);
}

}  // namespace

int main(int argc, char** argv) {
  for (auto [name, fn] : {std::pair{"memcpy", &memcpy_baseline}, std::pair{"memcpy_omp", &memcpy_omp},
                          std::pair{"mantissa_add", &mantissa_add}, std::pair{"mantissa_relu", &mantissa_relu},
                          std::pair{"mantissa_gelu", &mantissa_gelu}})
    benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMillisecond)->UseRealTime();
  std::vector<mantissa_bench::RatioReporter::Pair> pairs;
  for (const char* base : {"memcpy", "memcpy_omp"})
    for (const char* op : {"mantissa_add", "mantissa_relu", "mantissa_gelu"})
      pairs.push_back({std::string(op) + "/real_time", std::string(base) + "/real_time", "BYTES"});
  return mantissa_bench::run(argc, argv, pairs);
}
