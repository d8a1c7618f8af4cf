// One training step (forward + cross-entropy + backward + SGD step) of the MNIST example's
// models on the CPU: the MLP at batch 128 and the CNN at batch 64, in fp32 and under
// autocast (fp16 with a GradScaler, bf16 without). The fp32 step measured in the same run is
// the reference the AMP variants are compared with (printed as a ratio at the end).
//   cmake --build build --target bench_train_step
//   build/bench/bench_train_step --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include "../examples/mnist/models.h"
#include "ratio_reporter.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

enum class Amp { Off, Fp16, Bf16 };

template <class Model>
void train_step(benchmark::State& state, int64_t batch, Amp amp) {
  mt::manual_seed(7);
  Model net;
  mt::optim::SGD opt(net.parameters(), {.lr = 0.01, .momentum = 0.9});
  mt::amp::GradScaler scaler({.enabled = amp == Amp::Fp16});
  // Fixed data in the example's layout: normalized images and class indices.
  mt::Tensor x = mt::randn({batch, 1, 28, 28});
  mt::Tensor y = mt::randint(0, 10, {batch});
  for (auto _ : state) {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(amp == Amp::Bf16 ? mt::kBFloat16 : mt::kHalf, amp != Amp::Off);
      loss = F::cross_entropy(net.forward(x), y);
    }
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  // "samples" is a rate (images/s); the ratio table compares it with the fp32 step.
  state.counters["samples"] =
      benchmark::Counter(double(batch) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void mlp_fp32(benchmark::State& s) { train_step<mnist::Mlp>(s, 128, Amp::Off); }
void mlp_fp16(benchmark::State& s) { train_step<mnist::Mlp>(s, 128, Amp::Fp16); }
void mlp_bf16(benchmark::State& s) { train_step<mnist::Mlp>(s, 128, Amp::Bf16); }
void cnn_fp32(benchmark::State& s) { train_step<mnist::Cnn>(s, 64, Amp::Off); }
void cnn_fp16(benchmark::State& s) { train_step<mnist::Cnn>(s, 64, Amp::Fp16); }
void cnn_bf16(benchmark::State& s) { train_step<mnist::Cnn>(s, 64, Amp::Bf16); }

BENCHMARK(mlp_fp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mlp_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(mlp_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(cnn_fp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(cnn_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(cnn_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  using Pair = mantissa_bench::RatioReporter::Pair;
  std::vector<Pair> pairs;
  for (const char* model : {"mlp", "cnn"})
    for (const char* amp : {"fp16", "bf16"})
      pairs.push_back(
          {std::string(model) + "_" + amp + "/real_time", std::string(model) + "_fp32/real_time", "samples", 1e3, "k"});
  return mantissa_bench::run(argc, argv, std::move(pairs));
}
