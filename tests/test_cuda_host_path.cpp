// GPU checks of the host/device contracts of docs/cuda.md that the CPU tests cannot run
// (tools/gpu-check.sh runs them; every case skips without a GPU): the fused step over a
// parameter spanning many launches, no host synchronisation in an fp16 AMP GPT step (also with
// unscale_, clipping and attention on its GEMM path), a
// tensor of more than 2^31 elements, the sticky index error, non_blocking uploads, a
// pinned upload to another device, 200 forced overflows against the CPU row's scaler, and
// CPU-vs-GPU for backward kernels.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/host_sync.h"
#include "cuda/cuda_api.h"
#include "gpu_test.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

const mt::Device kGpu = mt::Device::cuda(0);
const mt::Device kCpu = mt::Device::cpu();

double max_abs_diff(const mt::Tensor& a, const mt::Tensor& b) {
  const std::vector<double> x = a.to(kCpu).to(mt::kFloat64).to_vector<double>();
  const std::vector<double> y = b.to(kCpu).to(mt::kFloat64).to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// SGD with momentum through the dispatch table on both devices, same data.
mt::FusedStepArgs sgd_step(const std::vector<mt::Tensor>& w, const std::vector<mt::Tensor>& g,
                           const std::vector<mt::Tensor>& buf, const std::vector<mt::Tensor>& steps) {
  mt::FusedStepArgs a;
  a.hyper.kind = mt::math::OptimizerKind::Sgd;
  a.hyper.lr = 0.25;
  a.hyper.momentum = 0.5;
  a.num_state = 1;
  for (size_t i = 0; i < w.size(); ++i) {
    mt::FusedStepTensor t;
    t.param = w[i];
    t.grad = g[i];
    t.state[0] = buf[i];
    t.step = steps[i];
    t.first_at_step = 1;
    a.tensors.push_back(t);
  }
  return a;
}

}  // namespace

// The crash of issue 22 item 1: a parameter that is not first in its launch list and spans
// three or more launches (48 M elements after 25 small ones). Run under compute-sanitizer.
TEST(CudaFusedStep, LargeParameterAfterManySmallOnesMatchesCpu) {
  REQUIRE_GPU();
  mt::manual_seed(1);
  std::vector<int64_t> sizes(25, 1000);
  sizes.push_back(48'000'000);
  std::vector<mt::Tensor> w, g, buf, st, gw, gg, gbuf, gst;
  for (int64_t n : sizes) {
    w.push_back(mt::randn({n}));
    g.push_back(mt::randn({n}));
    buf.push_back(mt::zeros({n}));
    st.push_back(mt::zeros({1}, {.dtype = mt::kInt64}));
    gw.push_back(w.back().to(kGpu));
    gg.push_back(g.back().to(kGpu));
    gbuf.push_back(buf.back().to(kGpu));
    gst.push_back(st.back().to(kGpu));
  }
  for (int s = 0; s < 2; ++s) {
    mt::cpu_backend().fused_optimizer_step(sgd_step(w, g, buf, st));
    mt::backend_for(kGpu).fused_optimizer_step(sgd_step(gw, gg, gbuf, gst));
  }
  mt::cuda::synchronize(0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(max_abs_diff(gw[i], w[i]), 0.0) << "param " << i;  // same functor, same fp32 ops
    EXPECT_EQ(gst[i].to(kCpu).item<int64_t>(), 2) << "step " << i;
  }
}

namespace {

// Host synchronisations and device-to-host copies counted over three fp16 AMP GPT steps after
// three warm-up ones; `clip`: the transformer example's loop (unscale_, clip_grad_norm_).
mt::HostSyncCounts syncs_of_gpt_steps(bool clip) {
  mt::manual_seed(2);
  mt::nn::GPT gpt({.vocab_size = 512,
                   .context = 64,
                   .n_layer = 2,
                   .n_head = 4,
                   .d_model = 128,
                   .dropout = 0.1,
                   .tie_weights = false});
  gpt.to(kGpu);
  mt::optim::AdamW opt(gpt.parameters(), {.lr = 1e-3});
  mt::amp::GradScaler scaler({.init_scale = 1024});
  mt::Tensor tokens = mt::randint(0, 512, {4, 64}).to(kGpu), targets = mt::randint(0, 512, {4, 64}).to(kGpu);
  auto step = [&] {
    opt.zero_grad();
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(mt::kHalf);
      loss = F::cross_entropy(gpt(tokens).reshape({-1, 512}), targets.reshape({-1}));
    }
    scaler.backward(loss);
    if (clip) {
      scaler.unscale_(opt);
      mt::optim::clip_grad_norm_(gpt.parameters(), 1.0);
    }
    scaler.step(opt);
    scaler.update();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: allocator, cuBLAS handles, optimizer state
  mt::cuda::synchronize(0);
  mt::reset_host_sync_counts();
  for (int i = 0; i < 3; ++i) step();
  return mt::host_sync_counts(kGpu);
}

}  // namespace

TEST(CudaHostSync, NoSynchronisationInAnFp16AmpGptStep) {
  REQUIRE_GPU();
  const mt::HostSyncCounts c = syncs_of_gpt_steps(false);
  EXPECT_EQ(c.synchronizations, 0);
  EXPECT_EQ(c.device_to_host_copies, 0);
  mt::cuda::synchronize(0);
  EXPECT_EQ(mt::host_sync_counts(kGpu).synchronizations, 1);  // the counter does count
}

// The example's loop, with attention on its GEMM path (core/attention_plan.h) as well.
TEST(CudaHostSync, NoSynchronisationWithUnscaleClippingAndGemmAttention) {
  REQUIRE_GPU();
  const int64_t saved = mt::cuda::attention_score_memory();
  for (int64_t budget : {int64_t(0), int64_t(256) << 20}) {
    mt::cuda::set_attention_score_memory(budget);
    const mt::HostSyncCounts c = syncs_of_gpt_steps(true);
    EXPECT_EQ(c.synchronizations, 0) << "attention score memory " << budget;
    EXPECT_EQ(c.device_to_host_copies, 0) << "attention score memory " << budget;
  }
  mt::cuda::set_attention_score_memory(saved);
}

// 200 forced overflows in a row (the scale backs off from 2^16 to the 2^-126 floor and stays
// there for ~60 steps), then clean steps: the GPU's device-side scaler must skip every
// overflowing step exactly as the CPU row does (scale, counters, untouched parameters, no NaN
// weight) and apply the first clean steps from the floor scale.
TEST(CudaScaler, TwoHundredForcedOverflowsMatchTheCpuRow) {
  REQUIRE_GPU();
  mt::manual_seed(3);
  mt::nn::Sequential cpu_net(mt::nn::Linear(16, 32), mt::nn::ReLU(), mt::nn::Linear(32, 4));
  mt::nn::Sequential gpu_net(mt::nn::Linear(16, 32), mt::nn::ReLU(), mt::nn::Linear(32, 4));
  gpu_net.load_state_dict(cpu_net.state_dict());
  gpu_net.to(kGpu);
  mt::optim::AdamW cpu_opt(cpu_net.parameters(), {.lr = 1e-2}), gpu_opt(gpu_net.parameters(), {.lr = 1e-2});
  mt::amp::GradScaler cpu_scaler({.init_scale = 65536}), gpu_scaler({.init_scale = 65536});
  const mt::Tensor x = mt::randn({8, 16}), y = mt::randn({8, 4});
  std::vector<std::vector<float>> initial;
  for (const mt::Tensor& p : cpu_net.parameters()) initial.push_back(p.to_vector<float>());
  auto step = [](mt::nn::Sequential& net, mt::optim::AdamW& opt, mt::amp::GradScaler& scaler, const mt::Tensor& x,
                 const mt::Tensor& y, bool overflow) {
    opt.zero_grad();
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(mt::kHalf);
      loss = F::mse_loss(net.forward(x), y);
    }
    scaler.backward(overflow ? loss * INFINITY : loss);
    scaler.step(opt);
    scaler.update();
  };
  const mt::Tensor gx = x.to(kGpu), gy = y.to(kGpu);
  for (int i = 0; i < 200; ++i) {
    step(cpu_net, cpu_opt, cpu_scaler, x, y, true);
    step(gpu_net, gpu_opt, gpu_scaler, gx, gy, true);
  }
  EXPECT_EQ(cpu_scaler.scale(), mt::amp::kMinScale);
  EXPECT_EQ(gpu_scaler.scale(), cpu_scaler.scale());
  EXPECT_EQ(gpu_scaler.skipped_steps(), 200);
  EXPECT_EQ(gpu_scaler.growth_tracker(), cpu_scaler.growth_tracker());
  EXPECT_EQ(gpu_scaler.state_dict().scalars, cpu_scaler.state_dict().scalars);  // scale and every counter
  const std::vector<mt::Tensor> gp = gpu_net.parameters();
  for (size_t i = 0; i < gp.size(); ++i) EXPECT_EQ(gp[i].to(kCpu).to_vector<float>(), initial[i]) << "param " << i;
  for (int i = 0; i < 3; ++i) {
    step(cpu_net, cpu_opt, cpu_scaler, x, y, false);
    step(gpu_net, gpu_opt, gpu_scaler, gx, gy, false);
  }
  EXPECT_EQ(gpu_scaler.skipped_steps(), 200);
  EXPECT_EQ(gpu_scaler.scale(), cpu_scaler.scale());
  const std::vector<mt::Tensor> cp = cpu_net.parameters();
  for (size_t i = 0; i < gp.size(); ++i) {
    const mt::Tensor g = gp[i].to(kCpu);
    const std::vector<float> v = g.to_vector<float>();
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float e) { return std::isfinite(e); })) << "param " << i;
    EXPECT_NE(v, initial[i]) << "param " << i << " did not train";
    EXPECT_LT(max_abs_diff(g, cp[i]), 1e-3) << "param " << i;  // fp16 GEMMs sum in another order
  }
}

TEST(CudaLarge, MoreThan2Pow31HalfElements) {
  REQUIRE_GPU();
  if (mt::cuda::total_memory(0) < (size_t(24) << 30)) GTEST_SKIP() << "needs 24 GiB of GPU memory";
  const int64_t rows = 2, cols = (int64_t(1) << 30) + 3;  // 2^31 + 6 elements
  // Zeros with the last two columns at 20: the tail, past element 2^31 in row 1, holds each
  // row's maximum and most of its softmax mass, so an index that wraps at 2^31 shows. (With
  // equal values every softmax output, 1 / 2^30, is below fp16's smallest subnormal: zeros.)
  mt::Tensor x = mt::zeros({rows, cols}, {.dtype = mt::kHalf, .device = kGpu});
  x.narrow(1, cols - 2, 2).fill_(20.0);
  mt::Tensor y = x + x;
  EXPECT_EQ(y.narrow(1, cols - 1, 1).to(kCpu).to(mt::kFloat32).sum().item<float>(), 80.0f);
  EXPECT_EQ(mt::sum(x.to(mt::kFloat32)).item<double>(), 80.0);
  // Each row: two terms exp(0) after the max shift and cols - 2 terms exp(-20).
  const double tail_p = 1.0 / (2.0 + double(cols - 2) * std::exp(-20.0));  // about 0.24
  mt::Tensor p = mt::softmax(x, 1);
  EXPECT_NEAR(p.narrow(1, cols - 2, 2).to(kCpu).to(mt::kFloat64).sum().item<double>(), 4 * tail_p,
              4 * tail_p * 1e-3);  // fp16 outputs (2^-11 relative each), fp32 sums
  // Row 0's target is a zero, row 1's a 20: the mean of (lse - 0, lse - 20), about 11.4; the
  // fp16 loss is within half an ulp (2^-8 between 8 and 16) of it.
  const double lse = 20.0 + std::log(2.0 + double(cols - 2) * std::exp(-20.0));
  mt::Tensor loss = F::cross_entropy(x, mt::from_vector<int64_t>({0, cols - 1}).to(kGpu));
  EXPECT_NEAR(loss.item<double>(), lse - 10.0, 0.005);
  mt::Tensor xt = x.t();  // [cols, 2], strided
  EXPECT_EQ(xt.narrow(0, cols - 1, 1).contiguous().to(kCpu).to(mt::kFloat32).sum().item<float>(), 40.0f);
  EXPECT_EQ(xt.narrow(0, 0, 1).contiguous().to(kCpu).to(mt::kFloat32).sum().item<float>(), 0.0f);
}

TEST(CudaStickyError, OutOfRangeIndexRaisesAtTheNextHostRead) {
  REQUIRE_GPU();
  mt::Tensor w = mt::randn({4, 3}).to(kGpu);
  mt::Tensor bad = mt::from_vector<int64_t>({1, 7, 2}).to(kGpu);
  mt::reset_host_sync_counts();
  mt::Tensor y = F::embedding(bad, w);  // queued: no read-back, no throw
  EXPECT_EQ(mt::host_sync_counts(kGpu).synchronizations, 0);
  try {
    (void)y.to(kCpu);
    ADD_FAILURE() << "an out-of-range index was not reported";
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("embedding: index 7 at position 1"), std::string::npos) << e.what();
  }
  // Reported once; the device stays usable.
  EXPECT_NO_THROW(mt::cuda::synchronize(0));
  mt::Tensor logits = mt::randn({3, 4}).to(kGpu);
  mt::Tensor l = F::cross_entropy(logits, mt::from_vector<int64_t>({0, 9, 1}).to(kGpu));
  EXPECT_THROW((void)l.item<float>(), mt::Error);
  mt::Tensor ok = F::cross_entropy(logits, mt::from_vector<int64_t>({0, 3, 1}).to(kGpu));
  EXPECT_NEAR(ok.item<float>(), F::cross_entropy(logits.to(kCpu), mt::from_vector<int64_t>({0, 3, 1})).item<float>(),
              1e-5);
}

TEST(CudaTransfer, BlockingUploadFromPinnedMemoryMayBeRefilled) {
  REQUIRE_GPU();
  mt::Tensor host = mt::full({1 << 20}, 1.0f).pin_memory();
  ASSERT_TRUE(host.is_pinned());
  mt::Tensor d = host.to(kGpu);  // synchronous with respect to the host
  host.fill_(2.0f);
  EXPECT_EQ(mt::sum(d).item<double>(), double(1 << 20));
  mt::Tensor e = host.to(kGpu, /*non_blocking=*/true);
  mt::cuda::synchronize(0);
  EXPECT_EQ(mt::sum(e).item<double>(), 2.0 * double(1 << 20));
}

TEST(CudaTransfer, PinnedUploadToSecondDeviceWhileDeviceZeroIsCurrent) {
  REQUIRE_GPU();
  if (mt::cuda_device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const mt::Device d1 = mt::Device::cuda(1);
  for (int i = 0; i < 20; ++i) {
    mt::Tensor host = mt::full({1 << 22}, float(i)).pin_memory();
    mt::Tensor d = host.to(d1, true);
    host = mt::Tensor();  // freed while the DMA may still run: the block waits for cuda:1's event
    mt::Tensor next = mt::full({1 << 22}, -1.0f).pin_memory();  // may not reuse the block early
    EXPECT_EQ(mt::sum(d).item<double>(), double(i) * double(1 << 22)) << i;
  }
}

TEST(CudaBackward, KernelsMatchCpu) {
  REQUIRE_GPU();
  mt::manual_seed(9);
  // Embedding / scatter-add with repeated indices: bit-equal (same order, fp32 sums).
  for (mt::DType t : {mt::kFloat32, mt::kHalf, mt::kBFloat16}) {
    mt::Tensor w = mt::randn({50, 33}).to(t).requires_grad_();
    mt::Tensor gw = w.detach().to(kGpu).requires_grad_();
    mt::Tensor idx = mt::randint(0, 50, {700});
    mt::Tensor g = mt::randn({700, 33}).to(t);
    F::embedding(idx, w, 3).backward(g);
    F::embedding(idx.to(kGpu), gw, 3).backward(g.to(kGpu));
    EXPECT_EQ(max_abs_diff(gw.grad(), w.grad()), 0.0) << "embedding " << mt::dtype_name(t);
  }
  // Max-pool backward with ties (constant input): the same picked positions.
  {
    mt::Tensor x = mt::ones({2, 3, 8, 8}).requires_grad_();
    mt::Tensor gx = x.detach().to(kGpu).requires_grad_();
    mt::Tensor g = mt::randn({2, 3, 7, 7});
    F::max_pool2d(x, 2, {.stride = 1}).backward(g);
    F::max_pool2d(gx, 2, {.stride = 1}).backward(g.to(kGpu));
    EXPECT_LT(max_abs_diff(gx.grad(), x.grad()), 1e-5);
  }
  // Linear (bias gradient) and attention backward (causal, additive mask, dropout), fp16 and bf16.
  for (mt::DType t : {mt::kFloat32, mt::kHalf, mt::kBFloat16}) {
    const double tol = t == mt::kFloat32 ? 1e-4 : 5e-2;
    mt::Tensor x = mt::randn({64, 40}).to(t), wl = mt::randn({24, 40}).to(t), b = mt::randn({24}).to(t);
    std::vector<mt::Tensor> cpu = {x.requires_grad_(), wl.requires_grad_(), b.requires_grad_()};
    std::vector<mt::Tensor> gpu;
    for (const mt::Tensor& c : cpu) gpu.push_back(c.detach().to(kGpu).requires_grad_());
    mt::Tensor gy = mt::randn({64, 24}).to(t);
    F::linear(cpu[0], cpu[1], cpu[2]).backward(gy);
    F::linear(gpu[0], gpu[1], gpu[2]).backward(gy.to(kGpu));
    for (size_t i = 0; i < 3; ++i)
      EXPECT_LT(max_abs_diff(gpu[i].grad(), cpu[i].grad()), tol * 40)
          << "linear input " << i << " " << mt::dtype_name(t);
    for (int variant = 0; variant < 3; ++variant) {
      mt::Tensor q = mt::randn({2, 2, 16, 8}).to(t).requires_grad_(),
                 k = mt::randn({2, 2, 16, 8}).to(t).requires_grad_(),
                 v = mt::randn({2, 2, 16, 8}).to(t).requires_grad_();
      mt::Tensor qg = q.detach().to(kGpu).requires_grad_(), kg = k.detach().to(kGpu).requires_grad_(),
                 vg = v.detach().to(kGpu).requires_grad_();
      mt::AttentionOptions o;
      o.is_causal = variant == 0;
      if (variant == 1) o.attn_mask = mt::randn({16, 16}).to(t);
      if (variant == 2) o.dropout_p = 0.25;  // same Philox mask on both devices
      mt::manual_seed(11);
      mt::scaled_dot_product_attention(q, k, v, o).sum().backward();
      mt::AttentionOptions og = o;
      if (o.attn_mask.defined()) og.attn_mask = o.attn_mask.to(kGpu);
      mt::manual_seed(11);
      mt::scaled_dot_product_attention(qg, kg, vg, og).sum().backward();
      EXPECT_LT(max_abs_diff(qg.grad(), q.grad()), tol * 10) << "attention dq variant " << variant;
      EXPECT_LT(max_abs_diff(kg.grad(), k.grad()), tol * 10) << "attention dk variant " << variant;
      EXPECT_LT(max_abs_diff(vg.grad(), v.grad()), tol * 10) << "attention dv variant " << variant;
    }
  }
}
