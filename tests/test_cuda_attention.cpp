// The CUDA attention and tril/triu kernels against the CPU ones: forward and every gradient
// for fp32, fp16 and bf16, causal, masked, with dropout (the Philox mask is the same on both
// devices) and a GPT training step, on both GPU paths (batched GEMMs through score buffers,
// in one round and in chunks, and the memory-lean row kernels). Skipped without a GPU.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>

#include "core/attention_plan.h"
#include "cuda/cuda_api.h"
#include "gpu_test.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

const mt::Device kGpu = mt::Device::cuda(0);

double max_abs_diff(const mt::Tensor& a, const mt::Tensor& b) {
  std::vector<double> x = a.to(mt::Device::cpu()).to_vector<double>(), y = b.to(mt::Device::cpu()).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

struct AttentionRun {
  mt::Tensor y, gq, gk, gv;
};

AttentionRun attention_on(mt::Device dev, mt::DType dt, const std::vector<mt::Tensor>& qkv, const mt::Tensor& gy,
                          const mt::AttentionOptions& opts, uint64_t seed) {
  std::vector<mt::Tensor> in;
  for (const auto& t : qkv) in.push_back(t.to(dev).to(dt).detach().requires_grad_());
  mt::AttentionOptions o = opts;
  if (o.attn_mask.defined()) o.attn_mask = o.attn_mask.to(dev);
  mt::manual_seed(seed);
  mt::Tensor y = mt::scaled_dot_product_attention(in[0], in[1], in[2], o);
  y.backward(gy.to(dev).to(dt));
  return {y, in[0].grad(), in[1].grad(), in[2].grad()};
}

// Sets the attention score budget for a scope (core/attention_plan.h).
struct ScoreMemory {
  explicit ScoreMemory(int64_t bytes) : saved(mt::cuda::attention_score_memory()) {
    mt::cuda::set_attention_score_memory(bytes);
  }
  ~ScoreMemory() { mt::cuda::set_attention_score_memory(saved); }
  int64_t saved;
};

}  // namespace

// A NaN query (every score of its row NaN) gives a NaN output row and NaN gradients where its
// probabilities reach, on both GPU paths as on the CPU: the same elements NaN, the rest close.
TEST(CudaAttention, NaNQueryRowMatchesCpu) {
  REQUIRE_GPU();
  mt::manual_seed(3);
  std::vector<mt::Tensor> qkv{mt::randn({1, 2, 70, 16}), mt::randn({1, 2, 70, 16}), mt::randn({1, 2, 70, 16})};
  qkv[0].index_put_({0, 0, 3, 7}, std::nan(""));
  mt::Tensor gy = mt::randn({1, 2, 70, 16});
  auto same_nans_and_close = [](const mt::Tensor& a, const mt::Tensor& b, double tol, const std::string& what) {
    const std::vector<double> x = a.to(mt::Device::cpu()).to_vector<double>(),
                              y = b.to(mt::Device::cpu()).to_vector<double>();
    size_t nans = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::isnan(x[i]), std::isnan(y[i])) << what << " element " << i;
      if (std::isnan(x[i]))
        ++nans;
      else
        EXPECT_NEAR(x[i], y[i], tol) << what << " element " << i;
    }
    EXPECT_GT(nans, 0u) << what;
  };
  for (int64_t budget : {mantissa::attention_plan::kRecommendedScoreMemory, int64_t(0)})
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16})
      for (bool causal : {false, true}) {
        ScoreMemory scoped(budget);
        const mt::AttentionOptions o{.is_causal = causal};
        AttentionRun cpu = attention_on(mt::Device::cpu(), dt, qkv, gy, o, 5),
                     gpu = attention_on(kGpu, dt, qkv, gy, o, 5);
        const std::string what =
            std::string(mt::dtype_name(dt)) + " budget " + std::to_string(budget) + " causal " + std::to_string(causal);
        const double tol = dt == mt::kFloat32 ? 1e-4 : 8e-2;
        same_nans_and_close(cpu.y, gpu.y, tol, what + " y");
        same_nans_and_close(cpu.gq, gpu.gq, tol, what + " dq");
        same_nans_and_close(cpu.gv, gpu.gv, tol, what + " dv");
      }
}

TEST(CudaAttention, MatchesCpu) {
  REQUIRE_GPU();
  mt::manual_seed(1);
  std::vector<mt::Tensor> qkv{mt::randn({2, 3, 70, 16}), mt::randn({2, 3, 90, 16}), mt::randn({2, 3, 90, 8})};
  mt::Tensor gy = mt::randn({2, 3, 70, 8});
  mt::Tensor pad = mt::ones({2, 1, 1, 90}, {.dtype = mt::kBool});
  pad.narrow(3, 80, 10).fill_(0);
  // GEMMs in one round, GEMMs two problems at a time (of 6: dropout and lse offsets per
  // round), the row kernels.
  const int64_t per_problem = mantissa::attention_plan::score_bytes_per_problem(70, 90, 4);
  for (int64_t budget : {mantissa::attention_plan::kRecommendedScoreMemory, per_problem * 5 / 2, int64_t(0)})
    for (mt::DType dt : {mt::kFloat32, mt::kHalf, mt::kBFloat16}) {
      ScoreMemory scoped(budget);
      const double tol = dt == mt::kFloat32 ? 1e-4 : (dt == mt::kHalf ? 2e-2 : 8e-2);
      for (const mt::AttentionOptions& o :
           {mt::AttentionOptions{}, mt::AttentionOptions{.is_causal = true}, mt::AttentionOptions{.attn_mask = pad},
            mt::AttentionOptions{.is_causal = true, .dropout_p = 0.2}}) {
        AttentionRun cpu = attention_on(mt::Device::cpu(), dt, qkv, gy, o, 5),
                     gpu = attention_on(kGpu, dt, qkv, gy, o, 5);
        const std::string what = std::string(mt::dtype_name(dt)) + " budget " + std::to_string(budget) + " causal " +
                                 std::to_string(o.is_causal) + " dropout " + std::to_string(o.dropout_p);
        EXPECT_LT(max_abs_diff(cpu.y, gpu.y), tol) << what;
        EXPECT_LT(max_abs_diff(cpu.gq, gpu.gq), tol) << what;
        EXPECT_LT(max_abs_diff(cpu.gk, gpu.gk), tol) << what;
        EXPECT_LT(max_abs_diff(cpu.gv, gpu.gv), tol) << what;
      }
    }
}

// GPT-sized problems (128 x 128, head dim 32, causal, dropout) in bf16: the GEMM path against
// the row kernels on the same GPU.
TEST(CudaAttention, GemmPathMatchesRowKernels) {
  REQUIRE_GPU();
  mt::manual_seed(2);
  std::vector<mt::Tensor> qkv{mt::randn({4, 4, 128, 32}), mt::randn({4, 4, 128, 32}), mt::randn({4, 4, 128, 32})};
  mt::Tensor gy = mt::randn({4, 4, 128, 32});
  const mt::AttentionOptions o{.is_causal = true, .dropout_p = 0.1};
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    AttentionRun gemm = attention_on(kGpu, dt, qkv, gy, o, 9);
    ScoreMemory rows(0);
    AttentionRun lean = attention_on(kGpu, dt, qkv, gy, o, 9);
    const double tol = dt == mt::kFloat32 ? 1e-4 : 8e-2;
    EXPECT_LT(max_abs_diff(gemm.y, lean.y), tol) << mt::dtype_name(dt);
    EXPECT_LT(max_abs_diff(gemm.gq, lean.gq), tol) << mt::dtype_name(dt);
    EXPECT_LT(max_abs_diff(gemm.gk, lean.gk), tol) << mt::dtype_name(dt);
    EXPECT_LT(max_abs_diff(gemm.gv, lean.gv), tol) << mt::dtype_name(dt);
  }
}

TEST(CudaAttention, ScoreMemoryRefusesANegativeBudget) {
  REQUIRE_GPU();
  EXPECT_THROW(mt::cuda::set_attention_score_memory(-1), mt::Error);
}

TEST(CudaAttention, TriangleMatchesCpu) {
  REQUIRE_GPU();
  mt::Tensor x = mt::randn({3, 5, 7});
  for (int64_t d : {-2, 0, 3}) {
    EXPECT_EQ(max_abs_diff(mt::tril(x.to(kGpu), d), mt::tril(x, d)), 0.0);
    EXPECT_EQ(max_abs_diff(mt::triu(x.to(kGpu), d), mt::triu(x, d)), 0.0);
  }
}

TEST(CudaAttention, GptStepMatchesCpu) {
  REQUIRE_GPU();
  auto step = [](mt::Device dev) {
    mt::manual_seed(3);
    mt::nn::GPT gpt({.vocab_size = 20, .context = 16, .n_layer = 2, .n_head = 2, .d_model = 32});
    gpt.to(dev);
    mt::Tensor x = mt::randint(0, 20, {4, 16}).to(dev), y = mt::randint(0, 20, {4, 16}).to(dev);
    mt::Tensor loss = F::cross_entropy(gpt(x).reshape({-1, 20}), y.reshape({-1}));
    loss.backward();
    return std::pair{loss.item<double>(), gpt.tensor("blocks.0.attn.in_proj_weight").grad()};
  };
  auto [lc, gc] = step(mt::Device::cpu());
  auto [lg, gg] = step(kGpu);
  EXPECT_NEAR(lc, lg, 1e-4);
  EXPECT_LT(max_abs_diff(gc, gg), 1e-4);
}
