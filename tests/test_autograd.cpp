// Autograd engine behaviour: accumulation, graph retention and release, seeds,
// version checks, grad mode, hooks, retain_grad, higher-order gradients,
// autograd::grad, in-place rebasing, shared inputs and deep graphs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <thread>
#include <vector>

#include "test_util.h"

namespace mt = mantissa;
using testing::AllOf;
using testing::HasSubstr;

namespace {
std::vector<double> vals(const mt::Tensor& t) { return t.to_vector<double>(); }
mt::Tensor leaf(std::vector<double> v) {
  return mt::from_vector<double>(v, {}, {.dtype = mt::kDouble, .requires_grad = true});
}
}  // namespace

TEST(Autograd, GradAccumulatesOverBackwardCalls) {
  mt::Tensor w = leaf({1, 2, 3});
  (w * 2.0).sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{2, 2, 2}));
  (w * w).sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{4, 6, 8}));
  // Zeroing the grad starts over.
  w.grad().zero_();
  (w * 3.0).sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{3, 3, 3}));
  w.set_grad({});
  (w * 5.0).sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{5, 5, 5}));
}

TEST(Autograd, GradIsNotAliasedWithTheSeed) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor seed = mt::ones({2}, {.dtype = mt::kDouble});
  (w + 0.0).backward(seed);
  w.grad().mul_(10);
  EXPECT_EQ(vals(seed), (std::vector<double>{1, 1}));
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor y = (w * w).sum();
  y.backward({}, /*retain_graph=*/true);
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{2, 4}));
  y.backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{4, 8}));
  // The graph is now freed.
  EXPECT_ERROR(y.backward(), HasSubstr("second time"), HasSubstr("retain_graph"));
}

TEST(Autograd, SecondBackwardWithoutRetainGraphThrows) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor h = mt::exp(w);
  mt::Tensor y = (h * w).sum();
  y.backward();
  EXPECT_ERROR(y.backward(), HasSubstr("second time"));
  // The part of the graph that is shared with a new graph is freed too.
  EXPECT_ERROR(h.sum().backward(), HasSubstr("second time"));
}

TEST(Autograd, NonScalarNeedsASeed) {
  mt::Tensor w = leaf({1, 2, 3});
  mt::Tensor y = w * mt::from_vector<double>({1, 2, 3});
  EXPECT_ERROR(y.backward(), HasSubstr("scalar"), HasSubstr("[3]"));
  y.backward(mt::from_vector<double>({1, 10, 100}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{1, 20, 300}));
  // A one-element non-0-dim output is seeded implicitly.
  mt::Tensor v = leaf({4});
  (v * v).backward();
  EXPECT_EQ(vals(v.grad()), (std::vector<double>{8}));
}

TEST(Autograd, SeedIsConvertedAndScales) {
  mt::Tensor w = leaf({1, 2});
  (w * w).sum().backward(mt::scalar_tensor(3.0, {.dtype = mt::kDouble}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{6, 12}));
}

TEST(Autograd, SavedTensorModifiedInPlaceIsDetected) {
  // A non-leaf saved by mul, then modified in place.
  mt::Tensor x = leaf({1, 2});
  mt::Tensor a = x + 0.0;
  mt::Tensor b = a * a;
  a.mul_(2);
  EXPECT_ERROR(b.sum().backward(), HasSubstr("modified by an in-place operation"), HasSubstr("version 0 -> 1"),
               HasSubstr("[2]"));

  // A constant saved for the gradient of the other operand.
  mt::Tensor c = mt::ones({2}, {.dtype = mt::kDouble});
  mt::Tensor y = x * c;
  c.add_(1);
  EXPECT_ERROR(y.sum().backward(), HasSubstr("modified by an in-place operation"));

  // A leaf modified under no_grad after being saved.
  mt::Tensor w = leaf({3});
  mt::Tensor z = w * w;
  {
    mt::NoGradGuard g;
    w.mul_(2);
  }
  EXPECT_ERROR(z.sum().backward(), HasSubstr("version"));

  // A saved output (exp saves its result) modified through a detached alias.
  mt::Tensor e = mt::exp(x);
  e.detach().zero_();
  EXPECT_ERROR(e.sum().backward(), HasSubstr("modified by an in-place operation"));
}

TEST(Autograd, UnsavedTensorMayBeModifiedInPlace) {
  // add saves nothing, so changing its inputs afterwards is fine.
  mt::Tensor x = leaf({1, 2});
  mt::Tensor c = mt::ones({2}, {.dtype = mt::kDouble});
  mt::Tensor y = x + c;
  c.add_(1);
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 1}));
}

TEST(Autograd, DivOutputMayBeModifiedInPlace) {
  // div saves a and b, not its output (as PyTorch): the output may be changed in place before
  // backward (a saved output would share its storage and refuse the in-place op).
  for (bool modify : {false, true}) {
    mt::Tensor a = leaf({3, -2}), b = leaf({4, 0.5});
    mt::Tensor y = a / b;
    mt::Tensor z = modify ? y.mul_(5) : y * 5;
    z.sum().backward();
    EXPECT_EQ(vals(a.grad()), (std::vector<double>{5 / 4.0, 5 / 0.5})) << "modified: " << modify;
    EXPECT_EQ(vals(b.grad()), (std::vector<double>{-5 * 3 / 16.0, -5 * -2 / 0.25})) << "modified: " << modify;
  }
}

TEST(Autograd, InPlaceOnLeafRequiringGradThrows) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor ones = mt::ones({2}, {.dtype = mt::kDouble});
  EXPECT_ERROR(w.add_(1), HasSubstr("add_"), HasSubstr("leaf"));
  EXPECT_ERROR(w.mul_(ones), HasSubstr("mul_"), HasSubstr("leaf"));
  EXPECT_ERROR(w.div_(2), HasSubstr("div_"), HasSubstr("leaf"));
  EXPECT_ERROR(w.clamp_(0, 1), HasSubstr("clamp_"), HasSubstr("leaf"));
  EXPECT_ERROR(w.masked_fill_(mt::from_vector<bool>({true, false}), 0), HasSubstr("leaf"));
  EXPECT_ERROR(w.fill_(0), HasSubstr("fill_"), HasSubstr("leaf"));
  EXPECT_ERROR(w.zero_(), HasSubstr("leaf"));
  EXPECT_ERROR(w.copy_(ones), HasSubstr("copy_"), HasSubstr("leaf"));
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2}));
  EXPECT_EQ(w.version(), 0u);
  // Allowed without grad mode (an optimizer step), and the version moves.
  {
    mt::NoGradGuard g;
    w.add_(1);
    w.copy_(w * 2);
  }
  EXPECT_EQ(vals(w), (std::vector<double>{4, 6}));
  EXPECT_EQ(w.version(), 2u);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
}

TEST(Autograd, GradModeGuardsNest) {
  EXPECT_TRUE(mt::GradMode::is_enabled());
  mt::Tensor w = leaf({1});
  {
    mt::NoGradGuard a;
    EXPECT_FALSE(mt::GradMode::is_enabled());
    EXPECT_FALSE((w * 2.0).requires_grad());
    {
      mt::EnableGradGuard b;
      EXPECT_TRUE(mt::GradMode::is_enabled());
      EXPECT_TRUE((w * 2.0).requires_grad());
      {
        mt::NoGradGuard c;
        EXPECT_FALSE(mt::GradMode::is_enabled());
      }
      EXPECT_TRUE(mt::GradMode::is_enabled());
    }
    EXPECT_FALSE(mt::GradMode::is_enabled());
    {
      mt::NoGradGuard d;  // nested no_grad restores "off", not "on"
    }
    EXPECT_FALSE(mt::GradMode::is_enabled());
  }
  EXPECT_TRUE(mt::GradMode::is_enabled());
}

TEST(Autograd, GradModeIsThreadLocal) {
  mt::Tensor w = leaf({1, 2});
  {
    mt::NoGradGuard g;
    bool seen = false, recorded = false;
    std::vector<double> grad;
    std::thread t([&] {
      seen = mt::GradMode::is_enabled();
      mt::Tensor v = leaf({1, 2});
      mt::Tensor y = (v * 3.0).sum();
      recorded = y.requires_grad();
      y.backward();
      grad = vals(v.grad());
    });
    t.join();
    EXPECT_TRUE(seen);
    EXPECT_TRUE(recorded);
    EXPECT_EQ(grad, (std::vector<double>{3, 3}));
    EXPECT_FALSE(mt::GradMode::is_enabled());
  }
  // A thread that turns grad off leaves this thread alone.
  std::thread t([] { mt::GradMode::set_enabled(false); });
  t.join();
  EXPECT_TRUE(mt::GradMode::is_enabled());
  EXPECT_TRUE((w * 2.0).requires_grad());
}

TEST(Autograd, RequiresGradPropagation) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor c = mt::from_vector<double>({3, 4});
  EXPECT_TRUE(w.is_leaf());
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(c.is_leaf());
  mt::Tensor y = w * c;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(w.grad_fn(), nullptr);
  EXPECT_FALSE((c * c).requires_grad());
  EXPECT_EQ((c * c).grad_fn(), nullptr);
  EXPECT_TRUE(mt::cat({c, w}).requires_grad());
  EXPECT_TRUE(w.select(0, 1).requires_grad());
  EXPECT_TRUE(w.to(mt::kFloat).requires_grad());
  // Integer and boolean results carry no gradient.
  EXPECT_FALSE((w > 1.0).requires_grad());
  EXPECT_FALSE(mt::argmax(w, 0).requires_grad());
  EXPECT_FALSE(w.to(mt::kInt64).requires_grad());
  // Turning requires_grad on for a leaf makes later ops record.
  c.requires_grad_();
  EXPECT_TRUE((c * 2.0).requires_grad());
  c.requires_grad_(false);
  EXPECT_FALSE((c * 2.0).requires_grad());
}

TEST(Autograd, DetachStopsGradient) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor h = w * w;
  mt::Tensor d = h.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  (d * w).sum().backward();  // d is a constant [1, 4]
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{1, 4}));
}

TEST(Autograd, HooksOnLeafAndNonLeaf) {
  mt::Tensor w = leaf({1, 2});
  w.register_hook([](const mt::Tensor& g) { return g * 2.0; });
  (w * 3.0).sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{6, 6}));

  mt::Tensor x = leaf({1, 2});
  mt::Tensor h = x * 2.0;
  std::vector<double> seen;
  h.register_hook([&](const mt::Tensor& g) {
    seen = vals(g);
    return mt::Tensor();  // observe only
  });
  h.register_hook([](const mt::Tensor& g) { return g * 10.0; });
  (h * mt::from_vector<double>({1, 3})).sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{1, 3}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{20, 60}));
  EXPECT_FALSE(h.grad().defined());  // hooks do not retain the grad
}

TEST(Autograd, HooksRunOncePerBackwardWithSummedGradient) {
  mt::Tensor x = leaf({1});
  mt::Tensor h = x * 1.0;
  int calls = 0;
  std::vector<double> seen;
  h.register_hook([&](const mt::Tensor& g) {
    ++calls;
    seen = vals(g);
    return mt::Tensor();
  });
  (h * 2.0 + h * 3.0).sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{5}));
}

TEST(Autograd, RetainGradOnNonLeaf) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor h = w * 2.0;
  mt::Tensor k = h * 3.0;  // not retained
  h.retain_grad();
  mt::Tensor y = (k * h).sum();  // 3 h^2
  y.backward({}, true);
  EXPECT_EQ(vals(h.grad()), (std::vector<double>{12, 24}));  // 6 h
  EXPECT_FALSE(k.grad().defined());
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{24, 48}));
  // Like a leaf's grad, a retained grad accumulates over backward calls.
  y.backward();
  EXPECT_EQ(vals(h.grad()), (std::vector<double>{24, 48}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{48, 96}));
  EXPECT_FALSE(h.grad().requires_grad());
}

TEST(Autograd, RetainGradOnTheRootAndViaGrad) {
  mt::Tensor w = leaf({1, 2});
  mt::Tensor y = w * 2.0;
  y.retain_grad();
  mt::Tensor seed = mt::from_vector<double>({1, 5});
  y.backward(seed);
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{1, 5}));
  seed.fill_(0);  // the retained grad is not the user's seed
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{1, 5}));
}

TEST(Autograd, DoubleBackwardOfCube) {
  mt::Tensor x = leaf({1, 2, -3});
  mt::Tensor y = (x * x * x).sum();
  auto g = mt::autograd::grad({y}, {x}, {}, false, /*create_graph=*/true);
  EXPECT_EQ(vals(g[0]), (std::vector<double>{3, 12, 27}));
  EXPECT_TRUE(g[0].requires_grad());
  auto gg = mt::autograd::grad({g[0].sum()}, {x});
  EXPECT_EQ(vals(gg[0]), (std::vector<double>{6, 12, -18}));  // d2/dx2 x^3 = 6x

  // The same through pow and Tensor::backward(create_graph).
  mt::Tensor z = leaf({0.5, 2});
  mt::pow(z, 3).sum().backward({}, false, /*create_graph=*/true);
  mt::Tensor gz = z.grad();
  EXPECT_TRUE(gz.requires_grad());
  EXPECT_EQ(vals(gz), (std::vector<double>{0.75, 12}));
  z.set_grad({});
  gz.sum().backward();
  EXPECT_EQ(vals(z.grad()), (std::vector<double>{3, 12}));

  // Third order through exp: every derivative is exp(x).
  mt::Tensor e = leaf({0.3});
  mt::Tensor d1 = mt::autograd::grad({mt::exp(e).sum()}, {e}, {}, false, true)[0];
  mt::Tensor d2 = mt::autograd::grad({d1.sum()}, {e}, {}, false, true)[0];
  mt::Tensor d3 = mt::autograd::grad({d2.sum()}, {e})[0];
  EXPECT_NEAR(d3.item<double>(), std::exp(0.3), 1e-12);
}

TEST(Autograd, GradFunctionWithAllowUnused) {
  mt::Tensor x = leaf({1, 2});
  mt::Tensor unused = leaf({5});
  mt::Tensor y = (x * x).sum();
  auto g = mt::autograd::grad({y}, {x, unused}, {}, /*retain_graph=*/true, false, /*allow_unused=*/true);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(vals(g[0]), (std::vector<double>{2, 4}));
  EXPECT_FALSE(g[1].defined());
  EXPECT_ERROR(mt::autograd::grad({y}, {x, unused}, {}, true), HasSubstr("allow_unused"), HasSubstr("input 1"));
  // autograd::grad does not touch .grad.
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(unused.grad().defined());
  // Gradients w.r.t. an intermediate tensor.
  mt::Tensor h = x * 3.0;
  mt::Tensor out = (h * h).sum();
  auto gh = mt::autograd::grad({out}, {h, x});
  EXPECT_EQ(vals(gh[0]), (std::vector<double>{6, 12}));
  EXPECT_EQ(vals(gh[1]), (std::vector<double>{18, 36}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, InPlaceRebase) {
  mt::Tensor x = leaf({1, 2});
  mt::Tensor y = x * 2.0;
  y.add_(1);
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(vals(y), (std::vector<double>{3, 5}));
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 2}));

  // Multiplicative in-place ops keep the chain rule.
  mt::Tensor a = leaf({1, 2});
  mt::Tensor b = a * 2.0;
  b.mul_(3);
  b.div_(mt::from_vector<double>({2, 4}));
  b.sub_(1);
  EXPECT_EQ(vals(b), (std::vector<double>{2, 2}));
  b.sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{3, 1.5}));

  // An in-place op with an operand that requires grad.
  mt::Tensor p = leaf({1, 2});
  mt::Tensor q = leaf({3, 4});
  mt::Tensor r = p * 1.0;
  r.mul_(q);
  r.sum().backward();
  EXPECT_EQ(vals(p.grad()), (std::vector<double>{3, 4}));
  EXPECT_EQ(vals(q.grad()), (std::vector<double>{1, 2}));

  // clamp_ saves its input: the in-place write must not invalidate it.
  mt::Tensor c = leaf({-1, 1, 2});
  mt::Tensor d = c * 2.0;
  d.clamp_(0, 3);
  EXPECT_EQ(vals(d), (std::vector<double>{0, 2, 3}));
  d.sum().backward();
  EXPECT_EQ(vals(c.grad()), (std::vector<double>{0, 2, 0}));

  // Copying a constant over a non-leaf cuts it off from its history.
  mt::Tensor s = leaf({1, 2});
  mt::Tensor t = s * 2.0;
  t.copy_(mt::from_vector<double>({7, 7}));
  (t * s).sum().backward();
  EXPECT_EQ(vals(s.grad()), (std::vector<double>{7, 7}));
}

TEST(Autograd, DiamondSumsGradients) {
  mt::Tensor x = leaf({1, 2});
  mt::Tensor a = x * 2.0, b = x * 3.0;
  (a * b).sum().backward();  // 6 x^2
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{12, 24}));

  mt::Tensor z = leaf({3});
  (z * z + z).sum().backward();
  EXPECT_EQ(vals(z.grad()), (std::vector<double>{7}));

  // A deeper diamond whose branches have different lengths.
  mt::Tensor v = leaf({2});
  mt::Tensor l = mt::exp(v * 0.0) * v;  // v
  mt::Tensor r = v;
  for (int i = 0; i < 5; ++i) r = r * 1.0;
  (l * r).sum().backward();  // v^2
  EXPECT_EQ(vals(v.grad()), (std::vector<double>{4}));
}

TEST(Autograd, BroadcastGradientsReduceToInputShape) {
  mt::Tensor a = leaf({1, 2, 3});  // [3]
  mt::Tensor b = mt::from_vector<double>({1, 2}, {2, 1}, {.dtype = mt::kDouble, .requires_grad = true});
  (a * b).sum().backward();
  EXPECT_EQ(a.grad().sizes(), (mt::Shape{3}));
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(b.grad().sizes(), (mt::Shape{2, 1}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{6, 6}));
}

TEST(Autograd, MixedDtypeGradientsHaveTheLeafDtype) {
  mt::Tensor w = mt::ones({2}, {.requires_grad = true});  // float32
  mt::Tensor d = mt::from_vector<double>({1.5, 2.5});
  mt::Tensor y = (w * d).sum();  // float64 result
  EXPECT_EQ(y.dtype(), mt::kDouble);
  y.backward();
  EXPECT_EQ(w.grad().dtype(), mt::kFloat);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
  mt::Tensor h = mt::ones({2}, {.requires_grad = true});
  (h.to(mt::kHalf) * 3.0).sum().backward();
  EXPECT_EQ(h.grad().dtype(), mt::kFloat);
  EXPECT_EQ(h.grad().to_vector<float>(), (std::vector<float>{3, 3}));
}

// [B..., M, K] @ [K, N] runs as one GEMM of [B M, K] @ [K, N] (as torch): the matrix's bf16
// gradient is one fp32-accumulated product over all B M rows, rounded once, within one bf16
// step of float64 (run batched, it was B products each rounded to bf16 and then summed: here
// 23 steps away at worst); values and input gradients as the float64 product.
TEST(Autograd, MatmulOfABatchAgainstAMatrixRoundsTheMatrixGradientOnce) {
  mt::manual_seed(17);
  const mt::Tensor a64 = mt::randn({4, 3, 50, 16}, {.dtype = mt::kFloat64}).to(mt::kBFloat16).to(mt::kFloat64);
  const mt::Tensor w64 = mt::randn({16, 8}, {.dtype = mt::kFloat64}).to(mt::kBFloat16).to(mt::kFloat64);
  const mt::Tensor g64 = mt::randn({4, 3, 50, 8}, {.dtype = mt::kFloat64}).to(mt::kBFloat16).to(mt::kFloat64);
  mt::Tensor a = a64.to(mt::kBFloat16).requires_grad_(true), w = w64.to(mt::kBFloat16).requires_grad_(true);
  mt::Tensor y = mt::matmul(a, w);
  ASSERT_EQ(y.sizes(), (mt::Shape{4, 3, 50, 8}));
  y.backward(g64.to(mt::kBFloat16));
  const mt::Tensor y_ref = mt::matmul(a64.reshape({600, 16}), w64).reshape({4, 3, 50, 8});
  const mt::Tensor gw_ref = mt::matmul(a64.reshape({600, 16}).t(), g64.reshape({600, 8}));
  const mt::Tensor ga_ref = mt::matmul(g64, w64.t());
  auto steps = [](const mt::Tensor& got, const mt::Tensor& want) {
    const std::vector<float> g = got.to(mt::kFloat32).to_vector<float>();
    const std::vector<float> r = want.to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
    int64_t worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, mt::test::bf16_steps(g[i], r[i]));
    return worst;
  };
  EXPECT_LE(steps(y, y_ref), 1);
  EXPECT_LE(steps(w.grad(), gw_ref), 1);
  EXPECT_LE(steps(a.grad(), ga_ref), 1);
}

TEST(Autograd, LongChainDoesNotOverflowTheStack) {
  constexpr int kDepth = 10000;
  mt::Tensor x = leaf({1});
  mt::Tensor h = x;
  for (int i = 0; i < kDepth; ++i) h = h * 1.0001;
  h.sum().backward();
  EXPECT_NEAR(x.grad().item<double>(), std::pow(1.0001, kDepth), 1e-9);
}

// Freeing a graph must not recurse once per node either: 200k nodes (tanh, whose saved
// tensors also hold the graph, then mul) dropped unused, and a smaller one after backward.
TEST(Autograd, DeepGraphIsFreedWithoutRecursion) {
  mt::Tensor x = leaf({0.5});
  {
    mt::Tensor k = x;
    for (int i = 0; i < 100000; ++i) k = mt::tanh(k) * 1.0;
    EXPECT_GT(k.item<double>(), 0.0);
  }
  mt::Tensor k = x;
  for (int i = 0; i < 20000; ++i) k = mt::tanh(k) * 1.0;
  auto g = mt::autograd::grad({k.sum()}, {x});
  EXPECT_GT(g[0].item<double>(), 0.0);
  EXPECT_LT(g[0].item<double>(), 1.0);
}

// A first gradient that nothing else holds becomes the leaf's .grad without a copy; one that
// is shared (the same gradient to two leaves, a seed the caller keeps, a view of a larger
// gradient) is copied, so that editing one .grad never changes another tensor.
TEST(Autograd, FirstGradientIsTakenOnlyWhenUnshared) {
  mt::Tensor x = mt::randn({4, 5}).requires_grad_();
  const void* seen = nullptr;
  x.register_hook([&](const mt::Tensor& g) {
    seen = g.raw_data();
    return mt::Tensor();
  });
  (x * 3.0).sum().backward();  // mul's backward makes a fresh dense gradient
  EXPECT_EQ(x.grad().raw_data(), seen);
  EXPECT_EQ(vals(x.grad()), std::vector<double>(20, 3.0));

  mt::Tensor a = mt::randn({3}).requires_grad_(), b = mt::randn({3}).requires_grad_();
  mt::Tensor seed = mt::from_vector<float>({1.0f, 2.0f, 3.0f});
  (a + b).backward(seed);  // add passes one gradient to both leaves: the seed itself
  EXPECT_NE(a.grad().raw_data(), b.grad().raw_data());
  EXPECT_NE(a.grad().raw_data(), seed.raw_data());
  EXPECT_NE(b.grad().raw_data(), seed.raw_data());
  a.grad().mul_(10.0);
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_EQ(vals(seed), (std::vector<double>{1.0, 2.0, 3.0}));

  // cat's backward hands each leaf a narrow view of one gradient: each gets its own copy.
  mt::Tensor c = mt::randn({2, 3}).requires_grad_(), d = mt::randn({2, 3}).requires_grad_();
  (mt::cat({c, d}, 0) * 2.0).sum().backward();
  EXPECT_EQ(c.grad().nbytes(), size_t(6 * 4));
  EXPECT_EQ(vals(c.grad()), std::vector<double>(6, 2.0));
  EXPECT_EQ(vals(d.grad()), std::vector<double>(6, 2.0));

  // A taken gradient accumulates in place on the next backward, as a copied one.
  (x * 2.0).sum().backward();
  EXPECT_EQ(vals(x.grad()), std::vector<double>(20, 5.0));
}
