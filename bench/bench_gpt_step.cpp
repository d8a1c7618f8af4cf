// One training step of the transformer example's default model (GPT: 4 layers, 4 heads,
// d_model 128, context 128, batch 16, vocabulary 96): forward, cross-entropy, backward,
// clipping and the AdamW step, in fp32 and under autocast (fp16 with a GradScaler, bf16).
// tools/bench_gpt_step.sh runs it next to the same step in PyTorch 1.13.
//   cmake --build build --target bench_gpt_step
//   build/bench/bench_gpt_step --benchmark_repetitions=5 --benchmark_report_aggregates_only
// With --scaling (d_model 128/256 x context 128/256) or --scaling-full (128/256/512 x 128/256/512)
// it also registers the same step at every size, 4 layers, heads = d_model / 32 (--head-dim N:
// d_model / N, the heads' width other than the one the kernels were tuned on), batch 4096 /
// context (4096 tokens a step), as nn::GPT (fused attention: scale_fused_*) and as a GPT whose
// attention a user writes from primitives, matmul + masked_fill + softmax + matmul
// (scale_user_*; tools/torch_gpt.py builds the same model in PyTorch), fp32 and bf16, and the
// 2048^3 GEMM rate of each dtype (gemm_fp32, gemm_bf16) for the MFU column of
// tools/compare_pytorch.py --scaling. --sizes DxT[,DxT...] registers those sizes instead (widths and
// contexts the kernels were not tuned on: 320x200 with --head-dim 40). Each size also runs a
// LLaMA-style model no kernel was tuned for, written from primitives (scale_llama_*: RMSNorm,
// rotary embeddings, SwiGLU; tools/torch_gpt.py Llama in PyTorch).
//   build/bench/bench_gpt_step --profile user 256 512 bf16   # one scaled step by op (profiler)
//   build/bench/bench_gpt_step --head-dim 128 --profile user 512 256 bf16   # 4 heads of 128
//   build/bench/bench_gpt_step --profile llama 256 256 bf16   # the LLaMA-style model
//   (MT_TRACE=trace.json also writes the profile's Chrome trace: shapes and dtypes of each call)
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// ---------------------------------------------------------------- scaling

// A pre-LayerNorm block as a user writes it: attention from matmul, masked_fill and softmax.
struct UserBlock : mt::nn::Module {
  int64_t heads;
  mt::nn::LayerNorm ln_1, ln_2;
  mt::nn::Linear qkv, proj, fc, fc2;
  UserBlock(int64_t d, int64_t h) : heads(h), ln_1(d), ln_2(d), qkv(d, 3 * d), proj(d, d), fc(d, 4 * d), fc2(4 * d, d) {
    register_module("ln_1", ln_1);
    register_module("ln_2", ln_2);
    register_module("qkv", qkv);
    register_module("proj", proj);
    register_module("fc", fc);
    register_module("fc2", fc2);
  }
  // x [N, T, D]; mask: bool [T, T], true above the diagonal (the future).
  mt::Tensor forward(const mt::Tensor& x, const mt::Tensor& mask) {
    const int64_t N = x.size(0), T = x.size(1), D = x.size(2), E = D / heads;
    mt::Tensor qkv3 = qkv(ln_1(x)).reshape({N, T, 3, heads, E}).permute({2, 0, 3, 1, 4});
    mt::Tensor q = qkv3.select(0, 0), k = qkv3.select(0, 1), v = qkv3.select(0, 2);
    mt::Tensor s = mt::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(E)));
    mt::Tensor p = mt::softmax(mt::masked_fill(s, mask, -INFINITY), -1);
    mt::Tensor y = mt::matmul(p, v).transpose(1, 2).reshape({N, T, D});
    mt::Tensor h = x + proj(y);
    return h + fc2(mt::gelu(fc(ln_2(h)), "tanh"));
  }
  mt::Tensor forward(const mt::Tensor& x) override { return x; }  // unused: the mask is needed
};

// Token + position embeddings, the user's blocks, a final LayerNorm, the tied head.
struct UserGPT : mt::nn::Module {
  mt::nn::Embedding tok_emb, pos_emb;
  std::deque<UserBlock> blocks;
  mt::nn::LayerNorm ln_f;
  mt::Tensor mask;
  UserGPT(int64_t vocab, int64_t context, int64_t layers, int64_t heads, int64_t d)
      : tok_emb(vocab, d), pos_emb(context, d), ln_f(d) {
    register_module("tok_emb", tok_emb);
    register_module("pos_emb", pos_emb);
    for (int64_t i = 0; i < layers; ++i) {
      char name[24];  // (a "h" + std::string here trips GCC 12's false -Wrestrict once inlined twice)
      std::snprintf(name, sizeof name, "h%lld", static_cast<long long>(i));
      register_module(name, blocks.emplace_back(d, heads));
    }
    register_module("ln_f", ln_f);
    mask = mt::triu(mt::ones({context, context}), 1).to(mt::kBool);
    for (auto& [name, t] : named_parameters())
      if (t.dim() >= 2) {
        mt::NoGradGuard ng;
        t.copy_(mt::randn(t.sizes()) * 0.02);
      }
  }
  mt::Tensor forward(const mt::Tensor& tokens) override {
    const int64_t T = tokens.size(1);
    mt::Tensor h = tok_emb(tokens) + pos_emb(mt::arange(T));
    for (auto& b : blocks) h = b.forward(h, mask);
    return mt::nn::functional::linear(ln_f(h), tok_emb.weight);
  }
};

// A LLaMA-style model as a user writes it from primitives, none of it tuned for: RMSNorm as
// x * rsqrt(mean(x^2) + eps) * w, rotary position embeddings by narrow + neg + cat on a permuted
// view, attention from matmul + masked_fill + softmax + matmul, a SwiGLU MLP (silu(x W1) * x W3)
// of width 8d/3 rounded up to 32, no biases, an untied head (tools/torch_gpt.py: Llama).
mt::Tensor rms_norm_primitives(const mt::Tensor& x, const mt::Tensor& w) {
  return x * mt::rsqrt(mt::mean(x * x, {-1}, true) + 1e-5) * w;
}

// x [N, H, T, E] rotated by the angles of cos / sin [T, E] (the two halves of E as one pair).
mt::Tensor rotary(const mt::Tensor& x, const mt::Tensor& cos, const mt::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const mt::Tensor rotated = mt::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

struct LlamaBlock : mt::nn::Module {
  int64_t heads;
  mt::Tensor norm_1, norm_2;
  mt::nn::Linear qkv, proj, w1, w3, w2;
  LlamaBlock(int64_t d, int64_t h, int64_t hidden)
      : heads(h),
        qkv(d, 3 * d, false),
        proj(d, d, false),
        w1(d, hidden, false),
        w3(d, hidden, false),
        w2(hidden, d, false) {
    norm_1 = register_parameter("norm_1", mt::ones({d}));
    norm_2 = register_parameter("norm_2", mt::ones({d}));
    register_module("qkv", qkv);
    register_module("proj", proj);
    register_module("w1", w1);
    register_module("w3", w3);
    register_module("w2", w2);
  }
  // x [N, T, D]; mask: bool [T, T], true above the diagonal; cos, sin [T, E].
  mt::Tensor forward(const mt::Tensor& x, const mt::Tensor& mask, const mt::Tensor& cos, const mt::Tensor& sin) {
    const int64_t N = x.size(0), T = x.size(1), D = x.size(2), E = D / heads;
    mt::Tensor qkv3 = qkv(rms_norm_primitives(x, norm_1)).reshape({N, T, 3, heads, E}).permute({2, 0, 3, 1, 4});
    mt::Tensor q = rotary(qkv3.select(0, 0), cos, sin), k = rotary(qkv3.select(0, 1), cos, sin);
    mt::Tensor s = mt::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(E)));
    mt::Tensor p = mt::softmax(mt::masked_fill(s, mask, -INFINITY), -1);
    mt::Tensor y = mt::matmul(p, qkv3.select(0, 2)).transpose(1, 2).reshape({N, T, D});
    mt::Tensor h = x + proj(y);
    const mt::Tensor n = rms_norm_primitives(h, norm_2);
    return h + w2(mt::silu(w1(n)) * w3(n));
  }
  mt::Tensor forward(const mt::Tensor& x) override { return x; }  // unused: the mask is needed
};

struct UserLlama : mt::nn::Module {
  mt::nn::Embedding tok_emb;
  std::deque<LlamaBlock> blocks;
  mt::Tensor norm_f;
  mt::nn::Linear head;
  mt::Tensor mask, cos, sin;
  UserLlama(int64_t vocab, int64_t context, int64_t layers, int64_t heads, int64_t d)
      : tok_emb(vocab, d), head(d, vocab, false) {
    register_module("tok_emb", tok_emb);
    const int64_t hidden = (8 * d / 3 + 31) / 32 * 32;
    for (int64_t i = 0; i < layers; ++i) {
      char name[24];
      std::snprintf(name, sizeof name, "h%lld", static_cast<long long>(i));
      register_module(name, blocks.emplace_back(d, heads, hidden));
    }
    norm_f = register_parameter("norm_f", mt::ones({d}));
    register_module("head", head);
    mask = mt::triu(mt::ones({context, context}), 1).to(mt::kBool);
    // Angle of position t and pair i: t / 10000^(2i / E), for both halves of E.
    const int64_t E = d / heads;
    const mt::Tensor inv_freq = mt::pow(mt::full({E / 2}, 10000.0), mt::arange(0, E, 2).to(mt::kFloat32) * (-1.0 / E));
    const mt::Tensor angles = mt::arange(context).to(mt::kFloat32).reshape({context, 1}) * inv_freq;
    cos = mt::cos(mt::cat({angles, angles}, -1));
    sin = mt::sin(mt::cat({angles, angles}, -1));
    for (auto& [name, t] : named_parameters())
      if (t.dim() >= 2) {
        mt::NoGradGuard ng;
        t.copy_(mt::randn(t.sizes()) * 0.02);
      }
  }
  mt::Tensor forward(const mt::Tensor& tokens) override {
    mt::Tensor h = tok_emb(tokens);
    for (auto& b : blocks) h = b.forward(h, mask, cos, sin);
    return head(rms_norm_primitives(h, norm_f));
  }
};

// One AdamW step of `net` (fp32 master weights) at batch N x T, as gpt_step, as a callable.
template <typename Net>
std::function<void()> train_step(Net& net, int64_t T, std::optional<mt::DType> amp) {
  const int64_t N = 4096 / T;
  auto opt = std::make_shared<mt::optim::AdamW>(mt::optim::weight_decay_groups(net.named_parameters(), 0.1),
                                                mt::optim::AdamWOptions{.lr = 1e-3, .betas = {0.9, 0.99}});
  mt::Tensor x = mt::randint(0, kVocab, {N, T}), y = mt::randint(0, kVocab, {N, T});
  return [&net, opt, x, y, amp] {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(amp.value_or(mt::kBFloat16), amp.has_value());
      loss = F::cross_entropy(net(x).reshape({-1, kVocab}), y.reshape({-1}));
    }
    opt->zero_grad();
    loss.backward();
    mt::optim::clip_grad_norm_(net.parameters(), 1.0);
    opt->step();
    benchmark::DoNotOptimize(loss.item<float>());
  };
}

template <typename Net>
void scaled_step(benchmark::State& state, Net& net, int64_t T, std::optional<mt::DType> amp) {
  const std::function<void()> step = train_step(net, T, amp);
  // Two untimed steps first, as tools/compare_pytorch.py's PyTorch worker: the first step of a
  // fresh model pays oneDNN's kernel generation for each new GEMM shape, the optimizer's state
  // and first-touch page faults (900 ms against 245 ms for the user-written d256 bf16 step),
  // and a benchmark run of one or two iterations would report mostly that.
  for (int i = 0; i < 2; ++i) step();
  for (auto _ : state) step();
  state.counters["tokens"] =
      benchmark::Counter(double(4096 / T * T) * double(state.iterations()), benchmark::Counter::kIsRate);
}

// The width of one attention head in the scaled models (--head-dim).
int64_t g_head_dim = 32;

// The scaled models: nn::GPT (fused attention), the user-written GPT, the user-written LLaMA.
enum class Model { kFused, kUser, kLlama };
constexpr const char* kModelNames[] = {"fused", "user", "llama"};

// Calls f(net) with the scaled model, 4 layers, heads = d / g_head_dim.
template <typename Fn>
void with_scaled_net(Model model, int64_t d, int64_t T, Fn f) {
  mt::manual_seed(7);
  const int64_t heads = std::max<int64_t>(1, d / g_head_dim);
  if (model == Model::kUser) {
    UserGPT net(kVocab, T, 4, heads, d);
    f(net);
  } else if (model == Model::kLlama) {
    UserLlama net(kVocab, T, 4, heads, d);
    f(net);
  } else {
    mt::nn::GPT net({.vocab_size = kVocab, .context = T, .n_layer = 4, .n_head = heads, .d_model = d});
    f(net);
  }
}

void scale_bench(benchmark::State& state, Model model, int64_t d, int64_t T, std::optional<mt::DType> amp) {
  with_scaled_net(model, d, T, [&](auto& net) { scaled_step(state, net, T, amp); });
}

// --profile user|fused|llama D T fp32|bf16: where one scaled step's time and allocations go, by op
// (mt::profiler::Profile over 2 steps after 2 warm-up steps; "alloc MB" is what the allocator
// handed out for each op's output and workspace).
int profile_scaled(Model model, int64_t d, int64_t T, std::optional<mt::DType> amp) {
  with_scaled_net(model, d, T, [&](auto& net) {
    const std::function<void()> step = train_step(net, T, amp);
    for (int i = 0; i < 2; ++i) step();
    mt::profiler::Profile profile;
    for (int i = 0; i < 2; ++i) {
      step();
      profile.step();
    }
    profile.stop();
    if (const char* p = std::getenv("MT_TRACE")) profile.write_chrome_trace(p);
    std::printf("%s, d_model %lld, context %lld, %s: %.1f ms per step\n%s",
                model == Model::kUser    ? "user-written GPT"
                : model == Model::kLlama ? "user-written LLaMA"
                                         : "nn::GPT (fused attention)",
                static_cast<long long>(d), static_cast<long long>(T), amp ? "bf16 autocast" : "fp32",
                profile.wall_ms() / 2, profile.summary_table(0).c_str());
  });
  return 0;
}

// The GEMM ceiling of a dtype: C [2048, 2048] = A B in that dtype (fp32 accumulation).
void gemm_bench(benchmark::State& state, mt::DType dt) {
  const int64_t n = 2048;
  mt::Tensor a = mt::randn({n, n}).to(dt), b = mt::randn({n, n}).to(dt);
  for (auto _ : state) benchmark::DoNotOptimize(mt::matmul(a, b).raw_data());
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n * n * n) * double(state.iterations()),
                                               benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// (d_model, context) pairs of the scaled steps.
using Sizes = std::vector<std::pair<int64_t, int64_t>>;

// The scaled steps at each (d_model, context) of `sizes`, and the GEMM ceilings.
void register_scaling(const Sizes& sizes) {
  for (const char* prec : {"fp32", "bf16"}) {
    const mt::DType dt = std::strcmp(prec, "fp32") == 0 ? mt::kFloat32 : mt::kBFloat16;
    benchmark::RegisterBenchmark((std::string("gemm_") + prec).c_str(), gemm_bench, dt)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    const std::optional<mt::DType> amp = dt == mt::kFloat32 ? std::nullopt : std::optional<mt::DType>(dt);
    for (const auto& [d, T] : sizes)
      for (Model model : {Model::kFused, Model::kUser, Model::kLlama}) {
        const std::string name = std::string("scale_") + kModelNames[int(model)] + "_" + prec + "/d" +
                                 std::to_string(d) + "/T" + std::to_string(T);
        benchmark::RegisterBenchmark(name.c_str(), scale_bench, model, d, T, amp)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
  }
}

// The grid of --scaling / --scaling-full: every d_model x context of `widths`.
Sizes size_grid(const std::vector<int64_t>& widths) {
  Sizes sizes;
  for (int64_t d : widths)
    for (int64_t T : widths) sizes.emplace_back(d, T);
  return sizes;
}

// "320x200,384x192" -> {(320, 200), (384, 192)}; empty on a malformed list.
Sizes parse_sizes(const char* text) {
  Sizes sizes;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long long d = std::strtoll(p, &end, 10);
    if (end == p || *end != 'x') return {};
    p = end + 1;
    const long long t = std::strtoll(p, &end, 10);
    if (end == p || d <= 0 || t <= 0 || (*end != ',' && *end != 0)) return {};
    sizes.emplace_back(d, t);
    p = *end ? end + 1 : end;
  }
  return sizes;
}

void gpt_fp32(benchmark::State& s) { gpt_step(s, std::nullopt); }
void gpt_fp16(benchmark::State& s) { gpt_step(s, mt::kHalf); }
void gpt_bf16(benchmark::State& s) { gpt_step(s, mt::kBFloat16); }

BENCHMARK(gpt_fp32)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(gpt_fp16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(gpt_bf16)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 1; i + 1 < argc; ++i)  // first: the scaled models' head width, wherever it stands
    if (std::strcmp(argv[i], "--head-dim") == 0) g_head_dim = std::max<int64_t>(1, std::atoll(argv[i + 1]));
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--head-dim") == 0 && i + 1 < argc) {
      ++i;
      continue;
    }
    if (std::strcmp(argv[i], "--profile") == 0) {
      if (i + 4 >= argc) {
        std::fprintf(stderr, "usage: %s --profile user|fused|llama D_MODEL CONTEXT fp32|bf16\n", argv[0]);
        return 2;
      }
      const bool bf16 = std::strcmp(argv[i + 4], "bf16") == 0;
      const Model model = std::strcmp(argv[i + 1], "user") == 0    ? Model::kUser
                          : std::strcmp(argv[i + 1], "llama") == 0 ? Model::kLlama
                                                                   : Model::kFused;
      return profile_scaled(model, std::atoll(argv[i + 2]), std::atoll(argv[i + 3]),
                            bf16 ? std::optional<mt::DType>(mt::kBFloat16) : std::nullopt);
    }
    if (std::strcmp(argv[i], "--sizes") == 0) {
      const Sizes sizes = i + 1 < argc ? parse_sizes(argv[i + 1]) : Sizes{};
      if (sizes.empty()) {
        std::fprintf(stderr, "usage: %s --sizes DxT[,DxT...]   (d_model x context, e.g. 320x200,384x192)\n", argv[0]);
        return 2;
      }
      register_scaling(sizes);
      ++i;
    } else if (std::strcmp(argv[i], "--scaling") == 0 || std::strcmp(argv[i], "--scaling-full") == 0) {
      register_scaling(std::strcmp(argv[i], "--scaling-full") == 0 ? size_grid({128, 256, 512})
                                                                   : size_grid({128, 256}));
    } else {
      args.push_back(argv[i]);
    }
  }
  argc = int(args.size());
  argv = args.data();
  using Pair = mantissa_bench::RatioReporter::Pair;
  std::vector<Pair> pairs;
  for (const char* amp : {"fp16", "bf16"})
    pairs.push_back({std::string("gpt_") + amp + "/min_time:2.000/real_time", "gpt_fp32/min_time:2.000/real_time",
                     "tokens", 1e3, "k"});
  return mantissa_bench::run(argc, argv, std::move(pairs));
}
