// Where a training step's time goes: the profiler ranges (one per dispatched op, module,
// backward node, optimizer step; core/profiler.h) timed on the host, summed by name over
// a number of steps of the MNIST example's models or the transformer example's GPT. "self" excludes nested ranges, so
// the self column adds up to the step minus the time outside any range (autograd bookkeeping, Python- like glue in C++,
// allocation between ops).
//   build/bench/profile_train_step [mlp|cnn|gpt] [fp32|bf16|fp16] [steps]
#include <mantissa.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../examples/mnist/models.h"
#include "core/cpu/onednn.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using Clock = std::chrono::steady_clock;

namespace {

struct Open {
  const char* name;
  Clock::time_point start;
  double child = 0;  // seconds spent in nested ranges
};
struct Total {
  double inclusive = 0, self = 0;
  long calls = 0;
};
std::vector<Open> g_stack;
std::map<std::string, Total> g_totals;

void push(const char* name) { g_stack.push_back({name, Clock::now()}); }
void pop() {
  const Open o = g_stack.back();
  g_stack.pop_back();
  const double dt = std::chrono::duration<double>(Clock::now() - o.start).count();
  Total& t = g_totals[o.name];
  t.inclusive += dt;
  t.self += dt - o.child;
  ++t.calls;
  if (!g_stack.empty()) g_stack.back().child += dt;
}

// Times `steps` calls of step() with the profiler's hooks on, after 5 warm-up calls.
template <class Step>
double profile_steps(Step&& step, int steps) {
  for (int i = 0; i < 5; ++i) step();  // warm caches, primitives and the allocator
  mt::profiler::set_hooks({push, pop});
  mt::profiler::set_enabled(true);
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  mt::profiler::set_enabled(false);
  return total;
}

// The transformer example's default GPT step, as bench/bench_gpt_step.cpp.
double run_gpt(const char* amp, int steps) {
  constexpr int64_t kVocab = 96, kBatch = 16, kContext = 128;
  mt::manual_seed(7);
  mt::nn::GPT gpt({.vocab_size = kVocab, .context = kContext, .n_layer = 4, .n_head = 4, .d_model = 128});
  mt::optim::AdamW opt(mt::optim::weight_decay_groups(gpt.named_parameters(), 0.1), {.lr = 1e-3, .betas = {0.9, 0.99}});
  const bool fp16 = std::strcmp(amp, "fp16") == 0, bf16 = std::strcmp(amp, "bf16") == 0;
  mt::amp::GradScaler scaler({.enabled = fp16});
  mt::Tensor x = mt::randint(0, kVocab, {kBatch, kContext}), y = mt::randint(0, kVocab, {kBatch, kContext});
  return profile_steps(
      [&] {
        mt::Tensor loss;
        {
          mt::amp::Autocast ac(bf16 ? mt::kBFloat16 : mt::kHalf, fp16 || bf16);
          loss = F::cross_entropy(gpt(x).reshape({-1, kVocab}), y.reshape({-1}));
        }
        opt.zero_grad();
        scaler.backward(loss);
        scaler.unscale_(opt);
        mt::optim::clip_grad_norm_(gpt.parameters(), 1.0);
        scaler.step(opt);
        scaler.update();
        return loss.item<float>();
      },
      steps);
}

// The CIFAR example's ResNet-20 step at batch 128, as bench/bench_resnet_step.cpp.
double run_resnet(const char* amp, int steps) {
  constexpr int64_t kBatch = 128;
  mt::manual_seed(7);
  mt::nn::CifarResNet net(20);
  mt::optim::SGD opt(mt::optim::weight_decay_groups(net.named_parameters(), 5e-4),
                     {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  const bool fp16 = std::strcmp(amp, "fp16") == 0, bf16 = std::strcmp(amp, "bf16") == 0;
  mt::amp::GradScaler scaler({.enabled = fp16});
  mt::Tensor x = mt::randn({kBatch, 3, 32, 32}), y = mt::randint(0, 10, {kBatch});
  return profile_steps(
      [&] {
        mt::Tensor loss;
        {
          mt::amp::Autocast ac(bf16 ? mt::kBFloat16 : mt::kHalf, fp16 || bf16);
          loss = F::cross_entropy(net(x), y);
        }
        opt.zero_grad();
        scaler.backward(loss);
        scaler.step(opt);
        scaler.update();
        return loss.item<float>();
      },
      steps);
}

template <class Model>
double run(int64_t batch, const char* amp, int steps) {
  mt::manual_seed(7);
  Model net;
  mt::optim::SGD opt(net.parameters(), {.lr = 0.01, .momentum = 0.9});
  const bool fp16 = std::strcmp(amp, "fp16") == 0, bf16 = std::strcmp(amp, "bf16") == 0;
  mt::amp::GradScaler scaler({.enabled = fp16});
  mt::Tensor x = mt::randn({batch, 1, 28, 28}), y = mt::randint(0, 10, {batch});
  auto step = [&] {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(bf16 ? mt::kBFloat16 : mt::kHalf, fp16 || bf16);
      loss = F::cross_entropy(net.forward(x), y);
    }
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    return loss.item<float>();
  };
  return profile_steps(step, steps);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "mlp";
  const char* amp = argc > 2 ? argv[2] : "fp32";
  const int steps = argc > 3 ? std::atoi(argv[3]) : 50;
  const double total = model == "resnet20" ? run_resnet(amp, steps)
                       : model == "gpt"    ? run_gpt(amp, steps)
                       : model == "cnn"    ? run<mnist::Cnn>(64, amp, steps)
                                           : run<mnist::Mlp>(128, amp, steps);
  std::vector<std::pair<std::string, Total>> rows(g_totals.begin(), g_totals.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.self > b.second.self; });
  double self_sum = 0;
  for (auto& [n, t] : rows) self_sum += t.self;
  std::printf("%s %s: %.3f ms/step over %d steps (%s)\n", model.c_str(), amp, total / steps * 1e3, steps,
              mt::cpu::onednn::describe().c_str());
  std::printf("%-28s %10s %10s %8s %7s\n", "range", "self ms", "incl ms", "calls", "self %");
  for (auto& [n, t] : rows)
    std::printf("%-28s %10.3f %10.3f %8.1f %6.1f%%\n", n.c_str(), t.self / steps * 1e3, t.inclusive / steps * 1e3,
                double(t.calls) / steps, 100 * t.self / total);
  std::printf("%-28s %10.3f %10s %8s %6.1f%%\n", "(outside any range)", (total - self_sum) / steps * 1e3, "", "",
              100 * (total - self_sum) / total);
  return 0;
}
