// float32 matmul: mantissa::matmul (allocating its result, as user code does) next to a raw
// Eigen GEMM on row-major maps into preallocated buffers, both on the same OpenMP threads.
// Goal: mantissa >= 0.9x raw Eigen.
//   build/bench/bench_matmul --benchmark_min_time=0.2
#include <mantissa.h>

// GCC 12 reports -Wmaybe-uninitialized false positives inside Eigen's AVX-512 GEMM.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <string>
#include <vector>

#include "ratio_reporter.h"

namespace mt = mantissa;

namespace {

constexpr int64_t kSizes[] = {256, 512, 1024, 2048};

void set_flops(benchmark::State& state, int64_t n) {
  // kIsRate: divided by the measured time, so this reads as FLOP/s (printed with a G suffix).
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(state.iterations()),
                                               benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void mantissa_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  mt::manual_seed(1);
  mt::Tensor a = mt::randn({n, n}), b = mt::randn({n, n});
  for (auto _ : state) {
    mt::Tensor c = mt::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

void eigen_gemm(benchmark::State& state) {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t n = state.range(0);
  mt::manual_seed(1);
  std::vector<float> a = mt::randn({n, n}).to_vector<float>(), b = mt::randn({n, n}).to_vector<float>();
  std::vector<float> c(size_t(n * n));
  Eigen::Map<const RowMat> A(a.data(), n, n), B(b.data(), n, n);
  Eigen::Map<RowMat> C(c.data(), n, n);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<mantissa_bench::RatioReporter::Pair> pairs;
  for (int64_t n : kSizes) {
    // Interleaved, so both sides of a pair see the same machine state.
    benchmark::RegisterBenchmark("eigen_gemm", eigen_gemm)->Arg(n)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("mantissa_matmul", mantissa_matmul)
        ->Arg(n)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    const std::string arg = std::to_string(n) + "/real_time";
    pairs.push_back({"mantissa_matmul/" + arg, "eigen_gemm/" + arg, "FLOPS"});
  }
  return mantissa_bench::run(argc, argv, pairs);
}
