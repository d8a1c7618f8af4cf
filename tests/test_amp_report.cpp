// The AMP report (amp/report.h) of a small model trained under fp16 autocast on the
// CPU: linears in fp16, the loss in fp32 by the policy, the odd-sized layer flagged with its
// padded shape, the casts and the working-copy cache, the loss scale with a skipped step.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <algorithm>
#include <string>

#include "amp/report.h"
#include "core/profile.h"

namespace mt = mantissa;
namespace prof = mantissa::profiler;
namespace F = mantissa::nn::functional;

namespace {

struct Net : mt::nn::Module {
  mt::nn::Linear fc1{16, 32};
  mt::nn::Linear odd{32, 12};  // 12 outputs: not a multiple of 8
  Net() {
    register_module("fc1", fc1);
    register_module("odd", odd);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return odd(mt::relu(fc1(x))); }
};

const mt::amp::AmpReport::Gemm* find_gemm(const mt::amp::AmpReport& r, const std::string& module) {
  for (const auto& g : r.gemms)
    if (g.module == module) return &g;
  return nullptr;
}

}  // namespace

TEST(AmpReport, Fp16LinearsFp32LossOddLayerFlaggedAndLossScale) {
  mt::manual_seed(4);
  Net net;
  mt::optim::SGD opt(net.parameters(), {.lr = 0.01});
  mt::amp::GradScaler scaler({.init_scale = 1024.0});
  const mt::Tensor x = mt::randn({8, 16}), y = mt::randint(0, 12, {8});
  prof::Profile p;
  for (int step = 0; step < 3; ++step) {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(mt::kHalf);
      loss = F::cross_entropy(net(x), y);
    }
    if (step == 0) loss = loss * 1e30;  // overflows the fp16 gradients: the step is skipped
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    p.step();
  }
  p.stop();
  const mt::amp::AmpReport r = mt::amp::amp_report(p);

  // Both linears ran their GEMMs in fp16, forward and backward.
  const auto* fc1 = find_gemm(r, "fc1");
  const auto* odd = find_gemm(r, "odd");
  ASSERT_NE(fc1, nullptr);
  ASSERT_NE(odd, nullptr);
  EXPECT_EQ(fc1->dtype, mt::kHalf);
  EXPECT_EQ(odd->dtype, mt::kHalf);
  EXPECT_EQ(fc1->calls, 3);
  EXPECT_TRUE(fc1->friendly);
  EXPECT_EQ(fc1->m, 8);
  EXPECT_EQ(fc1->n, 32);
  EXPECT_EQ(fc1->k, 16);
  // The odd layer: [8, 32] @ [32, 12] flagged, with 12 padded to 16.
  EXPECT_FALSE(odd->friendly);
  EXPECT_EQ(odd->n, 12);
  EXPECT_EQ(odd->padded_n, 16);
  EXPECT_EQ(odd->padded_k, 32);
  ASSERT_EQ(r.unfriendly_gemms().size(), 1u);
  EXPECT_EQ(r.unfriendly_gemms()[0].module, "odd");
  EXPECT_DOUBLE_EQ(r.reduced_flop_share(), 1.0);
  EXPECT_GT(r.gemm_flops.at(mt::kHalf), 3 * 2.0 * 8 * (16 * 32 + 32 * 12));  // forward alone, plus backward

  // The loss ran in fp32 because cross_entropy has the fp32 policy.
  const auto ce = std::find_if(r.fp32_ops.begin(), r.fp32_ops.end(),
                               [](const mt::amp::AmpReport::Fp32Op& f) { return f.op == "cross_entropy"; });
  ASSERT_NE(ce, r.fp32_ops.end());
  // Per step the fused loss kernel and an fp32 copy of its rows.
  ASSERT_FALSE(ce->kernel_names.empty());
  EXPECT_EQ(ce->kernel_names[0], "cross_entropy");
  EXPECT_EQ(ce->kernels, 6);
  EXPECT_GT(ce->ms, 0);
  for (const auto& f : r.fp32_ops) EXPECT_NE(f.op, "linear");

  // Casts: the input x (and the fp16 logits up to fp32 for the loss) each step; the four
  // parameters cast into working copies. SGD's fused step refreshes the copies in place, so
  // after the first step every lookup hits (the skipped step leaves them valid too).
  EXPECT_EQ(r.activation_casts.count, 6);
  EXPECT_EQ(r.activation_casts.bytes, 3 * (8 * 16 * 2 + 8 * 12 * 4));
  EXPECT_EQ(r.working_copy_casts.count, 4);
  EXPECT_EQ(r.working_copy_casts.bytes, (16 * 32 + 32 + 32 * 12 + 12) * 2);
  EXPECT_EQ(r.working_copy_misses, 4);
  EXPECT_EQ(r.working_copy_hits, 8);
  EXPECT_NEAR(r.working_copy_hit_rate(), 8.0 / 12.0, 1e-12);

  // Loss scale: the overflowing first step skipped and backed the scale off.
  ASSERT_EQ(r.loss_scale.size(), 3u);
  EXPECT_TRUE(r.loss_scale[0].skipped);
  EXPECT_EQ(r.loss_scale[0].scale, 512.0);
  EXPECT_FALSE(r.loss_scale[1].skipped);
  EXPECT_EQ(r.loss_scale[2].scale, 512.0);
  EXPECT_EQ(r.skipped_steps(), 1);

  const std::string text = r.str();
  EXPECT_NE(text.find("cross_entropy"), std::string::npos);
  EXPECT_NE(text.find("pad to 8x16x32"), std::string::npos);
  EXPECT_NE(text.find("1 skipped"), std::string::npos);
}

TEST(AmpReport, NeedsAStoppedProfile) {
  prof::Profile p;
  EXPECT_THROW(mt::amp::amp_report(p), mt::Error);
  p.stop();
  const mt::amp::AmpReport r = mt::amp::amp_report(p);
  EXPECT_EQ(r.reduced_flop_share(), 0);
  EXPECT_EQ(r.working_copy_hit_rate(), 0);
  EXPECT_TRUE(r.gemms.empty());
}
