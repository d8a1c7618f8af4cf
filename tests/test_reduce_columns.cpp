// Reductions over a run of dims followed by kept dims (dim 0 of [N, C], the middle dim of
// [B, T, C], dims {1, 2} of [A, B, C, D]) read the input in place on the CPU
// (launch::reduction_rows' column view); the reference is the same reduction of the input
// permuted so that the reduced dims are last and made contiguous (the row kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "autograd/gradcheck.h"
#include "test_util.h"

namespace mt = mantissa;
using mt::Tensor;

namespace {

// x with `dims` (one sorted run) moved last, contiguous.
Tensor dims_last(const Tensor& x, const mt::Shape& dims) {
  mt::Shape perm;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  for (int64_t d : dims) perm.push_back(d);
  return x.permute(perm).contiguous();
}

mt::Shape last_dims(const Tensor& x, size_t n) {
  mt::Shape d;
  for (size_t i = 0; i < n; ++i) d.push_back(x.dim() - int64_t(n) + int64_t(i));
  return d;
}

// Values with ties, NaN and -inf at a few places, in the dtype.
Tensor sample(const mt::Shape& shape, mt::DType dt, bool specials) {
  Tensor x = mt::randint(-4, 5, shape).to(mt::kFloat64) * 0.75;
  if (specials && mt::is_floating(dt)) {
    std::vector<double> v = x.to_vector<double>();
    for (size_t i = 7; i < v.size(); i += 97) v[i] = NAN;
    for (size_t i = 3; i < v.size(); i += 61) v[i] = -INFINITY;
    x = mt::from_vector(v, shape, {.dtype = mt::kFloat64});
  }
  return x.to(dt);
}

struct Layout {
  mt::Shape shape;
  mt::Shape dims;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> l = {
      {{300, 37}, {0}},
      {{5, 300, 37}, {1}},
      {{4, 6, 9, 70}, {1, 2}},
      {{3, 2, 600}, {0, 1}},
      {{2, 1, 513}, {0}},
      {{7, 40, 2}, {1}},
      // Past one tile of the column kernels (1024 columns x 256 rows): tiles merged in order.
      {{600, 1100}, {0}},
      {{2, 520, 3, 5}, {1}},
  };
  return l;
}

void expect_same(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<double> g = got.to(mt::kFloat64).to_vector<double>(), w = want.to(mt::kFloat64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " element " << i;
    } else if (std::isinf(w[i])) {
      EXPECT_EQ(g[i], w[i]) << what << " element " << i;
    } else {
      EXPECT_NEAR(g[i], w[i], tol * std::max(1.0, std::fabs(w[i]))) << what << " element " << i;
    }
  }
}

// One layout in one dtype: x (NaN, -inf and ties among its values), its copy r with the reduced
// dims last (over rd), a description and the sums' tolerance; sum, amax and amin of x already
// checked against the row kernels' results on r.
struct RowCase {
  Tensor x, r;
  mt::Shape rd;
  std::string what;
  double tol;
};
RowCase checked_against_rows(const Layout& l, mt::DType dt) {
  const Tensor x = sample(l.shape, dt, true);
  const Tensor r = dims_last(x, l.dims);
  const mt::Shape rd = last_dims(r, l.dims.size());
  const std::string what = x.shape_str() + " over " + ::testing::PrintToString(l.dims) + " " + mt::dtype_name(dt);
  const double tol = mt::is_floating(dt) ? (dt == mt::kFloat64 ? 1e-12 : 1e-5) : 0;
  expect_same(mt::sum(x, l.dims), mt::sum(r, rd), tol, "sum " + what);
  expect_same(mt::amax(x, l.dims), mt::amax(r, rd), 0, "amax " + what);
  expect_same(mt::amin(x, l.dims), mt::amin(r, rd), 0, "amin " + what);
  return {x, r, rd, what, tol};
}

}  // namespace

TEST(ReduceColumns, MatchTheRowKernels) {
  mt::manual_seed(3);
  for (const Layout& l : layouts()) {
    for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kBFloat16, mt::kFloat16, mt::kInt64, mt::kInt32}) {
      const auto [x, r, rd, what, tol] = checked_against_rows(l, dt);
      if (l.dims.size() == 1) {
        const int64_t d = l.dims[0];
        expect_same(mt::argmax(x, d), mt::argmax(r, -1), 0, "argmax " + what);
        expect_same(mt::argmin(x, d), mt::argmin(r, -1), 0, "argmin " + what);
        expect_same(mt::max(x, d).values, mt::max(r, -1).values, 0, "max " + what);
        expect_same(mt::max(x, d).indices, mt::max(r, -1).indices, 0, "max indices " + what);
        // Products that stay in range, within the sum's tolerance: the row kernel multiplies in
        // vector lanes (as PyTorch's), the column kernel row after row.
        const Tensor small = (x.to(mt::kFloat64) * 0 + 1.25).to(dt);
        if (mt::is_floating(dt))
          expect_same(mt::prod(small, d), mt::prod(dims_last(small, l.dims), -1), tol, "prod " + what);
      }
      if (mt::is_floating(dt)) {
        const Tensor clean = sample(l.shape, dt, false);
        const Tensor rc = dims_last(clean, l.dims);
        // The two kernels sum in different orders: their fp32 results may round to neighbouring
        // fp16/bf16 values (var of values spaced 0.75 apart is not exact, unlike the sums).
        const double var_tol = dt == mt::kFloat16 ? 1e-3 : dt == mt::kBFloat16 ? 8e-3 : tol * 10;
        expect_same(mt::var(clean, l.dims), mt::var(rc, rd), var_tol, "var " + what);
        expect_same(mt::mean(clean, l.dims), mt::mean(rc, rd), tol, "mean " + what);
      }
    }
  }
}

// Several runs of reduced dims ({0, 2, 3} of [N, C, H, W]) are reduced a run at a time, the last
// run first, without a transposing copy (launch::reduce, reduce_in_stages) for max / min and for
// the sums of full-width types; the reference is the one-pass reduction of the permuted copy.
// Size-1 reduced dims, keepdim, a permuted input whose memory order keeps the kept dims in order
// (staged) and one that does not (the copy), NaN and -inf, integers (int64 sums of int32), and
// bf16 (whose sums keep the copy).
TEST(ReduceStages, SeveralRunsMatchTheRowKernels) {
  mt::manual_seed(9);
  const std::vector<Layout> staged = {
      {{16, 3, 5, 7}, {0, 2, 3}}, {{4, 6, 9, 70}, {0, 2}},  {{2, 3, 4, 5, 6}, {0, 2, 4}}, {{3, 1, 4, 5}, {0, 1, 3}},
      {{5, 2, 1, 300}, {0, 2}},   {{2, 600, 3, 2}, {1, 3}}, {{7, 1, 1, 9}, {0, 2}},       {{2, 3, 4, 5}, {0, 1, 3}},
  };
  for (const Layout& l : staged) {
    for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kBFloat16, mt::kInt64, mt::kInt32}) {
      const auto [x, r, rd, what, tol] = checked_against_rows(l, dt);
      // keepdim: the reduced dims stay as 1 in their places.
      Tensor kept = mt::sum(x, l.dims, true);
      mt::Shape want_shape = x.sizes();
      for (int64_t d : l.dims) want_shape[size_t(d)] = 1;
      EXPECT_EQ(kept.sizes(), want_shape) << what;
      expect_same(kept.reshape(mt::sum(r, rd).sizes()), mt::sum(r, rd), tol, "sum keepdim " + what);
      if (mt::is_floating(dt)) {
        const Tensor clean = sample(l.shape, dt, false);
        expect_same(mt::mean(clean, l.dims), mt::mean(dims_last(clean, l.dims), rd), tol, "mean " + what);
      }
    }
  }
  // Permuted inputs: [2, 3, 4, 5] seen as [5, 4, 3, 2] and as [2, 4, 5, 3].
  const Tensor base = sample({2, 3, 4, 5}, mt::kFloat32, true);
  const Tensor reversed = base.permute({3, 2, 1, 0});  // kept dims 0, 2 lie in reverse memory order
  const Tensor rolled = base.permute({0, 2, 3, 1});    // reduce {0, 1, 2}: memory order {0, 2, 3} of base
  for (const auto& [x, dims] : std::vector<std::pair<Tensor, mt::Shape>>{
           {reversed, {1, 3}}, {rolled, {0, 1, 2}}, {rolled, {0, 2}}, {reversed, {0, 2}}}) {
    const Tensor c = x.contiguous();
    const std::string what = "permuted " + x.shape_str() + " over " + ::testing::PrintToString(dims);
    expect_same(mt::sum(x, dims), mt::sum(c, dims), 1e-5, "sum " + what);
    expect_same(mt::amax(x, dims), mt::amax(c, dims), 0, "amax " + what);
    expect_same(mt::amin(x, dims, true), mt::amin(c, dims, true), 0, "amin keepdim " + what);
  }
  // Bool sums stage in int64; empty inputs keep the identity.
  const Tensor b = mt::gt(mt::randn({6, 5, 7}), mt::scalar_tensor(0.0));
  expect_same(mt::sum(b, {0, 2}), mt::sum(dims_last(b, {0, 2}), {1, 2}), 0, "bool sum");
  EXPECT_EQ(mt::sum(mt::zeros({0, 3, 4}), {0, 2}).to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

// bf16 rows are reduced as 32-bit word pairs (core/cpu/reduce.cpp, kPairRows): odd lengths, rows
// starting at odd elements, NaN in either half of a word and ties give what the fp32 copy gives.
TEST(ReduceRows, Bf16WordPairsMatchTheFp32Copy) {
  mt::manual_seed(4);
  for (int64_t n : {1, 2, 3, 5, 7, 9, 64, 1023, 1025, 2051}) {
    const Tensor x = sample({3, n}, mt::kBFloat16, true), f = x.to(mt::kFloat32);
    const std::string what = x.shape_str();
    auto bf = [](const Tensor& t) { return t.to(mt::kBFloat16); };
    // Multiples of 0.75 add exactly in fp32, so the sums agree in any order.
    expect_same(mt::sum(x, {1}), bf(mt::sum(f, {1})), 0, "sum " + what);
    expect_same(mt::amax(x, {1}), bf(mt::amax(f, {1})), 0, "amax " + what);
    expect_same(mt::amin(x, {1}), bf(mt::amin(f, {1})), 0, "amin " + what);
    expect_same(mt::max(x, 1).values, bf(mt::max(f, 1).values), 0, "max " + what);
    expect_same(mt::max(x, 1).indices, mt::max(f, 1).indices, 0, "max indices " + what);
    expect_same(mt::argmin(x, 1), mt::argmin(f, 1), 0, "argmin " + what);
    const Tensor clean = sample({3, n}, mt::kBFloat16, false), fc = clean.to(mt::kFloat32);
    expect_same(mt::mean(clean, {1}), bf(mt::mean(fc, {1})), 0, "mean " + what);
    if (n > 1) expect_same(mt::var(clean, {1}), bf(mt::var(fc, {1})), 8e-3, "var " + what);
  }
}

TEST(ReduceColumns, BoolAndUint8SumsAreInt64) {
  Tensor b = mt::gt(mt::randn({64, 33}), mt::scalar_tensor(0.0));
  Tensor u = mt::randint(0, 255, {64, 33}).to(mt::kUInt8);
  for (const Tensor& x : {b, u}) {
    Tensor s = mt::sum(x, {0});
    EXPECT_EQ(s.dtype(), mt::kInt64);
    expect_same(s, mt::sum(x.t().contiguous(), {1}), 0, "sum " + std::string(mt::dtype_name(x.dtype())));
  }
}

TEST(ReduceColumns, VarGradientOverDimZero) {
  Tensor x = mt::randn({40, 6}, {.dtype = mt::kFloat64}).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) { return mt::var(in[0], {0}); };
  EXPECT_TRUE(mt::autograd::gradcheck(f, {x}));
}

// Column var reads its rows once past the first sub-chunk, as deviations from the mean so far
// (core/cpu/reduce.cpp, var_mean_columns): columns with a large offset, a drift down the rows
// (sorted data: each sub-chunk's mean far from the running one), an outlier in the first row and
// an inf or NaN part way down keep fp32 var within a few ulp of the float64 result (the two-pass
// form before it was 1e-4 off on the offset columns).
TEST(ReduceColumns, OnePassVarMatchesFloat64) {
  mt::manual_seed(5);
  const int64_t rows = 1000, cols = 70;  // several sub-chunks and tiles of 256 rows
  std::vector<double> v(size_t(rows * cols));
  const std::vector<double> noise = mt::randn({rows, cols}, {.dtype = mt::kFloat64}).to_vector<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double z = noise[size_t(r * cols + c)];
      double x = z;
      if (c % 5 == 1) x = 1e4 + z;                     // offset far from the spread
      if (c % 5 == 2) x = double(r) * 0.5 + 0.01 * z;  // drift: sorted down the column
      if (c % 5 == 3 && r == 0) x = 1e5;               // an outlier in the first row
      if (c % 5 == 4) x = -3e3 + 1e-2 * z;             // tiny spread at an offset
      v[size_t(r * cols + c)] = x;
    }
  v[size_t(600 * cols + 10)] = INFINITY;  // column 10 (a plain one): inf past the first sub-chunk
  v[size_t(300 * cols + 11)] = NAN;
  const Tensor x64 = mt::from_vector(v, {rows, cols}, {.dtype = mt::kFloat64});
  const Tensor x32 = x64.to(mt::kFloat32);
  const std::vector<double> want = mt::var(x64, {0}).to_vector<double>();
  const std::vector<double> got = mt::var(x32, {0}).to(mt::kFloat64).to_vector<double>();
  const std::vector<double> want_mean = mt::mean(x64, {0}).to_vector<double>();
  const std::vector<double> got_mean = mt::mean(x32, {0}).to(mt::kFloat64).to_vector<double>();
  // The reference: the float64 var of the fp32-rounded input, so only the kernel's error counts.
  const std::vector<double> want_rounded = mt::var(x32.to(mt::kFloat64), {0}).to_vector<double>();
  for (int64_t c = 0; c < cols; ++c) {
    const size_t i = size_t(c);
    if (c == 10 || c == 11) {
      EXPECT_TRUE(std::isnan(got[i])) << "column " << c;
      EXPECT_EQ(std::isnan(got_mean[i]), std::isnan(want_mean[i])) << "column " << c;
      EXPECT_EQ(std::isinf(got_mean[i]), std::isinf(want_mean[i])) << "column " << c;
      continue;
    }
    // An outlier as the first sub-chunk's shift: the bound is eps * 16 (its rows) there.
    const double tol = c % 5 == 3 ? 4e-6 : 4e-7;
    EXPECT_NEAR(got[i], want_rounded[i], tol * want_rounded[i]) << "column " << c << " (float64 " << want[i] << ")";
    EXPECT_NEAR(got_mean[i], want_mean[i], 1e-6 * std::max(1.0, std::fabs(want_mean[i]))) << "column " << c;
  }
}

// Column max and min without the index take the value alone (four rows per pass, plain compares)
// unless a tile holds a NaN: equal values keep the first (-0 before +0 and the reverse, as the row
// scan), a NaN in row 0, in the four-row passes or in the last rows wins, and integers too.
TEST(ReduceColumns, ExtremeValuesKeepTheFirstOfEqualsAndNaN) {
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64}) {
    for (int64_t rows : {1, 2, 5, 9, 300}) {
      std::vector<double> v(size_t(rows * 6), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        v[size_t(r * 6 + 0)] = r == 0 ? -0.0 : 0.0;  // -0 first
        v[size_t(r * 6 + 1)] = r == 0 ? 0.0 : -0.0;  // +0 first
        v[size_t(r * 6 + 2)] = double(r % 7) - 3.0;
        v[size_t(r * 6 + 3)] = r == rows - 1 ? NAN : double(r);
        v[size_t(r * 6 + 4)] = r == 0 ? NAN : double(r);
        v[size_t(r * 6 + 5)] = r == rows / 2 ? NAN : -double(r);
      }
      const Tensor x = mt::from_vector(v, {rows, 6}, {.dtype = mt::kFloat64}).to(dt);
      const std::string what = std::string(mt::dtype_name(dt)) + " rows " + std::to_string(rows);
      for (bool is_max : {true, false}) {
        const Tensor got = is_max ? mt::amax(x, {0}) : mt::amin(x, {0});
        const Tensor want = is_max ? mt::amax(x.t().contiguous(), {1}) : mt::amin(x.t().contiguous(), {1});
        const std::vector<double> g = got.to(mt::kFloat64).to_vector<double>();
        const std::vector<double> w = want.to(mt::kFloat64).to_vector<double>();
        for (size_t c = 0; c < 6; ++c) {
          if (std::isnan(w[c])) {
            EXPECT_TRUE(std::isnan(g[c])) << what << " column " << c;
          } else {
            EXPECT_EQ(g[c], w[c]) << what << " column " << c;
            EXPECT_EQ(std::signbit(g[c]), std::signbit(w[c])) << what << " column " << c;
          }
        }
        if (rows > 1) {
          EXPECT_EQ(std::signbit(g[0]), true) << what;  // the first of -0 and +0
        }
      }
    }
  }
  // Without a NaN (the fast form throughout): odd column counts (masked lanes, the last column),
  // two column blocks, rows past one tile.
  for (const mt::Shape& shape : {mt::Shape{300, 37}, mt::Shape{70, 1100}, mt::Shape{9, 33}}) {
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
      const Tensor x = sample(shape, dt, false) + mt::randn(shape).to(dt);
      expect_same(mt::amax(x, {0}), mt::amax(x.t().contiguous(), {1}), 0, "amax " + x.shape_str());
      expect_same(mt::amin(x, {0}), mt::amin(x.t().contiguous(), {1}), 0, "amin " + x.shape_str());
    }
  }
  const Tensor i = mt::from_vector(std::vector<double>{3, 9, -2, 7, 9, 1, 0, 4, 11}, {3, 3}).to(mt::kInt32);
  EXPECT_EQ(mt::amax(i, {0}).to(mt::kFloat64).to_vector<double>(), (std::vector<double>{7, 9, 11}));
  EXPECT_EQ(mt::amin(i, {0}).to(mt::kFloat64).to_vector<double>(), (std::vector<double>{0, 4, -2}));
}

// bf16 row var on AVX-512 reads each row once (core/cpu/reduce.cpp, bf16_row_moments: blocks of
// 1024 shifted by their first value): lengths around the 64-element loop and the block, offset
// rows, an outlier first, and rows with inf or NaN give the float64 var of the same values
// within a bf16 rounding; the other builds run the two-pass form through the same test.
TEST(ReduceRows, Bf16VarMatchesFloat64) {
  mt::manual_seed(6);
  for (int64_t n : {1, 2, 63, 64, 65, 130, 1024, 1025, 3000}) {
    const Tensor z = mt::randn({5, n}, {.dtype = mt::kFloat64});
    std::vector<double> v = z.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      v[size_t(n + i)] += 300.0;                                   // an offset 300x the spread
      v[size_t(2 * n + i)] = i == 0 ? 1e4 : v[size_t(2 * n + i)];  // an outlier first
      if (i == n / 2) v[size_t(3 * n + i)] = INFINITY;
      if (i == n - 1) v[size_t(4 * n + i)] = NAN;
    }
    const Tensor x = mt::from_vector(v, {5, n}, {.dtype = mt::kFloat64}).to(mt::kBFloat16);
    const std::vector<double> want = mt::var(x.to(mt::kFloat64), {1}).to_vector<double>();
    const std::vector<double> got = mt::var(x, {1}).to(mt::kFloat64).to_vector<double>();
    for (size_t r = 0; r < 5; ++r) {
      const std::string what = "row " + std::to_string(r) + " of " + std::to_string(n);
      if (std::isnan(want[r])) {
        EXPECT_TRUE(std::isnan(got[r])) << what;
      } else {
        EXPECT_NEAR(got[r], want[r], std::ldexp(std::fabs(want[r]), -8)) << what;
      }
    }
  }
}

// The column kernels at the edges: no rows (var NaN, amax an error as torch's), one row, a
// non-contiguous input (a transpose, a strided slice), an integer input (var refuses it), and
// NaN in a bf16 column past the fast path's first tile.
TEST(ReduceColumns, EdgeInputs) {
  const Tensor empty = mt::zeros({0, 5});
  const Tensor v0 = mt::var(empty, {0});
  ASSERT_EQ(v0.sizes(), (mt::Shape{5}));
  for (double v : v0.to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_THROW(mt::amax(empty, {0}), mt::Error);
  const Tensor one = mt::from_vector(std::vector<double>{1, -2, 3}, {1, 3});
  EXPECT_EQ(mt::amax(one, {0}).to_vector<double>(), (std::vector<double>{1, -2, 3}));
  for (double v : mt::var(one, {0}).to_vector<double>()) EXPECT_TRUE(std::isnan(v));  // 0 degrees of freedom
  mt::manual_seed(8);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    const Tensor base = mt::randn({70, 300}).to(dt);
    for (const Tensor& x : {base.t(), base.slice(1, 0, 300, 3)}) {  // [300, 70] transposed; [70, 100] strided
      const Tensor c = x.contiguous();
      expect_same(mt::amax(x, {0}), mt::amax(c, {0}), 0, "amax non-contiguous");
      expect_same(mt::var(x, {0}), mt::var(c, {0}), dt == mt::kFloat32 ? 1e-5 : 8e-3, "var non-contiguous");
    }
    std::vector<double> v = mt::randn({600, 40}).to_vector<double>();
    v[size_t(400 * 40 + 7)] = NAN;  // column 7, second tile of 256 rows
    const Tensor x = mt::from_vector(v, {600, 40}, {.dtype = mt::kFloat64}).to(dt);
    const std::vector<double> m = mt::amax(x, {0}).to(mt::kFloat64).to_vector<double>();
    for (size_t c = 0; c < 40; ++c) EXPECT_EQ(std::isnan(m[c]), c == 7) << "column " << c;
  }
  EXPECT_THROW(mt::var(mt::ones({4, 3}).to(mt::kInt32), {0}), mt::Error);
}
