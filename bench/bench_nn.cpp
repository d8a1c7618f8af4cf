// nn layers on the CPU: Conv2d forward and forward+backward (im2col + GEMM), BatchNorm2d,
// LayerNorm and cross-entropy forward+backward, reported as time per iteration and, for
// the convolution, GFLOP/s (2 * N * Cout * OH * OW * C/groups * KH * KW per GEMM pass).
//   cmake --build build --target bench_nn && build/bench/bench_nn --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <mantissa.h>

namespace mt = mantissa;
namespace nn = mt::nn;
namespace F = mt::nn::functional;

namespace {

// [64, 32, 14, 14] -> 64 channels, 3x3, padding 1 (a mid-sized ResNet/CIFAR layer).
struct ConvCase {
  int64_t n = 64, c = 32, hw = 14, cout = 64, k = 3;
  double gemm_flops() const { return 2.0 * double(n * cout * hw * hw * c * k * k); }
};

void conv_forward(benchmark::State& state) {
  ConvCase cc;
  mt::manual_seed(1);
  nn::Conv2d conv(cc.c, cc.cout, cc.k, {.padding = 1});
  mt::Tensor x = mt::randn({cc.n, cc.c, cc.hw, cc.hw});
  mt::NoGradGuard no_grad;
  for (auto _ : state) {
    mt::Tensor y = conv(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["FLOPS"] = benchmark::Counter(cc.gemm_flops() * double(state.iterations()),
                                               benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void conv_forward_backward(benchmark::State& state) {
  ConvCase cc;
  mt::manual_seed(1);
  nn::Conv2d conv(cc.c, cc.cout, cc.k, {.padding = 1});
  mt::Tensor x = mt::randn({cc.n, cc.c, cc.hw, cc.hw}, {.requires_grad = true});
  mt::Tensor gy = mt::randn({cc.n, cc.cout, cc.hw, cc.hw});
  for (auto _ : state) {
    conv.zero_grad();
    x.set_grad({});
    conv(x).backward(gy);
    benchmark::DoNotOptimize(conv.weight.grad().raw_data());
  }
  // Forward, input gradient and weight gradient: three GEMM passes of the same size.
  state.counters["FLOPS"] = benchmark::Counter(3 * cc.gemm_flops() * double(state.iterations()),
                                               benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void batch_norm_forward_backward(benchmark::State& state) {
  mt::manual_seed(2);
  nn::BatchNorm2d bn(64);
  mt::Tensor x = mt::randn({64, 64, 14, 14}, {.requires_grad = true});
  mt::Tensor gy = mt::randn({64, 64, 14, 14});
  for (auto _ : state) {
    bn(x).backward(gy);
    benchmark::DoNotOptimize(x.grad().raw_data());
  }
}

void layer_norm_forward_backward(benchmark::State& state) {
  mt::manual_seed(3);
  nn::LayerNorm ln(512);
  mt::Tensor x = mt::randn({32, 128, 512}, {.requires_grad = true});
  mt::Tensor gy = mt::randn({32, 128, 512});
  for (auto _ : state) {
    ln(x).backward(gy);
    benchmark::DoNotOptimize(x.grad().raw_data());
  }
}

void cross_entropy_forward_backward(benchmark::State& state) {
  mt::manual_seed(4);
  mt::Tensor logits = mt::randn({4096, 1000}, {.requires_grad = true});
  mt::Tensor target = mt::randint(0, 1000, {4096});
  for (auto _ : state) {
    F::cross_entropy(logits, target, {.label_smoothing = 0.1}).backward();
    benchmark::DoNotOptimize(logits.grad().raw_data());
  }
}

}  // namespace

BENCHMARK(conv_forward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(conv_forward_backward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(batch_norm_forward_backward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(layer_norm_forward_backward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(cross_entropy_forward_backward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
