// One training step of the CIFAR example's ResNet-20 (nn::CifarResNet(20)) at batch 128
// on the CPU: forward, cross-entropy, backward and a Nesterov SGD step with weight-decay
// groups, in fp32 and under autocast (fp16 with a GradScaler, bf16 without). The fp32 step
// of the same run is the reference of the ratio table; tools/bench_resnet_torch.py times
// the same step in PyTorch for comparison.
//   cmake --build build --target bench_resnet_step
//   build/bench/bench_resnet_step --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include "ratio_reporter.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

enum class Amp { Off, Fp16, Bf16 };

void resnet_step(benchmark::State& state, Amp amp) {
  constexpr int64_t batch = 128;
  mt::manual_seed(7);
  mt::nn::CifarResNet net(20);
  mt::optim::SGD opt(mt::optim::weight_decay_groups(net.named_parameters(), 5e-4),
                     {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  mt::amp::GradScaler scaler({.enabled = amp == Amp::Fp16});
  // Fixed data in the example's layout: normalized images [128, 3, 32, 32] and class indices.
  mt::Tensor x = mt::randn({batch, 3, 32, 32});
  mt::Tensor y = mt::randint(0, 10, {batch});
  for (auto _ : state) {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(amp == Amp::Bf16 ? mt::kBFloat16 : mt::kHalf, amp != Amp::Off);
      loss = F::cross_entropy(net(x), y);
    }
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  state.counters["images"] =
      benchmark::Counter(double(batch) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void resnet20_fp32(benchmark::State& s) { resnet_step(s, Amp::Off); }
void resnet20_fp16(benchmark::State& s) { resnet_step(s, Amp::Fp16); }
void resnet20_bf16(benchmark::State& s) { resnet_step(s, Amp::Bf16); }

BENCHMARK(resnet20_fp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(resnet20_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(resnet20_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  using Pair = mantissa_bench::RatioReporter::Pair;
  std::vector<Pair> pairs;
  for (const char* amp : {"fp16", "bf16"})
    pairs.push_back({std::string("resnet20_") + amp + "/real_time", "resnet20_fp32/real_time", "images", 1, ""});
  return mantissa_bench::run(argc, argv, std::move(pairs));
}
