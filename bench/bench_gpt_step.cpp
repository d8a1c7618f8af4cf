// One training step of the transformer example's default model (GPT: 4 layers, 4 heads,
// d_model 128, context 128, batch 16, vocabulary 96): forward, cross-entropy, backward,
// clipping and the AdamW step, in fp32 and under autocast (fp16 with a GradScaler, bf16).
// tools/bench_gpt_step.sh runs it next to the same step in PyTorch 1.13.
//   cmake --build build --target bench_gpt_step
//   build/bench/bench_gpt_step --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include "ratio_reporter.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

constexpr int64_t kVocab = 96, kBatch = 16, kContext = 128;

void gpt_step(benchmark::State& state, std::optional<mt::DType> amp) {
  mt::manual_seed(7);
  mt::nn::GPT gpt({.vocab_size = kVocab, .context = kContext, .n_layer = 4, .n_head = 4, .d_model = 128});
  mt::optim::AdamW opt(mt::optim::weight_decay_groups(gpt.named_parameters(), 0.1), {.lr = 1e-3, .betas = {0.9, 0.99}});
  mt::amp::GradScaler scaler({.enabled = amp == mt::kHalf});
  mt::Tensor x = mt::randint(0, kVocab, {kBatch, kContext}), y = mt::randint(0, kVocab, {kBatch, kContext});
  for (auto _ : state) {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value());
      loss = F::cross_entropy(gpt(x).reshape({-1, kVocab}), y.reshape({-1}));
    }
    opt.zero_grad();
    scaler.backward(loss);
    scaler.unscale_(opt);
    mt::optim::clip_grad_norm_(gpt.parameters(), 1.0);
    scaler.step(opt);
    scaler.update();
    benchmark::DoNotOptimize(loss.item<float>());
  }
  state.counters["tokens"] =
      benchmark::Counter(double(kBatch * kContext) * double(state.iterations()), benchmark::Counter::kIsRate);
}

void gpt_fp32(benchmark::State& s) { gpt_step(s, std::nullopt); }
void gpt_fp16(benchmark::State& s) { gpt_step(s, mt::kHalf); }
void gpt_bf16(benchmark::State& s) { gpt_step(s, mt::kBFloat16); }

BENCHMARK(gpt_fp32)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(gpt_fp16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(gpt_bf16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

int main(int argc, char** argv) {
  using Pair = mantissa_bench::RatioReporter::Pair;
  std::vector<Pair> pairs;
  for (const char* amp : {"fp16", "bf16"})
    pairs.push_back({std::string("gpt_") + amp + "/min_time:2.000/real_time", "gpt_fp32/min_time:2.000/real_time",
                     "tokens", 1e3, "k"});
  return mantissa_bench::run(argc, argv, std::move(pairs));
}
