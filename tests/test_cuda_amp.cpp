// The GPU's AMP step: the multi-tensor fused optimizer kernels against the CPU row (same
// functors, so only libm differences remain), the device-side skip on overflow, the
// device-resident GradScaler state machine, and the vectorized elementwise fast path.
// Without a GPU every test reports itself skipped.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../examples/mnist/models.h"
#include "core/backend.h"
#include "gpu_test.h"

namespace mt = mantissa;
namespace optim = mantissa::optim;

namespace {

const mt::Device kGpu = mt::Device::cuda(0);

void expect_close(const mt::Tensor& got, const mt::Tensor& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = g[i] == w[i] || std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok && reported++ < 5) ADD_FAILURE() << what << ": element " << i << " is " << g[i] << " vs " << w[i];
  }
}

// The same parameters on the CPU and the GPU: 30 small tensors (more than one launch's
// tensor list) and one of 200k elements (several chunks).
struct Params {
  std::vector<mt::Tensor> cpu, gpu;
  explicit Params(uint64_t seed) {
    mt::manual_seed(seed);
    for (int i = 0; i < 31; ++i) {
      const mt::Shape shape = i == 30 ? mt::Shape{400, 500} : mt::Shape{int64_t(3 + i), 7};
      mt::Tensor p = mt::randn(shape);
      cpu.push_back(p.clone().requires_grad_());
      gpu.push_back(p.to(kGpu).requires_grad_());
    }
  }
  // Gradients scaled by `scale` (as a GradScaler's backward leaves them).
  void set_grads(uint64_t seed, float scale) {
    mt::manual_seed(seed);
    for (size_t i = 0; i < cpu.size(); ++i) {
      mt::Tensor g = mt::randn(cpu[i].sizes()) * scale;
      cpu[i].set_grad(g);
      gpu[i].set_grad(g.to(kGpu));
    }
  }
};

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<mt::Tensor>)>;

void compare_fused_step(const std::string& what, const MakeOptimizer& make, mt::DType working_copy) {
  SCOPED_TRACE(what + (working_copy == mt::kFloat32 ? "" : std::string(" + ") + mt::dtype_name(working_copy)));
  Params p(11);
  if (working_copy != mt::kFloat32)
    for (size_t i = 0; i < p.cpu.size(); ++i) {
      mt::amp::working_copy(p.cpu[i], working_copy);
      mt::amp::working_copy(p.gpu[i], working_copy);
    }
  auto cpu_opt = make(p.cpu), gpu_opt = make(p.gpu);
  const float scale = 1024.0f;
  for (int step = 0; step < 3; ++step) {
    p.set_grads(100 + step, scale);
    cpu_opt->step({.inv_scale = 1 / scale});
    // The GPU takes the scale as a device tensor, as the GradScaler hands it over.
    gpu_opt->step({.scale = mt::full({1}, scale, {.device = kGpu})});
  }
  for (size_t i = 0; i < p.cpu.size(); ++i) {
    expect_close(p.gpu[i].to(mt::Device::cpu()), p.cpu[i], 1e-5, 1e-6, "param " + std::to_string(i));
    ASSERT_NE(gpu_opt->state(int64_t(i)), nullptr);
    EXPECT_EQ(gpu_opt->state(int64_t(i))->step, 3);
    for (const auto& [name, buf] : cpu_opt->state(int64_t(i))->buffers)
      expect_close(gpu_opt->state(int64_t(i))->buffers.at(name).to(mt::Device::cpu()), buf, 1e-5, 1e-6,
                   name + " of param " + std::to_string(i));
    if (working_copy != mt::kFloat32) {
      // Refreshed by the kernel: the cached copy is the rounded new master, with no cast.
      const uint64_t casts = mt::amp::working_copy_casts();
      mt::Tensor wc = mt::amp::working_copy(p.gpu[i], working_copy);
      EXPECT_EQ(mt::amp::working_copy_casts(), casts);
      expect_close(wc.to(mt::Device::cpu()), p.gpu[i].to(working_copy).to(mt::Device::cpu()), 0, 0,
                   "working copy " + std::to_string(i));
    }
  }
}

}  // namespace

TEST(CudaAmp, FusedStepMatchesCpu) {
  REQUIRE_GPU();
  for (mt::DType wc : {mt::kFloat32, mt::kHalf, mt::kBFloat16}) {
    compare_fused_step(
        "SGD nesterov",
        [](std::vector<mt::Tensor> ps) {
          return std::make_unique<optim::SGD>(
              ps, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-2, .nesterov = true});
        },
        wc);
    compare_fused_step(
        "SGD plain",
        [](std::vector<mt::Tensor> ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.05}); }, wc);
    compare_fused_step(
        "Adam amsgrad",
        [](std::vector<mt::Tensor> ps) {
          return std::make_unique<optim::Adam>(ps,
                                               optim::AdamOptions{.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true});
        },
        wc);
    compare_fused_step(
        "RMSprop centered momentum",
        [](std::vector<mt::Tensor> ps) {
          return std::make_unique<optim::RMSprop>(
              ps, optim::RMSpropOptions{.lr = 1e-2, .weight_decay = 1e-2, .momentum = 0.9, .centered = true});
        },
        wc);
    compare_fused_step(
        "RMSprop centered",
        [](std::vector<mt::Tensor> ps) {
          return std::make_unique<optim::RMSprop>(ps, optim::RMSpropOptions{.lr = 1e-2, .centered = true});
        },
        wc);
    compare_fused_step(
        "RMSprop plain",
        [](std::vector<mt::Tensor> ps) { return std::make_unique<optim::RMSprop>(ps, optim::RMSpropOptions{}); }, wc);
    compare_fused_step(
        "Adagrad",
        [](std::vector<mt::Tensor> ps) {
          return std::make_unique<optim::Adagrad>(
              ps, optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .initial_accumulator_value = 0.1});
        },
        wc);
    compare_fused_step(
        "AdamW",
        [](std::vector<mt::Tensor> ps) {
          return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 1e-2, .weight_decay = 1e-2});
        },
        wc);
  }
}

TEST(CudaAmp, OverflowSkipsTheStepOnTheDevice) {
  REQUIRE_GPU();
  mt::Tensor w = mt::from_vector<float>({1, 2}).to(kGpu).requires_grad_();
  optim::Adam opt({w}, {.lr = 0.1});
  mt::amp::GradScaler scaler({.init_scale = 1024.0});
  mt::Tensor x = mt::from_vector<float>({1, INFINITY}).to(kGpu);
  scaler.backward((w * x).sum());
  EXPECT_TRUE(scaler.step(opt));  // queued: the device decides
  scaler.update();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2}));  // untouched
  ASSERT_NE(opt.state(0), nullptr);                             // moments allocated ...
  EXPECT_EQ(opt.state(0)->step, 0);                             // ... but the step did not count
  EXPECT_EQ(opt.state(0)->buffers.at("exp_avg").to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_FALSE(scaler.found_inf());  // cleared by update()

  opt.zero_grad();
  scaler.backward((w * mt::from_vector<float>({1, 1}).to(kGpu)).sum());
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(opt.state(0)->step, 1);
  EXPECT_NEAR(w.to_vector<float>()[0], 0.9f, 1e-5f);  // Adam's first step: lr against the sign
}

TEST(CudaAmp, ScalerStateMachineMatchesCpu) {
  REQUIRE_GPU();
  // Overflow pattern over 12 steps, growth every 3 clean steps, hysteresis 2, floor 4.
  const std::vector<bool> overflow = {false, true, true, false, false, false, true, false, true, true, false, false};
  // The scaler's trace (scale, growth tracker per step; skipped steps, step count) must match
  // exactly; the weights to rounding (nvcc contracts a * b + c into FMAs).
  auto run = [&](mt::Device device, std::vector<double>& weights) {
    mt::Tensor w = mt::ones({3}, {.device = device}).requires_grad_();
    optim::SGD opt({w}, {.lr = 0.01, .momentum = 0.5});
    mt::amp::GradScaler scaler({.init_scale = 16.0, .growth_interval = 3, .min_scale = 4.0, .hysteresis = 2});
    std::vector<double> trace;
    for (bool inf : overflow) {
      opt.zero_grad();
      const double factor = inf ? std::numeric_limits<double>::infinity() : 1.0;
      scaler.backward((w * factor).sum());
      scaler.step(opt);
      scaler.update();
      trace.push_back(scaler.scale());
      trace.push_back(double(scaler.growth_tracker()));
    }
    trace.push_back(double(scaler.skipped_steps()));
    trace.push_back(double(opt.state(0)->step));
    weights = w.to_vector<double>();
    return trace;
  };
  std::vector<double> gpu_w, cpu_w;
  EXPECT_EQ(run(kGpu, gpu_w), run(mt::Device::cpu(), cpu_w));
  ASSERT_EQ(gpu_w.size(), cpu_w.size());
  for (size_t i = 0; i < gpu_w.size(); ++i) EXPECT_NEAR(gpu_w[i], cpu_w[i], 1e-6);
}

TEST(CudaAmp, VectorizedAndStridedElementwiseAgree) {
  REQUIRE_GPU();
  mt::manual_seed(5);
  // 1003 elements: a vector body and a tail; the narrow()ed views are misaligned by one
  // element and take the scalar path; the transposed one the strided path.
  for (mt::DType t : {mt::kFloat32, mt::kHalf, mt::kBFloat16, mt::kFloat64}) {
    SCOPED_TRACE(mt::dtype_name(t));
    mt::Tensor a = mt::randn({1003}).to(t), b = mt::randn({1003}).to(t);
    mt::Tensor ga = a.to(kGpu), gb = b.to(kGpu);
    const double tol = t == mt::kFloat32 ? 1e-6 : (t == mt::kFloat64 ? 1e-12 : 1e-2);
    expect_close((ga + gb).to(mt::Device::cpu()), a + b, tol, tol, "add");
    expect_close(mt::relu(ga).to(mt::Device::cpu()), mt::relu(a), 0, 0, "relu");
    expect_close(mt::gelu(ga).to(mt::Device::cpu()), mt::gelu(a), tol, tol, "gelu");
    expect_close((ga.narrow(0, 1, 1000) * gb.narrow(0, 2, 1000)).to(mt::Device::cpu()),
                 a.narrow(0, 1, 1000) * b.narrow(0, 2, 1000), tol, tol, "misaligned mul");
    mt::Tensor m = mt::randn({37, 29}).to(t);
    expect_close(mt::relu(m.to(kGpu).t()).to(mt::Device::cpu()), mt::relu(m.t()), 0, 0, "strided relu");
  }
}

// The documented one-liner, Autocast(kHalf) without naming a device, on the MNIST example's
// model moved to the GPU: its linears run in fp16 (as `mnist --device cuda --amp fp16` does),
// the loss in fp32, and the masters' gradients arrive in fp32.
TEST(CudaAutocast, DocumentedOneLinerRunsExampleMatmulsInFp16) {
  REQUIRE_GPU();
  mt::manual_seed(0);
  mnist::Mlp cpu_model;  // same seed, same initial weights
  mt::manual_seed(0);
  mnist::Mlp model;
  model.to(kGpu);
  mt::Tensor x = mt::randn({8, 1, 28, 28}).to(kGpu);
  mt::Tensor labels = mt::randint(0, 10, {8}).to(kGpu);
  mt::Tensor logits, loss;
  {
    mt::amp::Autocast ac(mt::kHalf);
    mt::Tensor h = model.fc1(x.flatten(1));
    EXPECT_EQ(h.dtype(), mt::kHalf);
    logits = model.forward(x);
    loss = mt::nn::functional::cross_entropy(logits, labels);
  }
  EXPECT_EQ(logits.dtype(), mt::kHalf);
  EXPECT_EQ(loss.dtype(), mt::kFloat32);
  loss.backward();
  for (const mt::Tensor& p : model.parameters()) {
    EXPECT_EQ(p.dtype(), mt::kFloat32);
    EXPECT_EQ(p.grad().dtype(), mt::kFloat32);
  }
  // The same forward in fp32 on the CPU agrees within fp16's precision.
  const std::vector<double> got = logits.to(mt::Device::cpu()).to(mt::kFloat64).to_vector<double>();
  const std::vector<double> want = cpu_model.forward(x.to(mt::Device::cpu())).to(mt::kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-2 + 1e-2 * std::abs(want[i])) << i;
}
