// The LibTorch conveniences of Tensor: operator[], index({...}) with Slice/None/Ellipsis,
// index_put_, compound assignment, comparison methods, mm/bmm, chunk / split / unbind and item()
// as a Scalar, each
// against the op it spells (values and gradients), with the edges a user hits.
#include "test_util.h"

namespace mt = mantissa;
using mt::Tensor;
using namespace mt::indexing;
using testing::HasSubstr;

namespace {
Tensor iota(const mt::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return mt::arange(0, double(n)).reshape(s);
}
bool same(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && mt::all(a == b).item<bool>();
}
}  // namespace

TEST(TensorConveniences, IndexTermsAreTheirViews) {
  Tensor x = iota({2, 3, 4});
  EXPECT_TRUE(same(x[1], x.select(0, 1)));
  EXPECT_TRUE(same(x[-1][2], x.select(0, 1).select(0, 2)));
  EXPECT_TRUE(same(x.index({Slice(), 0}), x.select(1, 0)));
  EXPECT_TRUE(same(x.index({Slice(), Slice(1, None), Slice(None, None, 2)}), x.slice(1, 1, 3).slice(2, 0, 4, 2)));
  EXPECT_TRUE(same(x.index({Ellipsis, -1}), x.select(2, 3)));
  EXPECT_TRUE(same(x.index({0, Ellipsis}), x.select(0, 0)));
  EXPECT_TRUE(same(x.index({None, Slice(), 1}), x.select(1, 1).unsqueeze(0)));
  EXPECT_TRUE(same(x.index({Slice(-2, None)}), x));                 // negative bounds count from the end
  EXPECT_EQ(x.index({Slice(5, 9)}).sizes(), (mt::Shape{0, 3, 4}));  // out-of-range bounds clamp, as torch
  EXPECT_EQ(x.index({}).sizes(), x.sizes());
  // A 0-dim result, and views share storage.
  Tensor e = x.index({1, 2, 3});
  EXPECT_EQ(e.dim(), 0);
  EXPECT_EQ(e.item<double>(), 23.0);
  EXPECT_ERROR(x.index({0, 0, 0, 0}), HasSubstr("index"), HasSubstr("too many indices"), HasSubstr("[2, 3, 4]"));
  EXPECT_ERROR(x.index({Ellipsis, 0, Ellipsis}), HasSubstr("at most one Ellipsis"));
  EXPECT_ERROR(x[2], HasSubstr("select"), HasSubstr("out of range"));
  EXPECT_ERROR(x.index({Slice(0, 2, 0)}), HasSubstr("step must be positive"));
}

TEST(TensorConveniences, IndexingIsDifferentiableAndIndexPutWritesThrough) {
  Tensor w = iota({3, 4}).to(mt::kFloat64).requires_grad_();
  (mt::sum(w.index({Slice(), 1}) * 2.0) + mt::sum(w[0])).backward();
  std::vector<double> g = w.grad().to_vector<double>(), want = {1, 3, 1, 1, 0, 2, 0, 0, 0, 2, 0, 0};
  EXPECT_EQ(g, want);
  Tensor x = mt::zeros({2, 3});
  x.index_put_({Slice(), 0}, 1.5);
  x.index_put_({1, Slice(1, None)}, mt::full({2}, 7.0));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1.5, 0, 0, 1.5, 7, 7}));
}

TEST(TensorConveniences, CompoundAssignmentIsInPlace) {
  Tensor x = mt::full({2}, 1.0), y = mt::full({2}, 4.0);
  Tensor alias = x;
  x += y;
  x -= 0.5;
  x *= y;
  x /= 2.0;
  EXPECT_EQ(alias.to_vector<double>(), (std::vector<double>{9, 9}));  // (1 + 4 - 0.5) * 4 / 2
  Tensor i = mt::full({2}, 3, {.dtype = mt::kInt64});
  i *= 2;
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{6, 6}));
  Tensor leaf = mt::ones({2}).requires_grad_();
  EXPECT_ERROR(leaf += 1.0, HasSubstr("leaf"));
}

TEST(TensorConveniences, ComparisonMethodsMatchTheOperators) {
  Tensor a = mt::from_vector<double>({1, 2, std::nan(""), 4}), b = mt::from_vector<double>({1, 3, 2, 0});
  EXPECT_TRUE(same(a.eq(b), a == b));
  EXPECT_TRUE(same(a.ne(b), a != b));
  EXPECT_TRUE(same(a.lt(b), a < b));
  EXPECT_TRUE(same(a.le(2.0), a <= 2.0));
  EXPECT_TRUE(same(a.gt(2.0), a > 2.0));
  EXPECT_TRUE(same(a.ge(b), a >= b));
  EXPECT_EQ(a.ne(a).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));  // NaN != NaN
  EXPECT_EQ(a.eq(b).dtype(), mt::kBool);
}

TEST(TensorConveniences, MmAndBmmAreMatmulOfTheirRanksOnly) {
  mt::manual_seed(1);
  Tensor a = mt::randn({2, 3}), b = mt::randn({3, 4}), p = mt::randn({5, 2, 3}), q = mt::randn({5, 3, 4});
  EXPECT_TRUE(same(a.mm(b), mt::matmul(a, b)));
  EXPECT_TRUE(same(mt::bmm(p, q), mt::matmul(p, q)));
  EXPECT_TRUE(same(p.bmm(q), mt::matmul(p, q)));
  EXPECT_ERROR(mt::mm(p, q), HasSubstr("mm"), HasSubstr("2-D"), HasSubstr("[5, 2, 3]"));
  EXPECT_ERROR(mt::bmm(a, b), HasSubstr("bmm"), HasSubstr("3-D"));
  EXPECT_ERROR(mt::bmm(p, mt::randn({4, 3, 4})), HasSubstr("one B"));
}

// chunk / split / unbind as methods (LibTorch's x.chunk(2, -1)): the views the free functions
// make, their gradient back into the input, unbind's edges.
TEST(TensorConveniences, ChunkSplitAndUnbindAreViews) {
  Tensor x = iota({2, 3, 4});
  auto halves = x.chunk(2, -1);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_TRUE(same(halves[1], x.slice(2, 2, 4)));
  auto pieces = x.split(2, 1);  // rows 2, 1
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_TRUE(same(pieces[1], x.slice(1, 2, 3)));
  auto sized = x.split(std::vector<int64_t>{1, 3}, -1);
  ASSERT_EQ(sized.size(), 2u);
  EXPECT_TRUE(same(sized[1], x.slice(2, 1, 4)));
  auto rows = x.unbind(1);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(same(rows[2], x.select(1, 2)));
  EXPECT_EQ(rows[2].sizes(), (mt::Shape{2, 4}));
  EXPECT_EQ(rows[2].raw_data(), x.select(1, 2).raw_data()) << "a view, not a copy";
  EXPECT_TRUE(mt::unbind(mt::zeros({0, 3}), 0).empty());
  EXPECT_EQ(mt::unbind(mt::zeros({0, 3}), 1).size(), 3u);
  EXPECT_ERROR(mt::unbind(mt::zeros({}), 0), HasSubstr("unbind"));

  Tensor w = mt::randn({3, 4}, {.dtype = mt::kDouble}).requires_grad_(true);
  auto cols = w.unbind(1);
  (cols[0] * 2.0 + cols[3] * cols[3]).sum().backward();
  Tensor want = mt::zeros({3, 4}, {.dtype = mt::kDouble});
  {
    mt::NoGradGuard ng;
    want.select(1, 0).fill_(2.0);
    want.select(1, 3).copy_(w.select(1, 3) * 2.0);
  }
  EXPECT_TRUE(same(w.grad(), want));
}

TEST(TensorConveniences, ItemAsAScalarKeepsTheKind) {
  mt::Scalar f = mt::full({}, 2.5).item();
  EXPECT_TRUE(f.is_floating());
  EXPECT_EQ(f.to_double(), 2.5);
  mt::Scalar i = mt::full({1}, int64_t(1) << 60, {.dtype = mt::kInt64}).item();
  EXPECT_FALSE(i.is_floating());
  EXPECT_EQ(i.to_int(), int64_t(1) << 60);  // exact: not through a double
  EXPECT_EQ(mt::ones({}, {.dtype = mt::kBool}).item().to_int(), 1);
  EXPECT_ERROR(mt::ones({2}).item(), HasSubstr("item"), HasSubstr("2 elements"));
}
