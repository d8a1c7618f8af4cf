// The custom-op API (autograd/function.h): user-defined forward/backward in C++ with
// saved tensors and non-tensor context, checked numerically, with in-place detection,
// validation of what backward returns, and the op's own autocast category.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace mt = mantissa;
namespace ag = mt::autograd;
using testing::AllOf;
using testing::HasSubstr;

namespace {

// y = alpha * x^2: a saved input plus a non-tensor argument kept in ctx.data.
struct ScaledSquare : ag::Function<ScaledSquare> {
  static constexpr const char* name = "scaled_square";
  static inline int backward_calls = 0;
  static mt::Tensor forward(ag::Context& ctx, const mt::Tensor& x, double alpha) {
    ctx.save_for_backward({x});
    ctx.data["alpha"] = alpha;
    return x * x * alpha;
  }
  static std::vector<mt::Tensor> backward(ag::Context& ctx, const mt::Tensor& g) {
    ++backward_calls;
    mt::Tensor x = ctx.saved()[0];
    double alpha = std::any_cast<double>(ctx.data.at("alpha"));
    return {g * x * (2 * alpha)};
  }
};

// y = a * b + c (c is a plain number); reports which inputs wanted a gradient.
struct MulAdd : ag::Function<MulAdd> {
  static constexpr const char* name = "mul_add";
  static inline std::vector<bool> last_needs;
  static mt::Tensor forward(ag::Context& ctx, const mt::Tensor& a, const mt::Tensor& b, int c) {
    ctx.save_for_backward({a, b});
    return a * b + c;
  }
  static std::vector<mt::Tensor> backward(ag::Context& ctx, const mt::Tensor& g) {
    last_needs = ctx.needs_input_grad;
    auto s = ctx.saved();
    return {ctx.needs_input_grad[0] ? g * s[1] : mt::Tensor(), ctx.needs_input_grad[1] ? g * s[0] : mt::Tensor()};
  }
};

// exp, saving its own output; the backward is differentiable, so it supports double backward.
struct MyExp : ag::Function<MyExp> {
  static constexpr const char* name = "my_exp";
  static mt::Tensor forward(ag::Context& ctx, const mt::Tensor& x) {
    mt::Tensor y = mt::exp(x);
    ctx.save_for_backward({y});
    return y;
  }
  static std::vector<mt::Tensor> backward(ag::Context& ctx, const mt::Tensor& g) { return {g * ctx.saved()[0]}; }
};

// Returns its input unchanged: the output must still get its own node.
struct Identity : ag::Function<Identity> {
  static constexpr const char* name = "identity";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& x) { return x; }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g * 3.0}; }
};

// Broken backwards: the wrong number of gradients, and a gradient of the wrong shape.
// LibTorch's convention: one gradient per forward argument, undefined for the non-tensor ones.
struct PerArgumentGrads : ag::Function<PerArgumentGrads> {
  static constexpr const char* name = "per_argument_grads";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& a, double alpha, const mt::Tensor& b) {
    return a * alpha + b;
  }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g * 2.0, mt::Tensor(), g}; }
};
// The per-tensor list followed by an undefined entry (for a trailing non-tensor argument).
struct TrailingUndefined : ag::Function<TrailingUndefined> {
  static constexpr const char* name = "trailing_undefined";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& a, int) { return a * 3.0; }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g * 3.0, mt::Tensor()}; }
};
struct GradForANumber : ag::Function<GradForANumber> {
  static constexpr const char* name = "grad_for_a_number";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& a, double) { return a * 1.0; }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g, g}; }
};
struct TooFewGrads : ag::Function<TooFewGrads> {
  static constexpr const char* name = "too_few_grads";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& a, const mt::Tensor& b) { return a + b; }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g}; }
};
struct WrongShapeGrad : ag::Function<WrongShapeGrad> {
  static constexpr const char* name = "wrong_shape_grad";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& x) { return x.sum(); }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g.reshape({1}).expand({5})}; }
};

// Records the dtype its forward saw (for the autocast category test).
struct DtypeProbe : ag::Function<DtypeProbe> {
  static constexpr const char* name = "test_dtype_probe";
  static inline mt::DType seen = mt::kBool;
  static mt::Tensor forward(ag::Context&, const mt::Tensor& x) {
    seen = x.dtype();
    return x * 2.0;
  }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g * 2.0}; }
};

mt::Tensor leaf(std::vector<double> v, mt::Shape shape = {}) {
  return mt::from_vector<double>(v, shape, {.dtype = mt::kDouble, .requires_grad = true});
}

}  // namespace

TEST(CustomFunction, ForwardBackwardWithContextData) {
  mt::Tensor x = leaf({1, -2, 3});
  ScaledSquare::backward_calls = 0;
  mt::Tensor y = ScaledSquare::apply(x, 0.5);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0.5, 2, 4.5}));
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "ScaledSquareBackward");  // <Op>Backward, as every node
  y.sum().backward();
  EXPECT_EQ(ScaledSquare::backward_calls, 1);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, -2, 3}));  // 2 * 0.5 * x
  // Composes with built-in ops on both sides.
  x.set_grad({});
  (ScaledSquare::apply(mt::exp(x), 2.0) * 3.0).sum().backward();  // 6 exp(2x)
  std::vector<double> g = x.grad().to_vector<double>();
  const double xs[] = {1, -2, 3};
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(g[i], 12 * std::exp(2 * xs[i]), 1e-9 * std::exp(2 * xs[i]));
}

TEST(CustomFunction, Gradcheck) {
  mt::manual_seed(3);
  mt::Tensor x = mt::randn({2, 3}, {.dtype = mt::kDouble, .requires_grad = true});
  mt::Tensor b = mt::randn({3}, {.dtype = mt::kDouble, .requires_grad = true});
  std::string why;
  EXPECT_TRUE(
      ag::gradcheck([](const std::vector<mt::Tensor>& in) { return ScaledSquare::apply(in[0], 1.7); }, {x}, {}, &why))
      << why;
  EXPECT_TRUE(
      ag::gradcheck([](const std::vector<mt::Tensor>& in) { return MulAdd::apply(in[0], in[1], 4); }, {x, b}, {}, &why))
      << why;
  EXPECT_TRUE(ag::gradcheck([](const std::vector<mt::Tensor>& in) { return MyExp::apply(in[0]); }, {x}, {}, &why))
      << why;
  EXPECT_TRUE(ag::gradgradcheck([](const std::vector<mt::Tensor>& in) { return MyExp::apply(in[0]); }, {x}, {}, &why))
      << why;
  // A deliberately wrong backward is caught: gradcheck can fail.
  EXPECT_FALSE(ag::gradcheck([](const std::vector<mt::Tensor>& in) { return Identity::apply(in[0]); }, {x}, {}, &why));
  EXPECT_THAT(why, HasSubstr("Jacobian mismatch"));
}

TEST(CustomFunction, NeedsInputGradAndConstantInputs) {
  mt::Tensor a = leaf({1, 2});
  mt::Tensor b = mt::from_vector<double>({3, 4});
  mt::Tensor y = MulAdd::apply(a, b, 10);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{13, 18}));
  y.sum().backward();
  EXPECT_EQ(MulAdd::last_needs, (std::vector<bool>{true, false}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 4}));
  // Nothing requires grad (or grad mode is off): no node is recorded.
  EXPECT_FALSE(MulAdd::apply(b, b, 0).requires_grad());
  {
    mt::NoGradGuard g;
    mt::Tensor z = MulAdd::apply(a, b, 0);
    EXPECT_FALSE(z.requires_grad());
    EXPECT_EQ(z.grad_fn(), nullptr);
  }
}

// autograd::grad asks a node only for the gradients that lead to a requested input (a GAN's
// gradient penalty asks for the input's, not the weights'), and runs no node that leads to
// none (its hooks included), as PyTorch; backward still asks for every gradient.
TEST(CustomFunction, GradAsksOnlyForGradientsThatReachItsInputs) {
  mt::Tensor a = leaf({1, 2}), b = leaf({3, 4}), c = leaf({5, 6});
  int c_branch_hooks = 0;
  mt::Tensor cw = c * 2.0;  // a branch that reaches only c
  cw.register_hook([&](const mt::Tensor&) {
    ++c_branch_hooks;
    return mt::Tensor();
  });
  mt::Tensor y = MulAdd::apply(a, b, 0).sum() + cw.sum();
  MulAdd::last_needs.clear();
  auto g = mt::autograd::grad({y}, {a}, {}, /*retain_graph=*/true);
  EXPECT_EQ(MulAdd::last_needs, (std::vector<bool>{true, false}));
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(c_branch_hooks, 0);
  g = mt::autograd::grad({y}, {b, c}, {}, /*retain_graph=*/true);
  EXPECT_EQ(MulAdd::last_needs, (std::vector<bool>{false, true}));
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{2, 2}));
  EXPECT_EQ(c_branch_hooks, 1);
  // The nodes autograd::grad skipped kept what they saved: a full backward still runs.
  y.backward();
  EXPECT_EQ(MulAdd::last_needs, (std::vector<bool>{true, true}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(c.grad().to_vector<double>(), (std::vector<double>{2, 2}));
  EXPECT_EQ(c_branch_hooks, 2);
  // A gradient of an intermediate: nothing behind it runs.
  mt::Tensor h = MulAdd::apply(a, b, 0);
  mt::Tensor z = (h * h).sum();
  MulAdd::last_needs.clear();
  auto gh = mt::autograd::grad({z}, {h});
  EXPECT_TRUE(MulAdd::last_needs.empty());
  EXPECT_EQ(gh[0].to_vector<double>(), (std::vector<double>{6, 16}));
}

TEST(CustomFunction, SavedOutputAndDoubleBackward) {
  mt::Tensor x = leaf({0.5, -1});
  mt::Tensor y = MyExp::apply(x);
  auto g1 = ag::grad({y.sum()}, {x}, {}, false, /*create_graph=*/true);
  auto g2 = ag::grad({g1[0].sum()}, {x});
  EXPECT_NEAR(g2[0].to_vector<double>()[0], std::exp(0.5), 1e-12);
  EXPECT_NEAR(g2[0].to_vector<double>()[1], std::exp(-1.0), 1e-12);
}

TEST(CustomFunction, ReturningTheInputStillRecords) {
  mt::Tensor x = leaf({1, 2});
  mt::Tensor y = Identity::apply(x);
  EXPECT_FALSE(y.is_same(x));
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

TEST(CustomFunction, SavedInputModifiedInPlaceIsDetected) {
  mt::Tensor x = leaf({1, 2});
  mt::Tensor h = x * 1.0;  // a non-leaf, so it may be modified in place
  mt::Tensor y = ScaledSquare::apply(h, 1.0);
  h.add_(1);
  EXPECT_ERROR(y.sum().backward(), HasSubstr("modified by an in-place operation"), HasSubstr("version 0 -> 1"));

  // A leaf changed under no_grad (an optimizer step between forward and backward).
  mt::Tensor w = leaf({3});
  mt::Tensor z = ScaledSquare::apply(w, 2.0);
  {
    mt::NoGradGuard g;
    w.mul_(2);
  }
  EXPECT_ERROR(z.sum().backward(), HasSubstr("modified by an in-place operation"));

  // A saved output changed through a detached alias.
  mt::Tensor e = MyExp::apply(leaf({0}));
  e.detach().fill_(5);
  EXPECT_ERROR(e.sum().backward(), HasSubstr("modified by an in-place operation"));
}

TEST(CustomFunction, BackwardResultsAreValidated) {
  // A gradient of the broadcast shape is summed back to the input's shape.
  mt::Tensor r = leaf({1, 2, 3});
  mt::Tensor m = mt::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}, {.dtype = mt::kDouble, .requires_grad = true});
  MulAdd::apply(m, r, 0).sum().backward();  // MulAdd returns g * m, of shape [2, 3], for r
  EXPECT_EQ(r.grad().sizes(), (mt::Shape{3}));
  EXPECT_EQ(r.grad().to_vector<double>(), (std::vector<double>{5, 7, 9}));

  mt::Tensor a = leaf({1, 2}), b = leaf({3, 4});
  EXPECT_ERROR(TooFewGrads::apply(a, b).sum().backward(), HasSubstr("too_few_grads"), HasSubstr("1 gradients"),
               HasSubstr("2 tensors"));
  // One gradient per argument (undefined for numbers), or undefined trailing entries, as LibTorch allows.
  mt::Tensor p = leaf({1, 2}), q = leaf({3, 4});
  PerArgumentGrads::apply(p, 2.0, q).sum().backward();
  EXPECT_EQ(p.grad().to_vector<double>(), (std::vector<double>{2, 2}));
  EXPECT_EQ(q.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  mt::Tensor t = leaf({1, 2});
  TrailingUndefined::apply(t, 7).sum().backward();
  EXPECT_EQ(t.grad().to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_ERROR(GradForANumber::apply(leaf({1.0}), 2.0).sum().backward(), HasSubstr("grad_for_a_number"),
               HasSubstr("argument 1, which is not a Tensor"));
  EXPECT_ERROR(WrongShapeGrad::apply(a).backward(), HasSubstr("wrong_shape_grad"), HasSubstr("[5]"), HasSubstr("[2]"));
  EXPECT_FALSE(a.grad().defined());
}

TEST(CustomFunction, DeclaresItsOwnAutocastCategory) {
  mt::amp::register_cast_policy("test_dtype_probe", mt::amp::CastPolicy::Fp32);
  mt::Tensor h = mt::ones({2}, {.dtype = mt::kHalf});
  {
    mt::amp::Autocast ac(mt::kHalf);
    mt::Tensor y = DtypeProbe::apply(h);
    EXPECT_EQ(DtypeProbe::seen, mt::kFloat);
    EXPECT_EQ(y.dtype(), mt::kFloat);
  }
  mt::amp::register_cast_policy("test_dtype_probe", mt::amp::CastPolicy::LowerPrecision);
  mt::Tensor w = mt::ones({2}, {.requires_grad = true});
  {
    mt::amp::Autocast ac(mt::kBFloat16);
    mt::Tensor y = DtypeProbe::apply(w);
    EXPECT_EQ(DtypeProbe::seen, mt::kBFloat16);
    y.to(mt::kFloat).sum().backward();
  }
  // The gradient reaches the fp32 master through the cast.
  EXPECT_EQ(w.grad().dtype(), mt::kFloat);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 2}));
  // Outside autocast the op runs in its input type.
  DtypeProbe::apply(h);
  EXPECT_EQ(DtypeProbe::seen, mt::kHalf);
}

namespace {

// y = x * s with a per-feature scale s: an activation meeting a parameter, as in issue reports
// of custom ops under mixed precision. Its backward computes in whatever dtype g has.
struct FeatureScale : ag::Function<FeatureScale> {
  static constexpr const char* name = "feature_scale";
  static mt::Tensor forward(ag::Context& ctx, const mt::Tensor& x, const mt::Tensor& s) {
    ctx.save_for_backward({x, s});
    return x * s;
  }
  static std::vector<mt::Tensor> backward(ag::Context& ctx, const mt::Tensor& g) {
    auto v = ctx.saved();
    return {g * v[1], (g * v[0]).sum({0})};
  }
};

// Returns an integer gradient, which cannot be cast to a floating input.
struct IntegerGrad : ag::Function<IntegerGrad> {
  static constexpr const char* name = "integer_grad";
  static mt::Tensor forward(ag::Context&, const mt::Tensor& x) { return x * 2; }
  static std::vector<mt::Tensor> backward(ag::Context&, const mt::Tensor& g) { return {g.to(mt::kInt64)}; }
};

// |a - b| <= atol + rtol |b| everywhere (both converted to float64).
bool allclose(const mt::Tensor& a, const mt::Tensor& b, double rtol, double atol) {
  mt::Tensor a64 = a.detach().to(mt::kFloat64), b64 = b.detach().to(mt::kFloat64);
  mt::Tensor excess = (a64 - b64).abs() - (b64.abs() * rtol + atol);
  return excess.max().item<double>() <= 0;
}

// The reference: the same network in float32 without autocast, with the low-precision
// activation emulated by rounding it (so both see the same input values).
void expect_grads_match_fp32(mt::nn::Linear& lin, const mt::Tensor& s, const mt::Tensor& x, mt::DType low) {
  mt::Tensor w_ref = lin.weight.detach().to(low).to(mt::kFloat32).requires_grad_(true);
  mt::Tensor b_ref = lin.bias.detach().to(low).to(mt::kFloat32).requires_grad_(true);
  mt::Tensor s_ref = s.detach().requires_grad_(true);
  mt::Tensor h = mt::nn::functional::linear(x.to(low).to(mt::kFloat32), w_ref, b_ref).to(low).to(mt::kFloat32);
  (h * s_ref).sum().backward();
  EXPECT_EQ(lin.weight.grad().dtype(), mt::kFloat32);
  EXPECT_EQ(s.grad().dtype(), mt::kFloat32);
  EXPECT_TRUE(allclose(s.grad(), s_ref.grad(), 1e-2, 1e-2));
  EXPECT_TRUE(allclose(lin.weight.grad(), w_ref.grad(), 2e-2, 2e-2));
  EXPECT_TRUE(allclose(lin.bias.grad(), b_ref.grad(), 2e-2, 2e-2));
}

}  // namespace

// A custom op fed a bf16 activation (autocast's linear) and an fp32 parameter: backward hands
// each input a gradient of its own dtype, so Linear's backward gets bf16 and s gets fp32.
TEST(CustomFunction, GradientsTakeEachInputsDtypeUnderAutocast) {
  mt::manual_seed(3);
  mt::nn::Linear lin(8, 8);
  mt::Tensor s = mt::full({8}, 1.5, {.requires_grad = true});
  mt::Tensor x = mt::randn({4, 8});
  mt::Tensor y;
  {
    mt::amp::Autocast ac(mt::kBFloat16);
    y = FeatureScale::apply(lin(x), s);
  }
  EXPECT_EQ(y.dtype(), mt::kFloat32);  // bf16 * fp32 promotes
  y.sum().backward();
  expect_grads_match_fp32(lin, s, x, mt::kBFloat16);
}

// The same crossing without autocast: a module converted to bf16 feeding the op.
TEST(CustomFunction, GradientsTakeEachInputsDtypeFromBf16Module) {
  mt::manual_seed(4);
  mt::nn::Linear lin(8, 8);
  lin.to(mt::kBFloat16);
  mt::Tensor s = mt::full({8}, 0.5, {.requires_grad = true});
  mt::Tensor x = mt::randn({4, 8}).to(mt::kBFloat16);
  FeatureScale::apply(lin(x), s).sum().backward();
  EXPECT_EQ(lin.weight.grad().dtype(), mt::kBFloat16);
  EXPECT_EQ(s.grad().dtype(), mt::kFloat32);
  // d/ds sum(h * s) = column sums of h.
  mt::Tensor h = lin(x).detach().to(mt::kFloat32);
  EXPECT_TRUE(allclose(s.grad(), h.sum({0}), 1e-2, 1e-2));
}

TEST(CustomFunction, NonFloatingGradientNamesTheOp) {
  mt::Tensor x = mt::randn({3}, {.requires_grad = true});
  mt::Tensor y = IntegerGrad::apply(x).sum();
  EXPECT_ERROR(y.backward(), HasSubstr("integer_grad"), HasSubstr("int64"), HasSubstr("float32"));
}
