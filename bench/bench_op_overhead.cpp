// Per-op cost where the data is small and dispatch dominates: a chain of differentiable
// elementwise ops and one matmul on a [64, 64] float32 tensor, forward + backward, with
// autocast off and on (on: every op reads its autocast entry and the matmul runs in bf16).
// The numbers are for comparing two builds of the library in one run (the design steps that
// touched op registration, node naming and autocast lookups must not slow this down); the
// memcpy of the same 16 KiB is the floor next to them.
//   build/bench/bench_op_overhead --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include <cstring>
#include <vector>

namespace mt = mantissa;

namespace {

constexpr int64_t kSide = 64;

// x: [64, 64] -> scalar; 9 elementwise ops, one matmul, one sum.
mt::Tensor chain(const mt::Tensor& x, const mt::Tensor& w) {
  mt::Tensor h = mt::tanh(x) * x + mt::sigmoid(x);
  h = mt::softplus(h) - mt::exp(h * 0.5);
  h = mt::matmul(h, w);
  return mt::relu(h).sum();
}

void op_chain(benchmark::State& state, bool autocast, bool backward) {
  mt::manual_seed(3);
  mt::Tensor x = mt::randn({kSide, kSide});
  mt::Tensor w = mt::randn({kSide, kSide});
  x.requires_grad_(backward);
  w.requires_grad_(backward);
  for (auto _ : state) {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(mt::kBFloat16, autocast);
      loss = chain(x, w);
    }
    if (backward) loss.backward();
    benchmark::DoNotOptimize(loss.raw_data());
  }
  state.counters["ops"] = benchmark::Counter(11.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}

void forward_fp32(benchmark::State& s) { op_chain(s, false, false); }
void forward_autocast(benchmark::State& s) { op_chain(s, true, false); }
void train_fp32(benchmark::State& s) { op_chain(s, false, true); }
void train_autocast(benchmark::State& s) { op_chain(s, true, true); }

void memcpy_16k(benchmark::State& state) {
  std::vector<float> src(kSide * kSide, 1.0f), dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
}

BENCHMARK(forward_fp32)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(forward_autocast)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(train_fp32)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(train_autocast)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(memcpy_16k)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
