// Mixed precision: the paper's three techniques (each test also shows the failure
// when the technique is switched off), the GradScaler's state machine, autocast
// dispatch and the dual-copy parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "core/half.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace mt = mantissa;

namespace {
float half_round(float v) { return mt::full({1}, v).to(mt::kHalf).item<float>(); }
}  // namespace

// 1. An fp32 master keeps updates smaller than fp16's spacing at 1.0 (2^-10).
TEST(AmpPaper, MasterWeightsKeepTinyUpdates) {
  mt::Tensor master = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({master}, {.lr = 1.0});
  mt::Tensor w16_only = mt::ones({1}, {.dtype = mt::kHalf});
  for (int i = 0; i < 10; ++i) {
    master.set_grad(mt::full({1}, 1e-4f));
    opt.step();
    mt::NoGradGuard g;
    w16_only.sub_(mt::full({1}, 1e-4f, {.dtype = mt::kHalf}));  // fp16-only weights
  }
  EXPECT_NEAR(master.item<float>(), 1.0f - 10 * 1e-4f, 1e-6f);  // kept with a master
  EXPECT_EQ(w16_only.item<float>(), 1.0f);                      // lost without one
  // The working copy used by autocast follows the master at fp16 resolution.
  EXPECT_EQ(mt::amp::working_copy(master, mt::kHalf).item<float>(), half_round(1.0f - 10 * 1e-4f));
}

namespace {
// loss = mean(matmul(x, w) * 2^-17) over 1024 rows: every fp16 gradient reaching the
// matmul is 2^-10 * 2^-17 = 2^-27, below fp16's smallest subnormal (2^-24).
mt::Tensor tiny_gradient_loss(const mt::Tensor& w) {
  mt::amp::Autocast ac(mt::kHalf);
  mt::Tensor x = mt::ones({1024, 1});
  mt::Tensor h = mt::matmul(x, w);
  EXPECT_EQ(h.dtype(), mt::kHalf);
  return mt::mean(h * std::ldexp(1.0, -17));
}
}  // namespace

// 2. Loss scaling rescues gradients that flush to zero in fp16.
TEST(AmpPaper, LossScalingRescuesSmallGradients) {
  mt::Tensor w = mt::ones({1, 1}).requires_grad_();
  tiny_gradient_loss(w).backward();  // no scaling
  EXPECT_EQ(w.grad().item<float>(), 0.0f);

  w.set_grad({});
  mt::amp::GradScaler scaler({.init_scale = 65536.0});
  scaler.backward(tiny_gradient_loss(w));
  EXPECT_FALSE(scaler.found_inf());
  // The master gradient is fp32 and, once unscaled, equals 1024 * 2^-27 = 2^-17.
  EXPECT_EQ(w.grad().dtype(), mt::kFloat32);
  EXPECT_FLOAT_EQ(w.grad().item<float>() / 65536.0f, std::ldexp(1.0f, -17));
}

// 3. A length-4096 dot product accumulated in fp32 is far more accurate than in fp16.
TEST(AmpPaper, Fp32AccumulationOfFp16Products) {
  mt::manual_seed(7);
  mt::Tensor a = mt::rand({4096}).to(mt::kHalf), b = mt::rand({4096}).to(mt::kHalf);
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  double exact = 0;
  for (size_t i = 0; i < av.size(); ++i) exact += av[i] * bv[i];
  // fp16 inputs, fp32 accumulation, one rounding: what matmul does.
  double fp32_acc = mt::matmul(a, b).item<float>();
  // The same products accumulated in fp16 (the technique switched off).
  mt::Tensor prods = (a * b).to(mt::kHalf);
  std::vector<mt::Half> p = prods.to_vector<mt::Half>();
  mt::Half s(0.0f);
  for (auto v : p) s = mt::Half(float(s) + float(v));
  double fp16_acc = float(s);
  double err32 = std::fabs(fp32_acc - exact) / exact, err16 = std::fabs(fp16_acc - exact) / exact;
  EXPECT_LT(err32, 1e-3);        // one fp16 rounding of the result
  EXPECT_GT(err16, 20 * err32);  // fp16 accumulation stalls once the sum dwarfs each product
}

TEST(GradScaler, InfGradientSkipsStepAndBacksOff) {
  mt::Tensor w = mt::from_vector<float>({1, 2}).requires_grad_();
  mt::optim::Adam opt({w}, {.lr = 0.1});
  mt::amp::GradScaler scaler({.init_scale = 1024.0});
  mt::Tensor x = mt::from_vector<float>({1, INFINITY});
  opt.zero_grad();
  scaler.backward((w * x).sum());
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2}));  // untouched
  EXPECT_EQ(opt.state(0), nullptr);                             // Adam's step count not advanced
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_FALSE(scaler.found_inf());  // cleared by update()

  // A clean step goes through with the gradient unscaled in the fused pass.
  opt.zero_grad();
  scaler.backward((w * mt::from_vector<float>({1, 1})).sum());
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  ASSERT_NE(opt.state(0), nullptr);
  EXPECT_EQ(opt.state(0)->step, 1);
  // Adam's first step moves each weight by lr against the (unit) gradient's sign.
  EXPECT_NEAR(w.to_vector<float>()[0], 0.9f, 1e-5f);
}

TEST(GradScaler, GrowsAfterIntervalOfCleanSteps) {
  mt::Tensor w = mt::ones({2}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 0.0});
  mt::amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 3});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(scaler.scale(), 8.0) << "step " << i;
    opt.zero_grad();
    scaler.backward(w.sum());
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_EQ(scaler.scale(), 16.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, StaticScaleNeverChangesButStillSkips) {
  mt::Tensor w = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 128.0, .growth_interval = 1, .dynamic = false});
  scaler.backward((w * INFINITY).sum());
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.scale(), 128.0);
  opt.zero_grad();
  scaler.backward((w * 3.0).sum());
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.scale(), 128.0);
  EXPECT_FLOAT_EQ(w.item<float>(), 1.0f - 3.0f);  // gradient unscaled: 3, lr 1
}

TEST(GradScaler, HysteresisAndMinScale) {
  mt::Tensor w = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 4.0, .min_scale = 2.0, .hysteresis = 2});
  auto overflow = [&] {
    opt.zero_grad();
    scaler.backward((w * INFINITY).sum());
    scaler.step(opt);
    scaler.update();
  };
  overflow();
  EXPECT_EQ(scaler.scale(), 4.0);  // first overflow tolerated
  overflow();
  EXPECT_EQ(scaler.scale(), 2.0);
  overflow();
  overflow();
  EXPECT_EQ(scaler.scale(), 2.0);  // floor
  EXPECT_EQ(scaler.skipped_steps(), 4);
}

TEST(GradScaler, UnscaleBeforeClippingThenStep) {
  mt::Tensor w = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 1.0});
  mt::amp::GradScaler scaler({.init_scale = 256.0});
  scaler.backward((w * 5.0).sum());
  EXPECT_FLOAT_EQ(w.grad().item<float>(), 5.0f * 256.0f);
  EXPECT_FALSE(scaler.unscale_(opt));
  EXPECT_FLOAT_EQ(w.grad().item<float>(), 5.0f);
  EXPECT_THROW(scaler.unscale_(opt), mt::Error);  // twice before update()
  EXPECT_TRUE(scaler.step(opt));                  // does not unscale again
  scaler.update();
  EXPECT_FLOAT_EQ(w.item<float>(), -4.0f);
}

TEST(GradScaler, StateDictRoundTrip) {
  mt::amp::GradScaler a({.init_scale = 32.0, .growth_interval = 5});
  mt::Tensor w = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 0.0});
  for (int i = 0; i < 2; ++i) {
    a.backward(w.sum());
    a.step(opt);
    a.update();
  }
  mt::amp::GradScaler b;
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(b.scale(), 32.0);
  EXPECT_EQ(b.growth_tracker(), 2);
  auto bad = a.state_dict();
  bad.scalars.erase("scale");
  EXPECT_THROW(b.load_state_dict(bad), mt::Error);
}

TEST(GradScaler, DisabledIsPlainBackwardAndStep) {
  mt::Tensor w = mt::ones({1}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 0.5});
  mt::amp::GradScaler scaler({.enabled = false});
  scaler.backward((w * 2.0).sum());
  EXPECT_FLOAT_EQ(w.grad().item<float>(), 2.0f);
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_FLOAT_EQ(w.item<float>(), 0.0f);
}

TEST(Autocast, OpListsDecideOutputTypes) {
  mt::Tensor x = mt::randn({4, 8}), w = mt::randn({8, 3}).requires_grad_();
  mt::amp::Autocast ac(mt::kHalf);
  mt::Tensor y = mt::matmul(x, w);
  EXPECT_EQ(y.dtype(), mt::kHalf);                     // lower-precision list
  EXPECT_EQ(mt::softmax(y, 1).dtype(), mt::kFloat32);  // fp32 list
  EXPECT_EQ(mt::exp(y).dtype(), mt::kFloat32);
  EXPECT_EQ(mt::sum(y).dtype(), mt::kFloat32);
  EXPECT_EQ((y + mt::ones({4, 3})).dtype(), mt::kFloat32);          // type promotion
  EXPECT_EQ(mt::relu(y).dtype(), mt::kHalf);                        // pass-through
  EXPECT_EQ(mt::cat({y, mt::ones({1, 3})}).dtype(), mt::kFloat32);  // promote
  mt::sum(y).backward();
  EXPECT_EQ(w.grad().dtype(), mt::kFloat32);  // master gradient in fp32
  {
    mt::amp::Autocast off(false);  // nested: inputs' own types
    EXPECT_EQ(mt::matmul(x, w).dtype(), mt::kFloat32);
  }
  EXPECT_EQ(mt::matmul(x, w).dtype(), mt::kHalf);  // restored on exit
}

TEST(Autocast, IsThreadLocalAndRestores) {
  EXPECT_FALSE(mt::amp::is_autocast_enabled());
  {
    mt::amp::Autocast ac(mt::kBFloat16);
    EXPECT_TRUE(mt::amp::is_autocast_enabled());
    bool other = true;
    std::thread t([&] { other = mt::amp::is_autocast_enabled(); });
    t.join();
    EXPECT_FALSE(other);
    EXPECT_EQ(mt::matmul(mt::ones({2, 2}), mt::ones({2, 2})).dtype(), mt::kBFloat16);
  }
  EXPECT_FALSE(mt::amp::is_autocast_enabled());
  EXPECT_THROW((mt::amp::Autocast(mt::kFloat32)), mt::Error);  // parenthesized: clang reads it as a declaration
}

TEST(DualCopy, WorkingCopyMadeOncePerOptimizerStep) {
  mt::Tensor w = mt::randn({8, 4}).requires_grad_(), b = mt::randn({4}).requires_grad_();
  mt::optim::SGD opt({w, b}, {.lr = 0.1});
  mt::Tensor x = mt::randn({16, 8});
  auto forward = [&] {
    mt::amp::Autocast ac(mt::kHalf);
    return mt::sum(mt::matmul(x, w)) + mt::sum(mt::matmul(mt::ones({16, 4}), b));
  };
  const uint64_t before = mt::amp::working_copy_casts();
  for (int i = 0; i < 3; ++i) forward().backward();
  EXPECT_EQ(mt::amp::working_copy_casts() - before, 2u);  // one per parameter, not per forward
  opt.step();                                             // fused update rewrites the copies in place
  forward().backward();
  EXPECT_EQ(mt::amp::working_copy_casts() - before, 2u);
  mt::Tensor w16 = mt::amp::working_copy(w, mt::kHalf);
  EXPECT_EQ(w16.to_vector<float>(), w.to(mt::kHalf).to_vector<float>());
  {  // any other write to the master invalidates the copy
    mt::NoGradGuard g;
    w.mul_(2.0);
  }
  forward();
  EXPECT_EQ(mt::amp::working_copy_casts() - before, 3u);
  auto mem = mt::amp::memory_report({w, b});
  EXPECT_EQ(mem.master_bytes, size_t(8 * 4 + 4) * 4);
  EXPECT_EQ(mem.working_copy_bytes, size_t(8 * 4 + 4) * 2);
  EXPECT_EQ(mem.grad_bytes, size_t(8 * 4 + 4) * 4);
}

TEST(DualCopy, Bf16TrainsFp32MastersWithoutScaling) {
  mt::manual_seed(3);
  mt::Tensor w = mt::randn({4, 1}).requires_grad_();
  mt::Tensor x = mt::randn({64, 4});
  mt::Tensor target = mt::matmul(x, mt::from_vector<float>({1, -2, 3, 0.5}, {4, 1}));
  mt::optim::SGD opt({w}, {.lr = 0.05});
  mt::amp::GradScaler scaler({.enabled = false});
  double first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(mt::kBFloat16);
      mt::Tensor d = mt::matmul(x, w) - target;
      loss = mt::mean(d * d);
    }
    if (i == 0) first = loss.item<float>();
    last = loss.item<float>();
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
  }
  EXPECT_EQ(w.dtype(), mt::kFloat32);
  EXPECT_LT(last, first * 0.05);
}

namespace {
struct Twice : mt::autograd::Function<Twice> {
  static constexpr const char* name = "twice_custom";
  static mt::Tensor forward(mt::autograd::Context&, const mt::Tensor& x) { return x * 2.0; }
  static std::vector<mt::Tensor> backward(mt::autograd::Context&, const mt::Tensor& g) { return {g * 2.0}; }
};
}  // namespace

TEST(Autocast, CustomOpDeclaresItsCategory) {
  mt::amp::register_cast_policy("twice_custom", mt::amp::CastPolicy::LowerPrecision);
  mt::Tensor x = mt::ones({3}).requires_grad_();
  mt::amp::Autocast ac(mt::kHalf);
  mt::Tensor y = Twice::apply(x);
  EXPECT_EQ(y.dtype(), mt::kHalf);
  mt::sum(y).backward();
  EXPECT_EQ(x.grad().dtype(), mt::kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_NE(mt::amp::policy_table_str().find("twice_custom"), std::string::npos);
}

// --------------------------------------------------------------- linear's bias rounds once

namespace {
namespace F = mt::nn::functional;

// Spacing of `dtype` at |v| (one unit in the last place).
double ulp(double v, mt::DType dtype) {
  const int mantissa_bits = dtype == mt::kBFloat16 ? 7 : 10;
  const int min_exp = dtype == mt::kBFloat16 ? -126 : -14;
  const int e = std::max(v == 0 ? min_exp : std::ilogb(v), min_exp);
  return std::ldexp(1.0, e - mantissa_bits);
}
}  // namespace

// x = [1, 2^-k], w = [1, 1], b = -1 with 2^-k half of the dtype's spacing at 1: rounding the
// product before adding the bias gives 0 (1 + 2^-k ties to 1); PyTorch adds the bias in the
// fp32 accumulator and gets 2^-k (checked: torch 1.13 CPU autocast, bf16, gives 2^-8).
TEST(AutocastLinear, BiasJoinsTheAccumulatorBeforeRounding) {
  for (auto [dtype, k] : {std::pair{mt::kBFloat16, 8}, std::pair{mt::kHalf, 11}}) {
    mt::Tensor x = mt::from_vector(std::vector<float>{1.0f, std::ldexp(1.0f, -k)}, {1, 2});
    mt::Tensor w = mt::ones({1, 2}), b = mt::full({1}, -1.0);
    mt::amp::Autocast ac(dtype);
    mt::Tensor y = F::linear(x, w, b);
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_EQ(y.item<double>(), std::ldexp(1.0, -k)) << mt::dtype_name(dtype);
  }
}

// A random 64x128 -> 96 layer whose bias cancels most of the product: every output is within
// one unit of the fp64 sum of the (rounded) operands, plus fp32 accumulation error (16 fp32
// units of the sum of |terms|; it matters only in fp16's subnormal range). Rounding the product
// before adding the bias was off by up to hundreds of units where the bias cancels.
TEST(AutocastLinear, RandomLayerWithinOneUnitOfCorrectlyRounded) {
  mt::manual_seed(11);
  mt::Tensor x = mt::randn({64, 128}), w = mt::randn({96, 128}) * 0.1;
  mt::Tensor b = -mt::matmul(x.slice(0, 0, 1), w.t()).reshape({96});  // cancels row 0 exactly-ish
  b = b + mt::randn({96}) * 0.01;
  for (mt::DType dtype : {mt::kBFloat16, mt::kHalf}) {
    mt::Tensor y;
    {
      mt::amp::Autocast ac(dtype);
      y = F::linear(x, w, b);
    }
    ASSERT_EQ(y.dtype(), dtype);
    auto r = [&](const mt::Tensor& t) { return t.to(dtype).to(mt::kFloat64); };
    mt::Tensor want = F::linear(r(x), r(w), r(b));  // fp64 sum of the operands autocast saw
    mt::Tensor terms = F::linear(r(x).abs(), r(w).abs(), r(b).abs());
    mt::Tensor got = y.to(mt::kFloat64).contiguous(), exact = want.contiguous(), mag = terms.contiguous();
    const double* g = got.data_ptr<double>();
    const double* e = exact.data_ptr<double>();
    const double* m = mag.data_ptr<double>();
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_LE(std::abs(g[i] - e[i]), ulp(e[i], dtype) + std::ldexp(m[i], -20))
          << mt::dtype_name(dtype) << " at " << i;
  }
}

// ------------------------------------------------------------------ autocast's devices

// The documented one-liner applies to tensors on any device, so a CUDA model under
// Autocast(kHalf) runs its matmuls in fp16; naming a device restricts autocast to it.
TEST(Autocast, AppliesToEveryDeviceUnlessOneIsNamed) {
  EXPECT_FALSE(mt::amp::autocast_applies(mt::DeviceType::CPU));
  {
    mt::amp::Autocast ac(mt::kHalf);
    EXPECT_TRUE(mt::amp::autocast_applies(mt::DeviceType::CPU));
    EXPECT_TRUE(mt::amp::autocast_applies(mt::DeviceType::CUDA));
    {
      mt::amp::Autocast cpu_only(mt::kBFloat16, true, mt::DeviceType::CPU);
      EXPECT_TRUE(mt::amp::autocast_applies(mt::DeviceType::CPU));
      EXPECT_FALSE(mt::amp::autocast_applies(mt::DeviceType::CUDA));
    }
    {
      mt::amp::Autocast cuda_only(mt::kHalf, true, mt::DeviceType::CUDA);
      EXPECT_FALSE(mt::amp::autocast_applies(mt::DeviceType::CPU));
      EXPECT_EQ(mt::matmul(mt::ones({2, 2}), mt::ones({2, 2})).dtype(), mt::kFloat32);  // CPU passes through
    }
    mt::amp::Autocast keep(false);  // disabling keeps the device choice and turns it off
    EXPECT_FALSE(mt::amp::autocast_applies(mt::DeviceType::CUDA));
  }
}

// ------------------------------------------------------------ the table matches the ops

namespace {
struct TableCase {
  const char* op;
  std::function<mt::Tensor()> run;
};

// One call per op that looks itself up in the autocast table, with inputs of mixed precision.
std::vector<TableCase> table_cases() {
  mt::Tensor h = mt::rand({4, 6}).to(mt::kHalf) + 0.5, f = mt::rand({4, 6}) + 0.5;
  mt::Tensor labels = mt::randint(0, 6, {4});
  mt::Tensor img = mt::randn({2, 3, 5, 5}), k = mt::randn({4, 3, 3, 3});
  return {
      {"matmul", [=] { return mt::matmul(f, f.t()); }},
      {"linear",
       [=] {
         return F::linear(f, mt::randn({3, 6}), mt::randn({3}));
       }},
      {"conv2d", [=] { return F::conv2d(img, k); }},
      {"scaled_dot_product_attention",
       [=] {
         return mt::scaled_dot_product_attention(f.reshape({1, 4, 6}), h.reshape({1, 4, 6}), f.reshape({1, 4, 6}));
       }},
      {"exp", [=] { return mt::exp(h); }},
      {"log", [=] { return mt::log(h); }},
      {"log1p", [=] { return mt::log1p(h); }},
      {"pow_scalar", [=] { return mt::pow(h, 2.0); }},
      {"pow", [=] { return mt::pow(h, h); }},
      {"rsqrt", [=] { return mt::rsqrt(h); }},
      {"reciprocal", [=] { return mt::reciprocal(h); }},
      {"softplus", [=] { return mt::softplus(h); }},
      {"softmax", [=] { return mt::softmax(h, 1); }},
      {"log_softmax", [=] { return mt::log_softmax(h, 1); }},
      {"sum", [=] { return mt::sum(h); }},
      {"mean", [=] { return mt::mean(h); }},
      {"prod", [=] { return mt::prod(h, 1); }},
      {"var", [=] { return mt::var(h); }},
      {"std", [=] { return mt::std(h); }},
      {"logsumexp", [=] { return mt::logsumexp(h, {1}); }},
      {"layer_norm", [=] { return F::layer_norm(h, {6}); }},
      {"cross_entropy", [=] { return F::cross_entropy(h, labels); }},
      {"nll_loss", [=] { return F::nll_loss(h, labels); }},
      {"mse_loss", [=] { return F::mse_loss(h, h); }},
      {"binary_cross_entropy_with_logits", [=] { return F::binary_cross_entropy_with_logits(h, h); }},
      // cumulative ops, norm and the extra losses (tests/test_new_ops.cpp has their values)
      {"cumsum", [=] { return mt::cumsum(h, 1); }},
      {"cumprod", [=] { return mt::cumprod(h, 1); }},
      {"norm", [=] { return mt::norm(h); }},
      {"l1_loss", [=] { return F::l1_loss(h, h); }},
      {"smooth_l1_loss", [=] { return F::smooth_l1_loss(h, h); }},
      {"huber_loss", [=] { return F::huber_loss(h, h); }},
      {"binary_cross_entropy", [=] { return F::binary_cross_entropy(h * 0.5, h * 0.5); }},
      {"kl_div", [=] { return F::kl_div(h, h); }},
      {"margin_ranking_loss", [=] { return F::margin_ranking_loss(h, h, h); }},
      {"cosine_embedding_loss", [=] { return F::cosine_embedding_loss(h, h, mt::ones({4})); }},
      {"prelu", [=] { return mt::prelu(f, mt::full({6}, 0.25)); }},
      {"cat",
       [=] {
         return mt::cat({h, f});
       }},
      {"stack",
       [=] {
         return mt::stack({h, f});
       }},
      {"where", [=] { return mt::where(f > 1.0, h, f); }},
      // recurrent cells (tests/test_rnn.cpp has their values)
      {"lstm_cell",
       [=] {
         return F::lstm_cell(f, mt::zeros({4, 2}), mt::zeros({4, 2}), mt::randn({8, 6}), mt::randn({8, 2})).first;
       }},
      {"gru_cell",
       [=] {
         return F::gru_cell(f, mt::zeros({4, 2}), mt::randn({6, 6}), mt::randn({6, 2}));
       }},
      {"rnn_tanh_cell",
       [=] {
         return F::rnn_tanh_cell(f, mt::zeros({4, 2}), mt::randn({2, 6}), mt::randn({2, 2}));
       }},
      {"rnn_relu_cell",
       [=] {
         return F::rnn_relu_cell(f, mt::zeros({4, 2}), mt::randn({2, 6}), mt::randn({2, 2}));
       }},
      {"scatter_add",
       [=] {
         return mt::scatter_add(f, 1, mt::zeros({4, 6}, {.dtype = mt::kInt64}), h);
       }},
  };
}
}  // namespace

// Every table entry is looked up by the op of that name, and the op's output has the dtype its
// category promises; every op that must run in fp32 or lower precision has an entry.
TEST(Autocast, EveryTableEntryIsReachedByItsOp) {
  mt::manual_seed(5);
  std::set<std::string> exercised;
  mt::amp::Autocast ac(mt::kBFloat16);
  for (const TableCase& c : table_cases()) {
    mt::amp::PolicyLookupLog log;
    mt::Tensor y = c.run();
    EXPECT_TRUE(log.names().count(c.op)) << c.op << " never looked up its autocast policy";
    switch (mt::amp::cast_policy(c.op)) {
      case mt::amp::CastPolicy::LowerPrecision:
        EXPECT_EQ(y.dtype(), mt::kBFloat16) << c.op;
        break;
      case mt::amp::CastPolicy::Fp32:
      case mt::amp::CastPolicy::Promote:
        EXPECT_EQ(y.dtype(), mt::kFloat32) << c.op;
        break;
      case mt::amp::CastPolicy::PassThrough:
        ADD_FAILURE() << c.op << " has no table entry";
        break;
    }
    exercised.insert(c.op);
  }
  for (const auto& [op, policy] : mt::amp::builtin_cast_policy_table())
    EXPECT_TRUE(exercised.count(op)) << "table entry '" << op << "' (" << mt::amp::policy_name(policy)
                                     << ") is not exercised here: does the op exist?";
}

// Each built-in entry has its own name (a second declaration of a name would shadow the first).
TEST(Autocast, PolicyNamesAreUnique) { EXPECT_THAT(mt::amp::duplicate_policy_names(), ::testing::IsEmpty()); }

// A user override goes through the op's typed entry: the op sees it at its next call, and
// restoring the declared policy restores the op.
TEST(Autocast, RegisteredOverrideReachesTheTypedEntry) {
  mt::Tensor h = mt::randn({4, 6});
  mt::amp::Autocast ac(mt::kBFloat16);
  EXPECT_EQ(mt::exp(h).dtype(), mt::kFloat32);
  mt::amp::register_cast_policy("exp", mt::amp::CastPolicy::LowerPrecision);
  EXPECT_EQ(mt::amp::cast_policy("exp"), mt::amp::CastPolicy::LowerPrecision);
  EXPECT_EQ(mt::exp(h).dtype(), mt::kBFloat16);
  mt::amp::register_cast_policy("exp", mt::amp::CastPolicy::Fp32);
  EXPECT_EQ(mt::exp(h).dtype(), mt::kFloat32);
}
