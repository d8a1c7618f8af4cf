// Ops at the edges, against PyTorch 1.13: one regression case per defect of issue 26
// (0-dim and empty tensors, integer dtypes, special values, zero gradients). Expected values
// are inline literals, each under the torch expression that produced it, or come from
// tests/fixtures/reference_edges.json (tools/gen_reference_edges.py).
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "autograd/gradcheck.h"
#include "test_util.h"

namespace mt = mantissa;
namespace F = mantissa::nn::functional;
using mt::Tensor;
using testing::HasSubstr;

namespace {

Tensor f64(std::vector<double> v, mt::Shape shape = {}) {
  if (shape.empty()) shape = {int64_t(v.size())};
  return mt::from_vector(v, shape, {.dtype = mt::kFloat64});
}
Tensor leaf(std::vector<double> v, mt::Shape shape = {}) {
  return f64(std::move(v), std::move(shape)).requires_grad_();
}
Tensor i64(std::vector<int64_t> v) { return mt::from_vector(v, {int64_t(v.size())}, {.dtype = mt::kInt64}); }

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// Equal element by element, NaN equal to NaN, the sign of zero and infinities compared.
void expect_values(const Tensor& got, const std::vector<double>& want, const std::string& what, double tol = 0) {
  ASSERT_TRUE(got.defined()) << what;
  const std::vector<double> g = vals(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " [" << i << "]: " << g[i] << ", PyTorch nan";
    } else if (std::isinf(want[i]) || tol == 0) {
      EXPECT_EQ(g[i], want[i]) << what << " [" << i << "]";
      EXPECT_EQ(std::signbit(g[i]), std::signbit(want[i])) << what << " [" << i << "]: sign";
    } else {
      EXPECT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- crashes and wrong values

// 1. Reductions with a dim over a 0-dim tensor (used to segfault in move_dims_last).
TEST(OpEdges, ZeroDimReductionsWithDim) {
  Tensor x = mt::scalar_tensor(1.5);
  for (bool keepdim : {false, true}) {
    // torch.argmax(torch.tensor(1.5), 0) -> tensor(0), also with keepdim=True
    Tensor a = mt::argmax(x, 0, keepdim), b = mt::argmin(x, -1, keepdim);
    EXPECT_EQ(a.dim(), 0);
    EXPECT_EQ(b.dim(), 0);
    EXPECT_EQ(a.dtype(), mt::kInt64);
    EXPECT_EQ(a.item<int64_t>(), 0);
    EXPECT_EQ(b.item<int64_t>(), 0);
    // torch.max(torch.tensor(1.5), 0) -> (tensor(1.5), tensor(0))
    for (auto r : {mt::max(x, 0, keepdim), mt::min(x, 0, keepdim)}) {
      EXPECT_EQ(r.values.dim(), 0);
      EXPECT_EQ(r.indices.dim(), 0);
      EXPECT_EQ(r.values.item<float>(), 1.5f);
      EXPECT_EQ(r.indices.item<int64_t>(), 0);
    }
    // torch.prod(torch.tensor(1.5), 0) -> tensor(1.5)
    Tensor p = mt::prod(x, 0, keepdim);
    EXPECT_EQ(p.dim(), 0);
    EXPECT_EQ(p.item<float>(), 1.5f);
  }
  // Gradients: torch.max(x, 0).values.backward() on x = tensor(1.5) gives 1; prod likewise.
  Tensor xm = mt::scalar_tensor(1.5, {.dtype = mt::kFloat64}).requires_grad_();
  mt::max(xm, 0).values.backward();
  expect_values(xm.grad(), {1.0}, "max 0-dim grad");
  Tensor xp = mt::scalar_tensor(2.0, {.dtype = mt::kFloat64}).requires_grad_();
  (mt::prod(xp, 0) * 3.0).backward();
  expect_values(xp.grad(), {3.0}, "prod 0-dim grad");
}

// 1b. Views and indexing of a 0-dim tensor: size(0), chunk, split, narrow, select, slice and
// unbind raise as PyTorch's (they read past the empty shape); gather and scatter_add treat it as
// one element along dim 0, as torch.gather(torch.tensor(3.), 0, torch.tensor(0)) -> tensor(3.).
TEST(OpEdges, ZeroDimViewsAndIndexing) {
  Tensor x = mt::scalar_tensor(3.0, {.dtype = mt::kFloat64}).requires_grad_();
  EXPECT_ERROR(x.size(0), HasSubstr("size"), HasSubstr("no dimensions"));
  EXPECT_ERROR(x.stride(-1), HasSubstr("stride"), HasSubstr("no dimensions"));
  EXPECT_ERROR(mt::chunk(x, 2, 0), HasSubstr("chunk"), HasSubstr("1-dimensional"));
  EXPECT_ERROR(mt::split(x, 1, 0), HasSubstr("split"), HasSubstr("1-dimensional"));
  EXPECT_ERROR(x.narrow(0, 0, 1), HasSubstr("narrow"), HasSubstr("0-dim"));
  EXPECT_ERROR(x.select(0, 0), HasSubstr("select"), HasSubstr("0-dim"));
  EXPECT_ERROR(x.slice(0, 0, 1), HasSubstr("slice"), HasSubstr("0-dim"));
  EXPECT_ERROR(x.unbind(0), HasSubstr("unbind"), HasSubstr("no dimensions"));
  Tensor zero = mt::zeros({}, {.dtype = mt::kInt64});
  Tensor g = mt::gather(x, 0, zero);  // tensor(3.)
  EXPECT_EQ(g.dim(), 0);
  expect_values(g, {3.0}, "gather 0-dim");
  Tensor g2 = mt::gather(x, -1, mt::zeros({2}, {.dtype = mt::kInt64}));  // tensor([3., 3.])
  EXPECT_EQ(g2.sizes(), (mt::Shape{2}));
  (g * 2.0 + g2.sum()).backward();
  expect_values(x.grad(), {4.0}, "gather 0-dim grad");
  EXPECT_ERROR(mt::gather(x, 0, mt::ones({}, {.dtype = mt::kInt64})), HasSubstr("gather"));
  // torch.scatter_add(torch.tensor(3.), 0, torch.tensor(0), torch.tensor(2.)) -> tensor(5.)
  Tensor s = mt::scatter_add(x.detach(), 0, zero, mt::scalar_tensor(2.0, {.dtype = mt::kFloat64}));
  EXPECT_EQ(s.dim(), 0);
  expect_values(s, {5.0}, "scatter_add 0-dim");
}

// 2. clamp of an integer tensor with one bound.
TEST(OpEdges, IntegerClampWithOneBound) {
  // torch.clamp(torch.tensor([-3, 0, 5]), -1, None) -> [-1, 0, 5]
  EXPECT_EQ(mt::clamp(i64({-3, 0, 5}), -1, std::nullopt).to_vector<int64_t>(), (std::vector<int64_t>{-1, 0, 5}));
  // torch.clamp(torch.tensor([-3, 0, 5]), None, 1) -> [-3, 0, 1]
  EXPECT_EQ(mt::clamp(i64({-3, 0, 5}), std::nullopt, 1).to_vector<int64_t>(), (std::vector<int64_t>{-3, 0, 1}));
  Tensor u = mt::from_vector(std::vector<int64_t>{0, 7, 255}, {3}, {.dtype = mt::kUInt8});
  EXPECT_EQ(mt::clamp(u, 3, std::nullopt).to_vector<int64_t>(), (std::vector<int64_t>{3, 7, 255}));
}

// 3. Subtraction does not wrap a uint8 operand before promotion.
TEST(OpEdges, Uint8SubtractionPromotesFirst) {
  Tensor u = mt::from_vector(std::vector<int64_t>{5}, {1}, {.dtype = mt::kUInt8});
  // torch.tensor([1]) - torch.tensor([5], dtype=torch.uint8) -> tensor([-4])
  Tensor d = i64({1}) - u;
  EXPECT_EQ(d.dtype(), mt::kInt64);
  EXPECT_EQ(d.to_vector<int64_t>(), std::vector<int64_t>{-4});
  // 2.5 - torch.tensor([5], dtype=torch.uint8) -> tensor([-2.5000])
  Tensor f = 2.5 - u;
  EXPECT_EQ(f.dtype(), mt::kFloat32);
  EXPECT_EQ(f.to_vector<float>(), std::vector<float>{-2.5f});
  // uint8 - uint8 stays uint8 and wraps as torch: tensor([1], uint8) - tensor([5], uint8) -> [252]
  Tensor one = mt::from_vector(std::vector<int64_t>{1}, {1}, {.dtype = mt::kUInt8});
  EXPECT_EQ((one - u).to_vector<int64_t>(), std::vector<int64_t>{252});
  EXPECT_EQ(mt::sub(i64({1}), u, 2).to_vector<int64_t>(), std::vector<int64_t>{-9});
}

// 5. Autocast never lowers float64.
TEST(OpEdges, AutocastKeepsFloat64) {
  Tensor a = mt::randn({4, 3}, {.dtype = mt::kFloat64}), b = mt::randn({3, 5}, {.dtype = mt::kFloat64});
  Tensor w = mt::randn({5, 3}, {.dtype = mt::kFloat64}), bias = mt::randn({5}, {.dtype = mt::kFloat64});
  Tensor img = mt::randn({1, 2, 5, 5}, {.dtype = mt::kFloat64}), k = mt::randn({3, 2, 3, 3}, {.dtype = mt::kFloat64});
  Tensor q = mt::randn({1, 2, 4, 8}, {.dtype = mt::kFloat64});
  Tensor ref = mt::matmul(a, b);
  mt::amp::Autocast ac(mt::kBFloat16);
  Tensor y = mt::matmul(a, b);
  EXPECT_EQ(y.dtype(), mt::kFloat64);
  expect_values(y, vals(ref), "matmul f64 under autocast");
  EXPECT_EQ(F::linear(a, w, bias).dtype(), mt::kFloat64);
  EXPECT_EQ(F::conv2d(img, k).dtype(), mt::kFloat64);
  EXPECT_EQ(mt::scaled_dot_product_attention(q, q, q).dtype(), mt::kFloat64);
  // float32 is still lowered.
  EXPECT_EQ(mt::matmul(a.to(mt::kFloat32), b.to(mt::kFloat32)).dtype(), mt::kBFloat16);
}

// ---------------------------------------------------------------- wrong gradients

// 6. std backward at zero standard deviation.
TEST(OpEdges, StdBackwardAtZeroStd) {
  // x = torch.tensor([2., 2, 2], requires_grad=True); x.std().backward() -> x.grad = [0, 0, 0]
  Tensor x = mt::tensor({2, 2, 2}).requires_grad_();
  mt::std(x).backward();
  expect_values(x.grad(), {0, 0, 0}, "std grad float32");
  // Constant float64 data whose two-pass variance is not exactly 0: still 0 (torch: [0, 0, 0]).
  Tensor c = leaf({0.1, 0.1, 0.1});
  mt::std(c).backward();
  expect_values(c.grad(), {0, 0, 0}, "std grad constant float64");
  // Per row: torch.tensor([[2., 2, 2], [1, 2, 3]]).std(1).sum() backward -> [[0,0,0],[-0.5,0,0.5]]
  Tensor r = leaf({2, 2, 2, 1, 2, 3}, {2, 3});
  mt::std(r, {1}).sum().backward();
  expect_values(r.grad(), {0, 0, 0, -0.5, 0, 0.5}, "std grad rows", 1e-15);
  std::string why;
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return mt::std(in[0], {1}); },
                                      {leaf({1, 2, 4, 0.5, -1, 3}, {2, 3})}, {}, &why))
      << why;
}

// 7. nll_loss (mean) with every target ignored.
TEST(OpEdges, NllLossAllTargetsIgnored) {
  // F.nll_loss(x, torch.tensor([-100, -100, -100])) -> nan; x.grad -> zeros
  Tensor x = leaf({-1, -2, -3, -4, -5, -6}, {3, 2});
  Tensor loss = F::nll_loss(x, i64({-100, -100, -100}));
  EXPECT_TRUE(std::isnan(loss.item<double>()));
  loss.backward();
  expect_values(x.grad(), {0, 0, 0, 0, 0, 0}, "nll grad");
  // Partly ignored: unchanged (F.nll_loss(x, tensor([1, -100, 0])) = (2 + 5) / 2 = 3.5).
  Tensor x2 = leaf({-1, -2, -3, -4, -5, -6}, {3, 2});
  Tensor l2 = F::nll_loss(x2, i64({1, -100, 0}));
  EXPECT_DOUBLE_EQ(l2.item<double>(), 3.5);
  l2.backward();
  expect_values(x2.grad(), {0, -0.5, 0, 0, -0.5, 0}, "nll grad partly ignored");
}

// 8. prod backward with zero factors.
TEST(OpEdges, ProdBackwardWithZeros) {
  // torch.tensor([2., 0, 3]).prod() backward -> [0, 6, 0]; [2., 0, 0] -> [0, 0, 0]
  Tensor a = leaf({2, 0, 3});
  mt::prod(a, 0).backward();
  expect_values(a.grad(), {0, 6, 0}, "prod one zero");
  Tensor b = leaf({2, 0, 0});
  mt::prod(b, 0).backward();
  expect_values(b.grad(), {0, 0, 0}, "prod two zeros");
  // torch.tensor([[2., 0, 3], [0, 0, 1], [1, 2, 3]]).prod(1).sum() backward -> [[0,6,0],[0,0,0],[6,3,2]]
  Tensor c = leaf({2, 0, 3, 0, 0, 1, 1, 2, 3}, {3, 3});
  mt::prod(c, 1).sum().backward();
  expect_values(c.grad(), {0, 6, 0, 0, 0, 0, 6, 3, 2}, "prod rows");
  std::string why;
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return mt::prod(in[0], 1); },
                                      {leaf({2, 0, 3, 1, -2, 0.5}, {2, 3})}, {}, &why))
      << why;
  EXPECT_TRUE(mt::autograd::gradgradcheck([](auto& in) { return mt::prod(in[0], 0); }, {leaf({2, 0, 3})}, {}, &why))
      << why;
}

// 9. max()/min() over all elements route the gradient to the NaN positions.
TEST(OpEdges, FullMaxMinWithNan) {
  for (bool is_max : {true, false}) {
    // torch.tensor([1., nan, 3, nan]).max() backward -> [0, 0.5, 0, 0.5] (min likewise)
    Tensor x = leaf({1, NAN, 3, NAN});
    (is_max ? mt::max(x) : mt::min(x)).backward();
    expect_values(x.grad(), {0, 0.5, 0, 0.5}, is_max ? "max" : "min");
  }
  // Ties without NaN split evenly: torch.tensor([1., 3, 3]).max() backward -> [0, 0.5, 0.5]
  Tensor t = leaf({1, 3, 3});
  mt::max(t).backward();
  expect_values(t.grad(), {0, 0.5, 0.5}, "max ties");
}

// 10. div backward w.r.t. the divisor without b * b.
TEST(OpEdges, DivBackwardSmallDivisor) {
  // a = b = torch.tensor([1e-4], dtype=torch.float16); (a / b).backward() -> b.grad = -10000
  Tensor a = mt::full({1}, 1e-4, {.dtype = mt::kFloat16}).requires_grad_();
  Tensor b = mt::full({1}, 1e-4, {.dtype = mt::kFloat16}).requires_grad_();
  (a / b).sum().backward();
  EXPECT_EQ(b.grad().to_vector<float>()[0], -10000.0f);
  // float32 below 3e-23: a = b = 1e-25 -> b.grad = -1e25 (b*b underflowed to 0 and gave -inf)
  Tensor c = mt::full({1}, 1e-25f).requires_grad_(), d = mt::full({1}, 1e-25f).requires_grad_();
  (c / d).sum().backward();
  EXPECT_NEAR(d.grad().to_vector<float>()[0] / -1e25f, 1.0f, 1e-5f);
}

// 11. batch_norm eval backward does not depend on x.
TEST(OpEdges, BatchNormEvalBackwardAtNonFiniteInput) {
  // x = [[nan, 1], [inf, 2]], running mean [0, 1], var [4, 1], weight [2, 3], eps 0:
  // F.batch_norm(x, rm, rv, w, training=False, eps=0).sum() backward -> x.grad = [[1, 3], [1, 3]]
  for (bool graph : {false, true}) {
    Tensor x = leaf({NAN, 1, INFINITY, 2}, {2, 2});
    Tensor w = f64({2, 3});
    Tensor y = F::batch_norm(x, f64({0, 1}), f64({4, 1}), w, Tensor(), false, 0.1, 0.0);
    auto g = mt::autograd::grad({y.sum()}, {x}, {}, false, graph);
    expect_values(g[0], {1, 3, 1, 3}, graph ? "eval bn grad (graph)" : "eval bn grad");
  }
}

// 12. pow(tensor, tensor) at base 0.
TEST(OpEdges, PowAtBaseZero) {
  // a = torch.tensor([0., 0, 0, 2]); b = torch.tensor([0., -1, -2, -1]); torch.pow(a, b).sum() backward:
  // a.grad = [0, -inf, -inf, -0.25], b.grad = [0, -inf, -inf, 0.34657359...]
  Tensor a = leaf({0, 0, 0, 2}), b = leaf({0, -1, -2, -1});
  mt::pow(a, b).sum().backward();
  expect_values(a.grad(), {0, -INFINITY, -INFINITY, -0.25}, "pow base grad");
  expect_values(b.grad(), {0, -INFINITY, -INFINITY, 0.5 * std::log(2.0)}, "pow exponent grad", 1e-15);
  // a = torch.tensor([0., 0]); b = torch.tensor([0.5, 1.]): a.grad = [inf, 1], b.grad = [0, 0]
  Tensor c = leaf({0, 0}), d = leaf({0.5, 1});
  mt::pow(c, d).sum().backward();
  expect_values(c.grad(), {INFINITY, 1}, "pow base grad, positive exponents");
  expect_values(d.grad(), {0, 0}, "pow exponent grad, positive exponents");
}

// 13. maximum/minimum with a NaN operand: both inputs get the gradient (PyTorch 1.13).
TEST(OpEdges, MaximumMinimumWithNan) {
  for (bool is_max : {true, false}) {
    // a = [nan, 1, 2], b = [1, nan, 2]: torch.maximum(a, b).sum() backward -> a.grad = b.grad = [1, 1, 0.5]
    Tensor a = leaf({NAN, 1, 2}), b = leaf({1, NAN, 2});
    (is_max ? mt::maximum(a, b) : mt::minimum(a, b)).sum().backward();
    expect_values(a.grad(), {1, 1, 0.5}, is_max ? "maximum a" : "minimum a");
    expect_values(b.grad(), {1, 1, 0.5}, is_max ? "maximum b" : "minimum b");
  }
  Tensor a = leaf({3, 1}), b = leaf({1, 3});
  mt::maximum(a, b).sum().backward();
  expect_values(a.grad(), {1, 0}, "maximum a, no NaN");
  expect_values(b.grad(), {0, 1}, "maximum b, no NaN");
}

// ---------------------------------------------------------------- dtypes and shapes

// 14. alpha of add/sub is applied after promotion.
TEST(OpEdges, AlphaAfterPromotion) {
  Tensor h = mt::full({1}, 1.0, {.dtype = mt::kFloat16});
  Tensor i = mt::from_vector(std::vector<int64_t>{3}, {1}, {.dtype = mt::kInt32});
  // torch.add(tensor([1.], float16), tensor([3], int32), alpha=0.5) -> tensor([2.5], float16)
  Tensor y = mt::add(h, i, 0.5);
  EXPECT_EQ(y.dtype(), mt::kFloat16);
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>{2.5f});
  // torch.sub(tensor([1.], float16), tensor([3], int32), alpha=0.5) -> tensor([-0.5], float16)
  EXPECT_EQ(mt::sub(h, i, 0.5).to_vector<float>(), std::vector<float>{-0.5f});
  // torch.add(tensor([1.], float64), tensor([3.]), alpha=0.1).item() -> 1.3
  EXPECT_EQ(mt::add(f64({1}), mt::tensor({3}), 0.1).to_vector<double>()[0], 1 + 0.1 * 3.0);
  EXPECT_EQ(mt::add(f64({1}), mt::tensor({3}), 0.1).to_vector<double>()[0], 1.3);
  // torch.add(tensor([1]), tensor([2]), alpha=0.5) raises (float alpha for integer tensors)
  EXPECT_ERROR(mt::add(i64({1}), i64({2}), 0.5), HasSubstr("add"), HasSubstr("alpha"));
  // Gradients: d/db of a + 0.5 b is 0.5, of a - 0.5 b is -0.5.
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  (mt::add(a, b, 0.5) + mt::sub(a, b, 0.5) * 2.0).sum().backward();
  expect_values(a.grad(), {3, 3}, "alpha a grad");
  expect_values(b.grad(), {-0.5, -0.5}, "alpha b grad");
}

// 15. Integer pow and prod keep integers (int64).
TEST(OpEdges, IntegerPowAndProd) {
  // torch.pow(tensor([2, 3]), tensor([3, 2])) -> tensor([8, 9]) (int64)
  Tensor p = mt::pow(i64({2, 3}), i64({3, 2}));
  EXPECT_EQ(p.dtype(), mt::kInt64);
  EXPECT_EQ(p.to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
  // torch.pow(tensor([1, -1, 0, 2, -1]), tensor([-1, -3, 0, -1, -2])) -> [1, -1, 1, 0, 1]
  EXPECT_EQ(mt::pow(i64({1, -1, 0, 2, -1}), i64({-1, -3, 0, -1, -2})).to_vector<int64_t>(),
            (std::vector<int64_t>{1, -1, 1, 0, 1}));
  // torch.pow(tensor([7]), tensor([40])) -> tensor([-6212923193149656639]) (wraps)
  EXPECT_EQ(mt::pow(i64({7}), i64({40})).to_vector<int64_t>(), std::vector<int64_t>{-6212923193149656639LL});
  // torch.pow(tensor([2], int32), tensor([3])).dtype -> int64; with a float exponent -> float32
  Tensor i32 = mt::from_vector(std::vector<int64_t>{2}, {1}, {.dtype = mt::kInt32});
  EXPECT_EQ(mt::pow(i32, i64({3})).dtype(), mt::kInt64);
  EXPECT_EQ(mt::pow(i32, mt::tensor({0.5})).dtype(), mt::kFloat32);
  // torch.prod(tensor([2, 3], dtype=torch.int32)) -> tensor(6) int64; prod of bool -> int64
  Tensor q = mt::prod(mt::from_vector(std::vector<int64_t>{2, 3}, {2}, {.dtype = mt::kInt32}), 0);
  EXPECT_EQ(q.dtype(), mt::kInt64);
  EXPECT_EQ(q.item<int64_t>(), 6);
  Tensor bq = mt::prod(mt::from_vector(std::vector<int64_t>{1, 1}, {2}, {.dtype = mt::kBool}), 0);
  EXPECT_EQ(bq.dtype(), mt::kInt64);
  EXPECT_EQ(bq.item<int64_t>(), 1);
}

// 16. clamp with min > max gives max everywhere.
TEST(OpEdges, ClampMinAboveMax) {
  // torch.clamp(torch.tensor([-1, 0.5, 3]), 2, 1) -> [1, 1, 1]
  expect_values(mt::clamp(mt::tensor({-1, 0.5, 3}), 2, 1), {1, 1, 1}, "float");
  // torch.clamp(torch.tensor([-1, 0, 3]), 2, 1) -> [1, 1, 1]
  EXPECT_EQ(mt::clamp(i64({-1, 0, 3}), 2, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
}

// 17. abs(-0.0) is +0.0.
TEST(OpEdges, AbsOfNegativeZero) {
  // 1 / torch.abs(torch.tensor([-0.])) -> inf (abs(-0.0) is +0.0)
  for (mt::DType t : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16}) {
    Tensor y = mt::abs(mt::full({3}, -0.0, {.dtype = t}));
    for (double v : y.to_vector<double>()) EXPECT_FALSE(std::signbit(v)) << mt::dtype_name(t);
  }
  EXPECT_EQ(mt::abs(i64({-3, 0, 4})).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 4}));
}

// 18. fp16/bf16 running statistics are rounded once (reference: tools/gen_reference_edges.py).
TEST(OpEdges, ReducedRunningStatsRoundOnce) {
  std::ifstream in(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_edges.json");
  ASSERT_TRUE(in) << "missing tests/fixtures/reference_edges.json";
  const nlohmann::json doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("running_stats")) {
    const mt::DType t = c.at("dtype") == "float16" ? mt::kFloat16 : mt::kBFloat16;
    const mt::Shape shape = c.at("x_shape").get<mt::Shape>();
    Tensor x = mt::from_vector(c.at("x").get<std::vector<double>>(), shape, {.dtype = t});
    Tensor rm = mt::from_vector(c.at("running_mean").get<std::vector<double>>(), {shape[1]}, {.dtype = t});
    Tensor rv = mt::from_vector(c.at("running_var").get<std::vector<double>>(), {shape[1]}, {.dtype = t});
    F::batch_norm(x, rm, rv, Tensor(), Tensor(), true, c.at("momentum").get<double>());
    // The reference is the float64 update rounded once to the estimate's dtype.
    expect_values(rm, c.at("new_mean").get<std::vector<double>>(), std::string(c.at("dtype")) + " running_mean");
    expect_values(rv, c.at("new_var").get<std::vector<double>>(), std::string(c.at("dtype")) + " running_var");
  }
}

// 19. Empty shapes PyTorch computes with.
TEST(OpEdges, EmptyShapesCompute) {
  // linear with 0 input features: y = bias broadcast, x.grad [3, 0], w.grad [2, 0], b.grad = [3, 3]
  Tensor x = mt::zeros({3, 0}, {.dtype = mt::kFloat64}).requires_grad_();
  Tensor w = mt::zeros({2, 0}, {.dtype = mt::kFloat64}).requires_grad_();
  Tensor b = leaf({0.25, -1});
  Tensor y = F::linear(x, w, b);
  expect_values(y, {0.25, -1, 0.25, -1, 0.25, -1}, "linear K=0");
  y.sum().backward();
  EXPECT_EQ(x.grad().sizes(), (mt::Shape{3, 0}));
  EXPECT_EQ(w.grad().sizes(), (mt::Shape{2, 0}));
  expect_values(b.grad(), {3, 3}, "linear K=0 bias grad");
  // matmul with K = 0: torch.zeros(2, 0) @ torch.zeros(0, 3) -> zeros(2, 3)
  expect_values(mt::matmul(mt::zeros({2, 0}), mt::zeros({0, 3})), std::vector<double>(6, 0.0), "matmul K=0");

  // torch.logsumexp(torch.randn(3, 0), 1) -> [-inf, -inf, -inf]; torch.logsumexp(torch.randn(0, 3), 0) likewise
  Tensor e = mt::zeros({3, 0}).requires_grad_();
  Tensor l = mt::logsumexp(e, {1});
  expect_values(l, {-INFINITY, -INFINITY, -INFINITY}, "logsumexp empty dim");
  l.sum().backward();
  EXPECT_EQ(e.grad().sizes(), (mt::Shape{3, 0}));
  expect_values(mt::logsumexp(mt::zeros({0, 3}), {0}), {-INFINITY, -INFINITY, -INFINITY}, "logsumexp empty rows");
  EXPECT_EQ(mt::logsumexp(mt::zeros({0, 3}), {1}).sizes(), (mt::Shape{0}));

  // [c.shape for c in torch.chunk(torch.randn(0, 3), 4, 0)] -> four [0, 3]; chunk(randn(2, 0), 3, 1) -> three [2, 0]
  auto cs = mt::chunk(mt::zeros({0, 3}), 4, 0);
  ASSERT_EQ(cs.size(), 4u);
  for (const Tensor& c : cs) EXPECT_EQ(c.sizes(), (mt::Shape{0, 3}));
  EXPECT_EQ(mt::chunk(mt::zeros({2, 0}), 3, 1).size(), 3u);
  EXPECT_EQ(mt::chunk(mt::zeros({5}), 3).size(), 3u);  // [2, 2, 1], unchanged

  // torch.gather(torch.arange(12.).reshape(3, 4), 1, tensor([[0, 3], [1, 1]])) -> [[0, 3], [5, 5]]
  Tensor g = mt::arange(12, {.dtype = mt::kFloat64}).reshape({3, 4}).requires_grad_();
  Tensor idx = mt::from_vector(std::vector<int64_t>{0, 3, 1, 1}, {2, 2}, {.dtype = mt::kInt64});
  Tensor gy = mt::gather(g, 1, idx);
  expect_values(gy, {0, 3, 5, 5}, "gather smaller index");
  gy.sum().backward();
  expect_values(g.grad(), {1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0}, "gather smaller index grad");
  // torch.scatter_add(torch.zeros(3, 4), 1, tensor([[0, 3], [1, 1]]), torch.ones(3, 5))
  //   -> [[1, 0, 0, 1], [0, 2, 0, 0], [0, 0, 0, 0]]
  Tensor src = mt::ones({3, 5}, {.dtype = mt::kFloat64}).requires_grad_();
  Tensor s = mt::scatter_add(mt::zeros({3, 4}, {.dtype = mt::kFloat64}), 1, idx, src);
  expect_values(s, {1, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0}, "scatter_add smaller index");
  (s * mt::arange(12, {.dtype = mt::kFloat64}).reshape({3, 4})).sum().backward();
  // src.grad = gather(upstream, 1, index) in the index's corner, 0 elsewhere
  expect_values(src.grad(), {0, 3, 0, 0, 0, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0}, "scatter_add src grad");
  // torch.scatter_add(torch.zeros(3, 4), 0, tensor([[0, 2], [1, 1]]), torch.arange(15.).reshape(3, 5))
  //   -> [[0, 0, 0, 0], [5, 6, 0, 0], [0, 1, 0, 0]]
  Tensor idx0 = mt::from_vector(std::vector<int64_t>{0, 2, 1, 1}, {2, 2}, {.dtype = mt::kInt64});
  expect_values(mt::scatter_add(mt::zeros({3, 4}), 0, idx0, mt::arange(15).reshape({3, 5}).to(mt::kFloat32)),
                {0, 0, 0, 0, 5, 6, 0, 0, 0, 1, 0, 0}, "scatter_add dim 0 corner");
  EXPECT_ERROR(mt::gather(g, 1, mt::zeros({4, 1}, {.dtype = mt::kInt64})), HasSubstr("gather"));

  // F.layer_norm(torch.randn(2, 0), [0], w, b): output [2, 0], w.grad = []
  Tensor lx = mt::zeros({2, 0}).requires_grad_(), lw = mt::zeros({0}).requires_grad_();
  Tensor ly = F::layer_norm(lx, {0}, lw, mt::zeros({0}));
  EXPECT_EQ(ly.sizes(), (mt::Shape{2, 0}));
  ly.sum().backward();
  EXPECT_EQ(lx.grad().sizes(), (mt::Shape{2, 0}));
  // F.layer_norm(torch.randn(0, 3), [3], w): output [0, 3], w.grad = [0, 0, 0]
  Tensor mx = mt::zeros({0, 3}).requires_grad_(), mw = mt::ones({3}).requires_grad_();
  Tensor my = F::layer_norm(mx, {3}, mw);
  EXPECT_EQ(my.sizes(), (mt::Shape{0, 3}));
  my.sum().backward();
  expect_values(mw.grad(), {0, 0, 0}, "layer_norm no rows weight grad");
  // torch raises for normalized_shape [] (must be at least 1-D): so do we.
  EXPECT_ERROR(F::layer_norm(mt::zeros({2, 3}), {}), HasSubstr("layer_norm"));

  // F.batch_norm(torch.randn(0, 3), rm, rv, w, b, training=True) and the same for [2, 3, 0]:
  // output of x's shape, w.grad = b.grad = [0, 0, 0], running estimates unchanged; [4, 0] and
  // [4, 0, 5] (no channels) give empty outputs. [1, 3] still raises (one value per channel).
  for (const mt::Shape& shape : {mt::Shape{0, 3}, mt::Shape{2, 3, 0}}) {
    for (bool training : {true, false}) {
      Tensor bx = mt::zeros(shape).requires_grad_(), bw = mt::ones({3}).requires_grad_();
      Tensor bb = mt::zeros({3}).requires_grad_();
      Tensor rm = mt::full({3}, 0.5f), rv = mt::full({3}, 2.0f);
      Tensor by = F::batch_norm(bx, rm, rv, bw, bb, training);
      EXPECT_EQ(by.sizes(), shape);
      by.sum().backward();
      EXPECT_EQ(bx.grad().sizes(), shape);
      expect_values(bw.grad(), {0, 0, 0}, "batch_norm empty weight grad");
      expect_values(bb.grad(), {0, 0, 0}, "batch_norm empty bias grad");
      expect_values(rm, {0.5, 0.5, 0.5}, "batch_norm empty running mean");
      expect_values(rv, {2, 2, 2}, "batch_norm empty running var");
    }
  }
  for (const mt::Shape& shape : {mt::Shape{4, 0}, mt::Shape{4, 0, 5}}) {
    Tensor bx = mt::zeros(shape).requires_grad_();
    Tensor by = F::batch_norm(bx, Tensor(), Tensor(), Tensor(), Tensor(), true);
    EXPECT_EQ(by.sizes(), shape);
    by.sum().backward();
    EXPECT_EQ(bx.grad().sizes(), shape);
  }
  EXPECT_ERROR(F::batch_norm(mt::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
               HasSubstr("more than 1 value per channel"));
}

// 20. Errors where PyTorch raises.
TEST(OpEdges, ErrorsAsPyTorch) {
  Tensor t = mt::from_vector(std::vector<int64_t>{1}, {1}, {.dtype = mt::kBool});
  // torch.tensor([1]) - torch.tensor([True]), True - 1, 1 - True, bool.sub(float): all raise
  EXPECT_ERROR(i64({1}) - t, HasSubstr("sub"), HasSubstr("bool"));
  EXPECT_ERROR(t - 1, HasSubstr("sub"), HasSubstr("bool"));
  EXPECT_ERROR(1 - t, HasSubstr("sub"), HasSubstr("bool"));
  EXPECT_ERROR(mt::sub(t, mt::tensor({1})), HasSubstr("sub"), HasSubstr("bool"));
  // torch.pow(tensor([True]), tensor([True])) raises; pow(bool, int64) -> tensor([1])
  EXPECT_ERROR(mt::pow(t, t), HasSubstr("pow"), HasSubstr("bool"));
  EXPECT_EQ(mt::pow(t, i64({2})).to_vector<int64_t>(), std::vector<int64_t>{1});
  // F.one_hot(torch.tensor([], dtype=torch.long)) raises; with num_classes=3 -> shape [0, 3]
  EXPECT_ERROR(mt::one_hot(mt::zeros({0}, {.dtype = mt::kInt64})), HasSubstr("one_hot"), HasSubstr("empty"));
  EXPECT_EQ(mt::one_hot(mt::zeros({0}, {.dtype = mt::kInt64}), 3).sizes(), (mt::Shape{0, 3}));
  // torch.zeros(2, dtype=torch.half).masked_fill(mask, -1e30) raises ("without overflow"); -inf is fine
  Tensor h = mt::zeros({2}, {.dtype = mt::kFloat16});
  Tensor m = mt::from_vector(std::vector<int64_t>{1, 0}, {2}, {.dtype = mt::kBool});
  EXPECT_ERROR(mt::masked_fill(h, m, -1e30), HasSubstr("masked_fill"), HasSubstr("overflow"), HasSubstr("float16"));
  EXPECT_ERROR(mt::masked_fill(h, m, 65520.0), HasSubstr("overflow"));
  expect_values(mt::masked_fill(h, m, -INFINITY), {-INFINITY, 0}, "masked_fill -inf");
  expect_values(mt::masked_fill(h, m, 65504.0), {65504, 0}, "masked_fill fp16 max");
  // bf16 with 1e39 and int32 with 2**40 raise; uint8 with -1 wraps to 255 (as torch)
  EXPECT_ERROR(mt::masked_fill(mt::zeros({2}, {.dtype = mt::kBFloat16}), m, 1e39), HasSubstr("overflow"));
  EXPECT_ERROR(mt::masked_fill(mt::zeros({2}, {.dtype = mt::kInt32}), m, int64_t(1) << 40), HasSubstr("overflow"));
  EXPECT_EQ(mt::masked_fill(mt::zeros({2}, {.dtype = mt::kUInt8}), m, -1).to_vector<int64_t>(),
            (std::vector<int64_t>{255, 0}));
}

// 21. The documented choices (docs/nn.md): these stay errors.
TEST(OpEdges, DocumentedDifferences) {
  EXPECT_ERROR(F::mse_loss(mt::zeros({3, 1}), mt::zeros({3})), HasSubstr("mse_loss"), HasSubstr("same shape"));
  EXPECT_ERROR(mt::cat({mt::zeros({2, 3}), mt::zeros({0})}), HasSubstr("cat"));
  EXPECT_ERROR(mt::matmul(i64({1, 2}).reshape({1, 2}), i64({3, 4}).reshape({2, 1})), HasSubstr("matmul"),
               HasSubstr("floating"));
}

// ---------------------------------------------------------------- the sweep
// Every op of the elementwise lists (core/elementwise_math.h) and of the reduction and nn tables
// in tools/gen_reference_edges.py, over 0-dim, empty, size-1, contiguous, transposed, stepped and
// expanded inputs, each dtype and mixed-dtype pairs, with NaN/inf/-0.0/huge/denormal values,
// forward and backward, against float64 PyTorch references. A failing case names the op,
// the shapes, strides and dtypes.

namespace {

using json = nlohmann::json;

const json& edges_fixture() {
  static const json doc = [] {
    std::ifstream in(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_edges.json");
    if (!in) throw std::runtime_error("cannot open tests/fixtures/reference_edges.json");
    return json::parse(in);
  }();
  return doc;
}

double decode(const json& v) {
  if (v.is_number()) return v.get<double>();
  const std::string s = v.get<std::string>();
  if (s == "nan") return NAN;
  if (s == "inf") return INFINITY;
  if (s == "-inf") return -INFINITY;
  return -0.0;  // "-0"
}

mt::DType dtype_of(const std::string& s) {
  static const std::map<std::string, mt::DType> names = {
      {"float32", mt::kFloat32}, {"float64", mt::kFloat64}, {"float16", mt::kFloat16}, {"bfloat16", mt::kBFloat16},
      {"int64", mt::kInt64},     {"int32", mt::kInt32},     {"uint8", mt::kUInt8},     {"bool", mt::kBool}};
  return names.at(s);
}

Tensor build(const json& enc, mt::DType dt) {
  const mt::Shape shape = enc.at("shape").get<mt::Shape>();
  const mt::Shape flat{mt::shape_numel(shape)};
  Tensor t;
  if (mt::is_floating(dt)) {
    std::vector<double> v;
    for (const json& e : enc.at("data")) v.push_back(decode(e));
    t = mt::from_vector(v, flat, {.dtype = dt});
  } else {
    std::vector<int64_t> v;
    for (const json& e : enc.at("data")) v.push_back(e.get<int64_t>());
    t = mt::from_vector(v, flat, {.dtype = dt});
  }
  return t.reshape(shape);
}

// The view the generator applied to a base tensor (its LAYOUTS table).
Tensor view_of(const Tensor& base, const std::string& layout) {
  if (layout == "t") return base.t();
  if (layout == "step") return base.slice(1, 0, base.size(1), 2);
  if (layout == "expand") return base.expand({2, 3});
  return base;
}

// The generator's upstream gradient: (i % 5 - 2) * 0.5 + 0.25 in row-major order.
Tensor upstream(const Tensor& y) {
  std::vector<double> v(size_t(y.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i % 5) - 2) * 0.5 + 0.25;
  return mt::from_vector(v, {y.numel()}, {.dtype = mt::kFloat64}).reshape(y.sizes()).to(y.dtype());
}

double forward_tol(mt::DType t) {
  switch (t) {
    case mt::kFloat64:
      return 1e-12;
    case mt::kFloat32:
      return 1e-5;
    case mt::kFloat16:
      return 2e-3;
    case mt::kBFloat16:
      return 1.6e-2;
    default:
      return 0;
  }
}
double backward_tol(mt::DType t) { return t == mt::kFloat64 ? 1e-10 : 8 * forward_tol(t); }

std::string strides_str(const Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.stride(d));
  return s + "]";
}
std::string describe_inputs(const std::vector<Tensor>& xs) {
  std::string s;
  for (const Tensor& x : xs)
    s += (s.empty() ? "" : "; ") + x.shape_str() + " strides " + strides_str(x) + " " + mt::dtype_name(x.dtype());
  return s;
}

double max_finite(mt::DType t) {
  switch (t) {
    case mt::kFloat16:
      return 65504.0;
    case mt::kBFloat16:
      return 3.3895313892515355e38;
    case mt::kFloat32:
      return double(std::numeric_limits<float>::max());
    default:
      return std::numeric_limits<double>::max();
  }
}

// The first mismatch of got against a fixture tensor, or "" (NaN matches NaN; inf exactly,
// except that a reference within tol of the dtype's largest value may have overflowed).
std::string mismatch(const Tensor& got, const json& want, double tol) {
  if (got.sizes() != want.at("shape").get<mt::Shape>()) return "shape " + got.shape_str();
  const std::vector<double> g = got.to_vector<double>();
  const json& w = want.at("data");
  const double edge = max_finite(got.dtype()) / (1 + tol);
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = decode(w[i]);
    const bool overflowed = std::isinf(g[i]) && std::fabs(e) >= edge && std::signbit(g[i]) == std::signbit(e);
    const bool ok = std::isnan(e) ? std::isnan(g[i])
                    : std::isinf(e)
                        ? g[i] == e
                        : overflowed || (std::isfinite(g[i]) && std::fabs(g[i] - e) <= tol * (1 + std::fabs(e)));
    if (!ok) {
      std::ostringstream m;
      m.precision(9);
      m << "element " << i << ": " << g[i] << ", PyTorch " << e;
      return m.str();
    }
  }
  return "";
}

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

const std::map<std::string, Op>& unary_ops() {
  static const std::map<std::string, Op> ops = [] {
    // The entries of MT_UNARY_OPS (core/elementwise_math.h) with more arguments (Args), then
    // every other one, called as mt::name(x).
    std::map<std::string, Op> m = {
        {"gelu", [](auto& x) { return mt::gelu(x[0]); }},
        {"gelu_tanh", [](auto& x) { return mt::gelu(x[0], "tanh"); }},
        {"softplus", [](auto& x) { return mt::softplus(x[0], 1, 20); }},
        {"pow_scalar", [](auto& x) { return mt::pow(x[0], 3); }},
        {"clamp", [](auto& x) { return mt::clamp(x[0], 0, 2); }},
        {"leaky_relu", [](auto& x) { return mt::leaky_relu(x[0], 0.1); }},
        {"elu", [](auto& x) { return mt::elu(x[0], 1.5); }},
        {"smooth_l1",  // the unreduced loss against zeros (float32 for an integer input)
         [](auto& x) {
           const Tensor zeros =
               mt::zeros(x[0].sizes(), {.dtype = mt::is_floating(x[0].dtype()) ? x[0].dtype() : mt::kFloat32});
           return F::smooth_l1_loss(x[0], zeros, mt::nn::Reduction::None, 1.0);
         }},
    };
#define MT_EDGE_UNARY(Enum, name, F, domain, policy, gradcheck, op) \
  MT_UNARY_IF_ONE_TENSOR(                                           \
      op, m[#name] = [](auto& x) { return mt::name(x[0]); };)
    MT_UNARY_OPS(MT_EDGE_UNARY)
#undef MT_EDGE_UNARY
    return m;
  }();
  return ops;
}

const std::map<std::string, Op>& binary_ops() {
  static const std::map<std::string, Op> ops = {
      {"add", [](auto& x) { return mt::add(x[0], x[1]); }},
      {"sub", [](auto& x) { return mt::sub(x[0], x[1]); }},
      {"mul", [](auto& x) { return mt::mul(x[0], x[1]); }},
      {"div", [](auto& x) { return mt::div(x[0], x[1]); }},
      {"maximum", [](auto& x) { return mt::maximum(x[0], x[1]); }},
      {"minimum", [](auto& x) { return mt::minimum(x[0], x[1]); }},
      {"pow", [](auto& x) { return mt::pow(x[0], x[1]); }},
      {"eq", [](auto& x) { return mt::eq(x[0], x[1]); }},
      {"ne", [](auto& x) { return mt::ne(x[0], x[1]); }},
      {"lt", [](auto& x) { return mt::lt(x[0], x[1]); }},
      {"le", [](auto& x) { return mt::le(x[0], x[1]); }},
      {"gt", [](auto& x) { return mt::gt(x[0], x[1]); }},
      {"ge", [](auto& x) { return mt::ge(x[0], x[1]); }},
      {"logical_and", [](auto& x) { return mt::logical_and(x[0], x[1]); }},
      {"logical_or", [](auto& x) { return mt::logical_or(x[0], x[1]); }},
      {"add_scaled", [](auto& x) { return mt::add(x[0], x[1], 0.5); }},
  };
  return ops;
}

const std::map<std::string, Op>& reductions() {
  static const std::map<std::string, Op> ops = {
      {"sum_all", [](auto& x) { return mt::sum(x[0]); }},
      {"sum_last", [](auto& x) { return mt::sum(x[0], {-1}); }},
      {"mean_all", [](auto& x) { return mt::mean(x[0]); }},
      {"mean_last", [](auto& x) { return mt::mean(x[0], {-1}); }},
      {"prod_last", [](auto& x) { return mt::prod(x[0], -1); }},
      {"amax_last", [](auto& x) { return mt::amax(x[0], {-1}); }},
      {"amin_last", [](auto& x) { return mt::amin(x[0], {-1}); }},
      {"max_all", [](auto& x) { return mt::max(x[0]); }},
      {"min_all", [](auto& x) { return mt::min(x[0]); }},
      {"max_last", [](auto& x) { return mt::max(x[0], -1).values; }},
      {"min_last", [](auto& x) { return mt::min(x[0], -1).values; }},
      {"argmax_last", [](auto& x) { return mt::argmax(x[0], -1); }},
      {"argmin_last", [](auto& x) { return mt::argmin(x[0], -1); }},
      {"var_last", [](auto& x) { return mt::var(x[0], {-1}); }},
      {"std_last", [](auto& x) { return mt::std(x[0], {-1}); }},
      {"logsumexp_last", [](auto& x) { return mt::logsumexp(x[0], {-1}); }},
  };
  return ops;
}

// A loss target of x's shape holding v (float32 for an integer x), as the generator's target().
Tensor target_of(const Tensor& x, double v = 0.25) {
  return mt::full(x.sizes(), v, {.dtype = mt::is_floating(x.dtype()) ? x.dtype() : mt::kFloat32});
}

// The nn, shape and loss ops of the generator's NN_OPS (not in the elementwise lists).
const std::map<std::string, Op>& nn_ops() {
  static const std::map<std::string, Op> ops = {
      {"softmax_last", [](auto& x) { return mt::softmax(x[0], -1); }},
      {"softmax_first", [](auto& x) { return mt::softmax(x[0], 0); }},
      {"log_softmax_last", [](auto& x) { return mt::log_softmax(x[0], -1); }},
      {"log_softmax_first", [](auto& x) { return mt::log_softmax(x[0], 0); }},
      {"cumsum_last", [](auto& x) { return mt::cumsum(x[0], -1); }},
      {"cumprod_last", [](auto& x) { return mt::cumprod(x[0], -1); }},
      {"cat_last",
       [](auto& x) {
         return mt::cat({x[0], x[0]}, -1);
       }},
      {"flatten", [](auto& x) { return F::flatten(x[0], 0); }},
      {"sort_last", [](auto& x) { return mt::sort(x[0], -1).values; }},
      {"norm_all", [](auto& x) { return mt::norm(x[0]); }},
      {"all", [](auto& x) { return mt::all(x[0]); }},
      {"layer_norm_last",
       [](auto& x) { return F::layer_norm(x[0], x[0].dim() ? mt::Shape{x[0].size(-1)} : mt::Shape{}); }},
      {"any", [](auto& x) { return mt::any(x[0]); }},
      {"masked_fill", [](auto& x) { return mt::masked_fill(x[0], mt::gt(x[0], mt::scalar_tensor(1.0)), -1.5); }},
      {"leaky_relu", [](auto& x) { return mt::leaky_relu(x[0], 0.1); }},
      {"elu", [](auto& x) { return mt::elu(x[0]); }},
      {"hardtanh", [](auto& x) { return mt::hardtanh(x[0], -2, 2); }},
      {"mse_loss", [](auto& x) { return F::mse_loss(x[0], target_of(x[0])); }},
      {"l1_loss", [](auto& x) { return F::l1_loss(x[0], target_of(x[0])); }},
      {"smooth_l1_loss",
       [](auto& x) { return F::smooth_l1_loss(x[0], target_of(x[0]), mt::nn::Reduction::Mean, 0.5); }},
      {"huber_loss", [](auto& x) { return F::huber_loss(x[0], target_of(x[0]), mt::nn::Reduction::Mean, 0.5); }},
      {"bce", [](auto& x) { return F::binary_cross_entropy(mt::sigmoid(x[0]), target_of(x[0], 0.75)); }},
  };
  return ops;
}

// Runs one fixture case; returns "" or what went wrong.
std::string run_case(const Op& op, const json& c, const std::vector<std::string>& dtypes,
                     const std::vector<std::string>& layouts, const std::vector<const json*>& encs) {
  std::vector<Tensor> bases, inputs;
  const bool with_grad = c.contains("grads");
  for (size_t i = 0; i < encs.size(); ++i) {
    Tensor b = build(*encs[i], dtype_of(dtypes[i]));
    if (with_grad) b.requires_grad_();
    bases.push_back(b);
    inputs.push_back(view_of(b, layouts[i]));
  }
  const std::string where = describe_inputs(inputs);
  if (c.value("error", false)) {
    try {
      (void)op(inputs);
    } catch (const mt::Error&) {
      return "";
    }
    return where + ": PyTorch raises, Mantissa computes";
  }
  Tensor y;
  try {
    y = op(inputs);
  } catch (const mt::Error& e) {
    return where + ": throws " + e.what();
  }
  const mt::DType want_dtype = dtype_of(c.at("out_dtype"));
  if (y.dtype() != want_dtype)
    return where + ": result dtype " + mt::dtype_name(y.dtype()) + ", PyTorch " + mt::dtype_name(want_dtype);
  std::string m = mismatch(y, c.at("out"), forward_tol(y.dtype()));
  if (!m.empty()) return where + ": forward " + m;
  if (!with_grad) return "";
  y.backward(upstream(y));
  for (size_t i = 0; i < bases.size(); ++i) {
    Tensor g = bases[i].grad();
    if (!g.defined()) g = mt::zeros_like(bases[i]);
    m = mismatch(g, c.at("grads")[i], backward_tol(bases[i].dtype()));
    if (!m.empty()) return where + ": gradient of input " + std::to_string(i) + " " + m;
  }
  return "";
}

}  // namespace

TEST(OpEdgesSweep, EveryListedOpIsSwept) {
  // A new entry of the lists fails here until it has a call above (and torch's counterpart
  // in tools/gen_reference_edges.py, whose run then adds its cases to the fixture).
#define MT_CHECK_SWEPT_UNARY(Enum, name, ...) EXPECT_TRUE(unary_ops().count(#name)) << #name << " is not swept";
  MT_UNARY_OPS(MT_CHECK_SWEPT_UNARY)
#undef MT_CHECK_SWEPT_UNARY
#define MT_CHECK_SWEPT_BINARY(Enum, name, ...) \
  EXPECT_TRUE(std::string(#name).ends_with("_backward") || binary_ops().count(#name)) << #name << " is not swept";
  MT_BINARY_OPS(MT_CHECK_SWEPT_BINARY)
#undef MT_CHECK_SWEPT_BINARY
  std::set<std::string> in_fixture;
  for (const char* part : {"unary", "binary", "reduce", "nn"})
    for (const auto& c : edges_fixture().at("sweep").at(part))
      in_fixture.insert(std::string(part) + ":" + std::string(c.at("op")));
  for (const auto& [name, op] : unary_ops()) EXPECT_TRUE(in_fixture.count("unary:" + name)) << name;
  for (const auto& [name, op] : binary_ops()) EXPECT_TRUE(in_fixture.count("binary:" + name)) << name;
  for (const auto& [name, op] : reductions()) EXPECT_TRUE(in_fixture.count("reduce:" + name)) << name;
  for (const auto& [name, op] : nn_ops()) EXPECT_TRUE(in_fixture.count("nn:" + name)) << name;
}

namespace {
void sweep(const char* part) {
  int n = 0, failed = 0;
  for (const auto& c : edges_fixture().at("sweep").at(part)) {
    const std::string name = c.at("op");
    std::string why;
    if (std::string(part) == "binary") {
      why = run_case(binary_ops().at(name), c, c.at("dtypes"), c.at("layouts"), {&c.at("a"), &c.at("b")});
    } else {
      const std::string p = part;
      const Op& op = p == "unary" ? unary_ops().at(name) : p == "reduce" ? reductions().at(name) : nn_ops().at(name);
      why = run_case(op, c, {c.at("dtype")}, {c.at("layout")}, {&c.at("x")});
    }
    ++n;
    if (!why.empty()) {
      ++failed;
      ADD_FAILURE() << part << " " << name << " on " << why;
    }
  }
  EXPECT_EQ(failed, 0) << failed << " of " << n << " " << part << " cases differ from PyTorch";
}
}  // namespace

TEST(OpEdgesSweep, Unary) { sweep("unary"); }
TEST(OpEdgesSweep, Binary) { sweep("binary"); }
TEST(OpEdgesSweep, Reductions) { sweep("reduce"); }
TEST(OpEdgesSweep, NnShapeAndLossOps) { sweep("nn"); }
