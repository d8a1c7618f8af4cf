// What the built-in profiler costs on the MNIST example's MLP training step (CPU, batch 128):
//   mlp_step_off          profiling off: every op pays one branch (the reference)
//   mlp_step_off_again    the same again, as a measure of the noise between identical runs
//   mlp_step_profiled     a profiler::Profile recording every op, module and backward node
//   op_range_inactive     one inactive OpRange with a matmul's arguments, in ns (x ops/step)
// Run the repetitions interleaved, so that load changes hit every variant alike:
//   cmake --build build --target bench_profile_overhead
//   build/bench/bench_profile_overhead --benchmark_repetitions=10
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include <memory>

#include "../examples/mnist/models.h"
#include "core/profile.h"
#include "core/profile_op.h"
#include "ratio_reporter.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

struct MlpStep {
  mnist::Mlp net;
  mt::optim::SGD opt{net.parameters(), {.lr = 0.01, .momentum = 0.9}};
  mt::Tensor x = mt::randn({128, 1, 28, 28}), y = mt::randint(0, 10, {128});
  float operator()() {
    mt::Tensor loss = F::cross_entropy(net(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item<float>();
  }
};

void mlp_step(benchmark::State& state, bool profiled) {
  mt::manual_seed(7);
  MlpStep step;
  for (int i = 0; i < 3; ++i) step();  // warm the allocator's cache and the kernels
  std::unique_ptr<mt::profiler::Profile> profile;
  int64_t in_profile = 0, ops = 0;
  for (auto _ : state) {
    if (profiled && !profile) profile = std::make_unique<mt::profiler::Profile>();
    benchmark::DoNotOptimize(step());
    // A fresh profile every 50 steps keeps the recorded events (memory) bounded.
    if (profiled && ++in_profile == 50) {
      state.PauseTiming();
      profile->stop();
      for (const auto& e : profile->events()) ops += e.kind == mt::profiler::Kind::Op;
      profile.reset();
      in_profile = 0;
      state.ResumeTiming();
    }
  }
  if (profile) profile->stop();
  state.counters["steps"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  if (profiled && state.iterations() >= 50)
    state.counters["ops_per_step"] = double(ops) / double(state.iterations() / 50 * 50);
}

void mlp_step_off(benchmark::State& s) { mlp_step(s, false); }
void mlp_step_off_again(benchmark::State& s) { mlp_step(s, false); }
void mlp_step_profiled(benchmark::State& s) { mlp_step(s, true); }

// The cost every dispatched op pays with no profile recording (and NVTX off).
void op_range_inactive(benchmark::State& state) {
  mt::profiler::set_enabled(false);
  const mt::Tensor a = mt::randn({1, 4, 4}), b = mt::randn({1, 4, 4}), out = mt::zeros({1, 4, 4});
  const mt::Tensor bias;
  for (auto _ : state) {
    mt::profiler::OpRange r("matmul", a, b, bias, out);
    benchmark::ClobberMemory();
  }
}

BENCHMARK(mlp_step_off)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mlp_step_off_again)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mlp_step_profiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(op_range_inactive);

}  // namespace

int main(int argc, char** argv) {
  return mantissa_bench::run(argc, argv,
                             {{"mlp_step_off_again/real_time", "mlp_step_off/real_time", "steps", 1, ""},
                              {"mlp_step_profiled/real_time", "mlp_step_off/real_time", "steps", 1, ""}});
}
