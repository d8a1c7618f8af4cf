// The GradScaler's contract "every gradient step() applies has been checked" (docs/amp.md):
// gradients written or replaced after backward (hooks, in-place edits of .grad(), set_grad,
// autograd::grad results) are checked at step(); an inf/NaN among them skips the step, backs
// off the scale and counts a skipped step, leaving weights and optimizer state untouched.
// Also the scale's validation (construction, load) and the underflow floor, on the CPU row
// and, where a GPU exists, on the device.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "core/backend.h"
#include "core/step_math.h"
#include "gpu_test.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace mt = mantissa;
using testing::HasSubstr;

namespace {

constexpr double kScale = 1024.0;

// A two-parameter problem on `device` with SGD (momentum) or AdamW; one clean step is taken
// first so that the optimizer has state to leave untouched.
struct Problem {
  mt::Device device;
  mt::Tensor w, b;
  std::unique_ptr<mt::optim::Optimizer> opt;
  mt::amp::GradScaler scaler{{.init_scale = kScale}};

  Problem(bool adamw, mt::Device d) : device(d) {
    w = mt::from_vector<float>({0.5f, -1.0f, 2.0f}).to(d).requires_grad_();
    b = mt::from_vector<float>({0.25f, 3.0f}).to(d).requires_grad_();
    if (adamw)
      opt = std::make_unique<mt::optim::AdamW>(std::vector<mt::Tensor>{w, b}, mt::optim::AdamWOptions{.lr = 0.1});
    else
      opt = std::make_unique<mt::optim::SGD>(std::vector<mt::Tensor>{w, b},
                                             mt::optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    iteration();
    EXPECT_EQ(scaler.skipped_steps(), 0);
  }
  mt::Tensor loss() const {
    const mt::Tensor x = mt::from_vector<float>({1.0f, 2.0f, -3.0f}).to(device);
    return (w * x).sum() + (b * b).sum();
  }
  // backward, `between` (the user's edit), step, update; returns step()'s result.
  bool iteration(const std::function<void()>& between = [] {}) {
    opt->zero_grad();
    scaler.backward(loss());
    between();
    const bool taken = scaler.step(*opt);
    scaler.update();
    return taken;
  }
  std::vector<std::vector<float>> snapshot() const {
    std::vector<std::vector<float>> s{w.to_vector<float>(), b.to_vector<float>()};
    for (const auto& [k, t] : opt->state_dict()) s.push_back(t.to_vector<float>());
    for (const auto& [k, v] : opt->state_dict().scalars) s.push_back({float(v)});
    return s;
  }
};

// Runs one iteration with `between` and expects it skipped with nothing changed.
void expect_skipped(Problem& p, const std::function<void()>& between, const std::string& what) {
  const auto before = p.snapshot();
  const double scale = p.scaler.scale();
  const int64_t skipped = p.scaler.skipped_steps();
  const bool taken = p.iteration(between);
  if (p.device.is_cpu()) {
    EXPECT_FALSE(taken) << what;  // on a GPU the decision is the device's
  }
  EXPECT_EQ(p.scaler.skipped_steps(), skipped + 1) << what;
  EXPECT_EQ(p.scaler.scale(), scale * 0.5) << what;
  EXPECT_EQ(p.snapshot(), before) << what << ": weights or optimizer state changed";
  for (float v : p.w.to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << what;
}

void expect_all_escapes_caught(bool adamw, mt::Device d) {
  const float bad[] = {NAN, INFINITY, -INFINITY};
  for (float v : bad) {
    const std::string tag = std::string(adamw ? "AdamW" : "SGD") + " " + std::to_string(v) + ": ";
    {
      Problem p(adamw, d);
      // A hook on the leaf that writes the value into the accumulated gradient in place.
      mt::autograd::register_post_accumulate_grad_hook(p.w, [v](const mt::Tensor& leaf) { leaf.grad().fill_(v); });
      expect_skipped(
          p, [] {}, tag + "post-accumulate hook");
    }
    {
      Problem p(adamw, d);
      p.b.register_hook([v](const mt::Tensor& g) { return g * v; });
      expect_skipped(
          p, [] {}, tag + "tensor hook");
    }
    {
      Problem p(adamw, d);
      expect_skipped(
          p, [&] { p.w.grad().mul_(v); }, tag + ".grad().mul_ after backward");
    }
    {
      Problem p(adamw, d);
      // Gradient noise of the user's own, one element non-finite.
      expect_skipped(
          p,
          [&] {
            p.b.grad().add_(mt::from_vector<float>({0.0f, v}).to(d));
          },
          tag + ".grad().add_ after backward");
    }
    {
      Problem p(adamw, d);
      expect_skipped(
          p, [&] { p.w.set_grad(mt::full({3}, v, {.device = d})); }, tag + "set_grad");
    }
    {
      Problem p(adamw, d);
      // autograd::grad results installed by hand (issue: they skip accumulation entirely).
      expect_skipped(
          p,
          [&] {
            std::vector<mt::Tensor> g = mt::autograd::grad({p.loss() * v}, {p.w, p.b});
            p.w.set_grad(g[0]);
            p.b.set_grad(g[1]);
          },
          tag + "autograd::grad + set_grad");
    }
  }
}

}  // namespace

TEST(ScalerChecked, SgdSkipsEveryEscapedNonFinite) { expect_all_escapes_caught(false, mt::Device::cpu()); }
TEST(ScalerChecked, AdamWSkipsEveryEscapedNonFinite) { expect_all_escapes_caught(true, mt::Device::cpu()); }

TEST(ScalerChecked, GpuSkipsEveryEscapedNonFinite) {
  REQUIRE_GPU();
  expect_all_escapes_caught(false, mt::Device::cuda(0));
  expect_all_escapes_caught(true, mt::Device::cuda(0));
}

// A finite edit after backward is checked and applied: the step uses the edited gradient.
TEST(ScalerChecked, FiniteEditAfterBackwardIsApplied) {
  mt::Tensor w = mt::from_vector<float>({1.0f, 1.0f}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 256.0});
  scaler.backward((w * mt::from_vector<float>({2.0f, 4.0f})).sum());
  w.grad().mul_(0.5);  // still scaled by 256: the step unscales it
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.0f, -1.0f}));
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

// After unscale_ the gradients are checked; an edit between unscale_ and step is checked again.
TEST(ScalerChecked, EditAfterUnscaleIsChecked) {
  mt::Tensor w = mt::from_vector<float>({1.0f, 1.0f}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 256.0});
  scaler.backward(w.sum());
  EXPECT_FALSE(scaler.unscale_(opt));
  w.grad().mul_(NAN);
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), 128.0);
}

// Gradient accumulation over two backward passes stays on the fast path and is still checked.
TEST(ScalerChecked, AccumulatedMicroBatches) {
  mt::Tensor w = mt::from_vector<float>({1.0f}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 4.0});
  scaler.backward((w * 1.0).sum());
  scaler.backward((w * 2.0).sum());
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_FLOAT_EQ(w.item<float>(), -2.0f);
}

// ---------------------------------------------------------------- scale validation

TEST(ScalerScale, ConstructionRejectsScalesThatCannotWork) {
  for (double s : {1e-50, 1e-40, 0.0, -1.0, 1e39, double(INFINITY), double(NAN)}) {
    const std::string v = mt::detail::concat(s);
    EXPECT_ERROR(mt::amp::GradScaler({.init_scale = s}), HasSubstr("GradScaler"), HasSubstr("init_scale"),
                 HasSubstr(v));
  }
  EXPECT_EQ(mt::amp::GradScaler({.init_scale = mt::amp::kMinScale}).scale(), mt::amp::kMinScale);
  EXPECT_EQ(mt::amp::GradScaler({.init_scale = double(FLT_MAX)}).scale(), double(FLT_MAX));
  EXPECT_EQ(1.0f / float(mt::amp::kMinScale), 85070591730234615865843651857942052864.0f);  // 2^126: finite
}

TEST(ScalerScale, LoadRejectsScalesThatCannotWorkAndLeavesTheScalerUntouched) {
  mt::amp::GradScaler s({.init_scale = 64.0, .growth_interval = 7});
  mt::Tensor w = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 0.0});
  s.backward(w.sum());
  s.step(opt);
  s.update();
  const mt::StateDict good = s.state_dict();
  for (double v : {1e-50, 1e-40, 0.0, -2.0, 1e39, double(INFINITY), double(NAN)}) {
    mt::StateDict bad = good;
    bad.scalars["scale"] = v;
    EXPECT_ERROR(s.load_state_dict(bad), HasSubstr("load_state_dict"), HasSubstr("'scale'"),
                 HasSubstr(mt::detail::concat(v)));
    EXPECT_EQ(s.scale(), 64.0);
    EXPECT_EQ(s.growth_tracker(), 1);
    EXPECT_EQ(s.options().growth_interval, 7);
  }
}

// ---------------------------------------------------------------- underflow (issue 22, item 6)

// A scale that keeps backing off stops at kMinScale (2^-126) on every device: the inverse the
// step forms stays finite, overflowing steps keep being skipped, and the first clean step is
// applied correctly unscaled.
void expect_underflow_rule(mt::Device d) {
  mt::Tensor w = mt::from_vector<float>({1.0f}).to(d).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = std::ldexp(1.0, -120)});
  for (int i = 0; i < 12; ++i) {
    opt.zero_grad();
    scaler.backward((w * INFINITY).sum());
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_EQ(scaler.scale(), mt::amp::kMinScale);
  EXPECT_EQ(scaler.scale(), std::ldexp(1.0, -126));
  EXPECT_EQ(scaler.skipped_steps(), 12);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1.0f}));
  opt.zero_grad();
  scaler.backward((w * 3.0).sum());  // gradient 3 * 2^-126: a normal float
  scaler.step(opt);
  scaler.update();
  EXPECT_EQ(scaler.skipped_steps(), 12);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-2.0f}));
}

TEST(ScalerUnderflow, ScaleStopsAtTheSmallestNormalFloatOnTheCpu) { expect_underflow_rule(mt::Device::cpu()); }
TEST(ScalerUnderflow, ScaleStopsAtTheSmallestNormalFloatOnTheGpu) {
  REQUIRE_GPU();
  expect_underflow_rule(mt::Device::cuda(0));
}

// The rule the device kernel runs (math::ScaleUpdate through Backend::update_scale) on the CPU
// row: with the floor the scaler passes, the scale never reaches a denormal or 0.
TEST(ScalerUnderflow, UpdateRuleNeverGoesBelowTheFloor) {
  mt::Tensor scale = mt::full({1}, std::ldexp(1.0, -125), {.dtype = mt::DType::Float32});
  mt::Tensor counters = mt::zeros({3}, {.dtype = mt::DType::Int32});
  mt::Tensor flag = mt::ones({1}, {.dtype = mt::DType::Float32});
  const mt::math::ScaleUpdate rule{2.0f, 0.5f, float(mt::amp::kMinScale), 2000, 1, true, true};
  for (int i = 0; i < 5; ++i) {
    flag.fill_(1.0);
    mt::cpu_backend().update_scale(scale, counters, flag, rule);
  }
  EXPECT_EQ(scale.item<float>(), float(mt::amp::kMinScale));
  EXPECT_EQ(counters.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 5}));
}

// A gradient the leaf takes without a copy (mul's fresh output) is still checked: an inf in it
// skips the step.
TEST(ScalerChecked, TakenGradientIsChecked) {
  mt::Tensor w = mt::from_vector<float>({1.0f, 1.0f}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 256.0});
  scaler.backward((w * mt::from_vector<float>({2.0f, INFINITY})).sum());
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(scaler.skipped_steps(), 1);
}
