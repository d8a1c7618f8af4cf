// Reductions of transposed and permuted views: the CPU reduces such an input in its memory order
// (core/launch.cpp in_memory_order: a reduction over x.t()'s rows is one over the columns of x,
// no transposing copy) wherever the kept dims keep their order. Each result must match the same
// reduction of a contiguous copy: exactly for max / min / argmax and integer sums, within
// rounding for float sums, means and variances (the order of the additions differs).
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace mt = mantissa;

namespace {

std::vector<double> values(const mt::Tensor& t) { return t.contiguous().to(mt::kFloat64).to_vector<double>(); }

void expect_close(const mt::Tensor& got, const mt::Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const std::vector<double> g = values(got), w = values(want);
  int64_t wrong = 0;
  for (size_t i = 0; i < g.size(); ++i)
    wrong += std::isnan(w[i]) ? !std::isnan(g[i]) : !(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  EXPECT_EQ(wrong, 0) << what << " (" << g.size() << " results)";
}

using View = std::function<mt::Tensor(const mt::Tensor&)>;
struct Case {
  std::string name;
  mt::Shape shape;
  View view;
  std::vector<int64_t> dims;
};

}  // namespace

TEST(ReduceViews, ReductionsOfPermutedViewsMatchContiguousCopies) {
  mt::manual_seed(12);
  const std::vector<Case> cases = {
      {"x^T over its rows", {300, 70}, [](const mt::Tensor& x) { return x.t(); }, {1}},
      {"x^T over its columns", {300, 70}, [](const mt::Tensor& x) { return x.t(); }, {0}},
      {"permute {2, 0, 1} over {0, 2}",
       {6, 50, 9},
       [](const mt::Tensor& x) {
         return x.permute({2, 0, 1});
       },
       {0, 2}},
      {"permute {0, 2, 1} over {1}",
       {4, 33, 65},
       [](const mt::Tensor& x) {
         return x.permute({0, 2, 1});
       },
       {1}},
      {"permute {1, 0, 2} over {2} (kept dims out of order)",
       {5, 7, 40},
       [](const mt::Tensor& x) {
         return x.permute({1, 0, 2});
       },
       {2}},
      {"x^T with a size-1 dim", {1, 64}, [](const mt::Tensor& x) { return x.t(); }, {0}},
      {"x^T over all dims", {40, 30}, [](const mt::Tensor& x) { return x.t(); }, {0, 1}},
  };
  for (const Case& c : cases)
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64}) {
      mt::Tensor x = (mt::randn(c.shape) * 3).to(dt);
      const mt::Tensor v = c.view(x), vc = v.contiguous();
      const mt::Shape dims(c.dims.begin(), c.dims.end());
      const double tol = dt == mt::kBFloat16 ? 1e-2 : dt == mt::kFloat32 ? 1e-5 : 1e-12;
      const std::string what = c.name + ", " + mt::dtype_name(dt);
      for (bool keepdim : {false, true}) {
        expect_close(mt::sum(v, dims, keepdim), mt::sum(vc, dims, keepdim), tol, "sum of " + what);
        expect_close(mt::mean(v, dims, keepdim), mt::mean(vc, dims, keepdim), tol, "mean of " + what);
        expect_close(mt::amax(v, dims, keepdim), mt::amax(vc, dims, keepdim), 0, "amax of " + what);
        expect_close(mt::amin(v, dims, keepdim), mt::amin(vc, dims, keepdim), 0, "amin of " + what);
        expect_close(mt::var(v, dims, 1, keepdim), mt::var(vc, dims, 1, keepdim), tol * 10, "var of " + what);
      }
      if (c.dims.size() == 1) {
        expect_close(mt::argmax(v, c.dims[0]), mt::argmax(vc, c.dims[0]), 0, "argmax of " + what);
        const mt::ValuesIndices m = mt::min(v, c.dims[0], true), mc = mt::min(vc, c.dims[0], true);
        expect_close(m.values, mc.values, 0, "min values of " + what);
        expect_close(m.indices, mc.indices, 0, "min indices of " + what);
      }
    }
}

TEST(ReduceViews, IntegerSumsNaNAndEmptyViews) {
  mt::manual_seed(13);
  const mt::Tensor i = mt::randint(-1000, 1000, {90, 70});
  expect_close(mt::sum(i.t(), {1}), mt::sum(i.t().contiguous(), {1}), 0, "int64 sum of x^T");
  mt::Tensor x = mt::randn({64, 80});
  x.select(0, 3).select(0, 5).fill_(std::numeric_limits<double>::quiet_NaN());
  // x^T's row 5 holds the NaN: its max, sum and argmax are NaN / NaN / the NaN's place (3).
  const std::vector<double> m = values(mt::amax(x.t(), {1})), s = values(mt::sum(x.t(), {1}));
  EXPECT_TRUE(std::isnan(m[5]) && std::isnan(s[5]));
  EXPECT_FALSE(std::isnan(m[4]) || std::isnan(s[4]));
  EXPECT_EQ(mt::argmax(x.t(), 1).to_vector<int64_t>()[5], 3);
  const mt::Tensor e = mt::zeros({0, 6});
  expect_close(mt::sum(e.t(), {1}), mt::zeros({6}), 0, "sum over an empty dim of x^T");
}

TEST(ReduceViews, GradientsOfReductionsOfTransposedViews) {
  mt::manual_seed(14);
  const mt::Tensor x = mt::randn({12, 20}, {.dtype = mt::kFloat64}).requires_grad_();
  const mt::Tensor x2 = x.detach().t().contiguous().requires_grad_();
  const mt::Tensor g = mt::autograd::grad({mt::var(x.t(), {1}).sum()}, {x})[0];
  const mt::Tensor g2 = mt::autograd::grad({mt::var(x2, {1}).sum()}, {x2})[0];
  expect_close(g.t(), g2, 1e-12, "d var(x^T) / dx");
}
