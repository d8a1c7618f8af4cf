// Elementwise ops and casts on views a user's layer makes without a copy: transposes and
// permutes (read across their rows; the CPU kernels run them in the input's memory order and
// reorder with the tiled copy, core/cpu/elementwise.cpp), narrows and chunks of the last dim
// (unit-stride rows), and the layouts next to those cases (size-1 dims, a strided slice that is
// not dense, empty and 0-dim tensors). Each result must equal, bit for bit, the same op on a
// contiguous copy of the view (the contiguous kernels), NaN and inf included.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu/streaming_store.h"
#include "core/elementwise_math.h"

namespace mt = mantissa;

namespace {

// The values of t as doubles (every dtype used here converts exactly).
std::vector<double> values(const mt::Tensor& t) { return t.contiguous().to(mt::kFloat64).to_vector<double>(); }

// got (an op's result: contiguous) equals want bit for bit.
void expect_same(const mt::Tensor& got, const mt::Tensor& want, const std::string& what, bool contiguous = true) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (contiguous) {
    EXPECT_TRUE(got.is_contiguous()) << what;
  }
  const std::vector<double> g = values(got), w = values(want);
  int64_t wrong = 0;
  for (size_t i = 0; i < g.size(); ++i)
    wrong += std::isnan(w[i]) ? !std::isnan(g[i]) : std::bit_cast<uint64_t>(g[i]) != std::bit_cast<uint64_t>(w[i]);
  EXPECT_EQ(wrong, 0) << what << " (" << g.size() << " elements)";
}

// A tensor of `shape` in dtype dt with NaN, inf and -0 among its values (floating dtypes).
mt::Tensor sample(const mt::Shape& shape, mt::DType dt) {
  mt::Tensor x = (mt::randn(shape) * 3).to(dt);
  if (mt::is_floating(dt) && x.numel() >= 4) {
    mt::Tensor flat = x.view({-1});
    flat.select(0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
    flat.select(0, 2).fill_(std::numeric_limits<double>::infinity());
    flat.select(0, x.numel() - 1).fill_(-0.0);
  }
  return x;
}

using View = std::function<mt::Tensor(const mt::Tensor&)>;
struct Case {
  std::string name;
  mt::Shape shape;
  View view;
};

// Views of each kind: permuted dense ones (the reordering path, with 64 x 64 blocks and partial
// edges), unit-stride rows, and layouts that take neither path.
std::vector<Case> cases() {
  return {
      {"t of [37, 53]", {37, 53}, [](const mt::Tensor& x) { return x.t(); }},
      {"t of [130, 70]", {130, 70}, [](const mt::Tensor& x) { return x.t(); }},
      {"permute {2, 0, 1} of [5, 7, 9]",
       {5, 7, 9},
       [](const mt::Tensor& x) {
         return x.permute({2, 0, 1});
       }},
      {"head split of [2, 33, 3, 8]",
       {2, 33, 3, 8},
       [](const mt::Tensor& x) {
         return x.permute({0, 2, 3, 1});
       }},
      {"t of [1, 33] (a size-1 dim)", {1, 33}, [](const mt::Tensor& x) { return x.t(); }},
      {"narrow of [17, 50] (rows of 40)", {17, 50}, [](const mt::Tensor& x) { return x.narrow(1, 3, 40); }},
      {"second chunk of [9, 1024]", {9, 1024}, [](const mt::Tensor& x) { return mt::chunk(x, 2, 1)[1]; }},
      {"rotary half of [4, 3, 16]", {4, 3, 16}, [](const mt::Tensor& x) { return x.narrow(2, 8, 8); }},
      {"step-2 slice, transposed (not dense)", {20, 30}, [](const mt::Tensor& x) { return x.slice(1, 0, 30, 2).t(); }},
      // One value along each long row (an expanded gradient): one block's result and a fill.
      {"expand of [4, 1] to [4, 700]",
       {4, 1},
       [](const mt::Tensor& x) {
         return x.expand({4, 700});
       }},
      {"expand of [1] to [3, 700]",
       {1},
       [](const mt::Tensor& x) {
         return x.expand({3, 700});
       }},
      {"t of [0, 5] (empty)", {0, 5}, [](const mt::Tensor& x) { return x.t(); }},
      {"0-dim", {}, [](const mt::Tensor& x) { return x; }},
  };
}

}  // namespace

// Every unary op of MT_UNARY_OPS (core/elementwise_math.h), those with more arguments at fixed
// ones: an element's result must not depend on where it falls in the kernel's loop (a vector
// body, a tail, a row of a view), so vector libm functions and their scalar forms must not mix.
std::vector<std::pair<std::string, std::function<mt::Tensor(const mt::Tensor&)>>> unary_ops() {
  std::vector<std::pair<std::string, std::function<mt::Tensor(const mt::Tensor&)>>> ops = {
      {"gelu", [](const mt::Tensor& x) { return mt::gelu(x); }},
      {"gelu_tanh", [](const mt::Tensor& x) { return mt::gelu(x, "tanh"); }},
      {"softplus", [](const mt::Tensor& x) { return mt::softplus(x, 1, 20); }},
      {"pow_scalar", [](const mt::Tensor& x) { return mt::pow(x, 2.5); }},
      {"clamp", [](const mt::Tensor& x) { return mt::clamp(x, -1, 2); }},
      {"leaky_relu", [](const mt::Tensor& x) { return mt::leaky_relu(x, 0.1); }},
      {"elu", [](const mt::Tensor& x) { return mt::elu(x, 1.5); }},
      {"smooth_l1",
       [](const mt::Tensor& x) {
         return mt::nn::functional::smooth_l1_loss(x, mt::zeros_like(x), mt::nn::Reduction::None, 0.7);
       }},
  };
#define MT_VIEW_UNARY(Enum, name, F, domain, policy, gradcheck, op) \
  MT_UNARY_IF_ONE_TENSOR(op, ops.emplace_back(#name, [](const mt::Tensor& x) { return mt::name(x); });)
  MT_UNARY_OPS(MT_VIEW_UNARY)
#undef MT_VIEW_UNARY
  return ops;
}

TEST(ElementwiseViews, UnaryOpsOnViewsEqualTheContiguousKernels) {
  mt::manual_seed(3);
  const auto ops = unary_ops();
  for (const Case& c : cases())
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kHalf, mt::kFloat64, mt::kInt64}) {
      const mt::Tensor v = c.view(sample(c.shape, dt));
      for (const auto& [name, op] : ops) {
        mt::Tensor want;
        try {
          want = op(v.contiguous());
        } catch (const mt::Error&) {
          continue;  // not defined for this dtype (an integer input of a floating-only op)
        }
        expect_same(op(v), want, name + " of " + c.name + ", " + mt::dtype_name(dt));
      }
    }
}

TEST(ElementwiseViews, CastsOfViewsEqualTheContiguousCasts) {
  mt::manual_seed(4);
  const std::vector<std::pair<mt::DType, mt::DType>> casts = {
      {mt::kFloat32, mt::kBFloat16}, {mt::kBFloat16, mt::kFloat32}, {mt::kFloat32, mt::kHalf},
      {mt::kHalf, mt::kFloat32},     {mt::kFloat64, mt::kFloat32},  {mt::kInt64, mt::kFloat32},
      {mt::kFloat32, mt::kInt32},    {mt::kBool, mt::kBFloat16},    {mt::kBFloat16, mt::kFloat64}};
  for (const Case& c : cases())
    for (const auto& [from, to] : casts) {
      // (no NaN or inf into an integer type: PyTorch leaves that undefined)
      const mt::Tensor x = from == mt::kBool                               ? mt::gt(mt::randn(c.shape), mt::zeros({}))
                           : !mt::is_floating(to) && mt::is_floating(from) ? (mt::randn(c.shape) * 100).to(from)
                                                                           : sample(c.shape, from);
      const mt::Tensor v = c.view(x);
      expect_same(v.to(to), v.contiguous().to(to),
                  std::string(mt::dtype_name(from)) + " -> " + mt::dtype_name(to) + " of " + c.name);
    }
}

TEST(ElementwiseViews, BinaryOpsWithPermutedOperandsEqualTheContiguousKernels) {
  mt::manual_seed(5);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64, mt::kInt64}) {
    const mt::Tensor a = sample({70, 130}, dt), b = sample({130, 70}, dt), row = sample({1, 70}, dt);
    const mt::Tensor at = a.t(), ac = a.t().contiguous();
    const std::string d = mt::dtype_name(dt);
    expect_same(at * b, ac * b, "a^T * b, " + d);
    expect_same(b - at, b - ac, "b - a^T, " + d);
    expect_same(at + at, ac + ac, "a^T + a^T, " + d);
    expect_same(at * row, ac * row, "a^T * a broadcast row, " + d);
    expect_same(mt::maximum(at, b.t().t()), mt::maximum(ac, b), "maximum(a^T, b), " + d);
    // Permuted 4-D operands against a broadcast table (rotary embeddings' q * cos).
    const mt::Tensor q = sample({2, 6, 3, 8}, dt), table = sample({6, 8}, dt);
    const mt::Tensor qp = q.permute({0, 2, 1, 3}), qt = q.permute({0, 2, 3, 1}).transpose(-2, -1);
    expect_same(qp * table, qp.contiguous() * table, "head-split q * table, " + d);
    expect_same(qt * table, qt.contiguous() * table, "transposed q * table, " + d);
    // Mixed dtypes: the bf16 operand is cast to fp32 first.
    if (dt == mt::kBFloat16) {
      const mt::Tensor f = sample({130, 70}, mt::kFloat32);
      expect_same(at * f, ac * f, "bf16 a^T * fp32 b");
    }
  }
  // Layouts that are not permutations (strided slices, both operands across their rows) and a
  // backward functor with a vector form (silu's).
  const mt::Tensor x = sample({40, 64}, mt::kFloat32), g = sample({40, 64}, mt::kFloat32);
  const mt::Tensor xs = x.slice(1, 0, 64, 2).t(), gs = g.slice(1, 1, 64, 2).t();
  expect_same(xs * gs, xs.contiguous() * gs.contiguous(), "strided slices, fp32");
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    const mt::Tensor xd = xs.to(dt).contiguous().requires_grad_(), gd = gs.to(dt);
    const mt::Tensor y = mt::silu(xd);
    const mt::Tensor strided = mt::autograd::grad({y}, {xd}, {gd}, true)[0];
    const mt::Tensor contiguous = mt::autograd::grad({y}, {xd}, {gd.contiguous()})[0];
    expect_same(strided, contiguous, std::string("silu's backward of a strided gradient, ") + mt::dtype_name(dt));
  }
  const mt::Tensor e = mt::ones({0, 4});
  expect_same(e.t() * mt::ones({4, 0}), mt::ones({4, 0}), "empty");
}

// A column broadcast over short rows ([N, k] op [N, 1] and [N, 1] op [N, k]: the rows' own loop
// with k a constant for 16, 32 and 64, and for + - * / with any k) gives the bits of the same op
// on the column expanded to a contiguous copy, for rows adjacent and rows of a narrow (stride
// 2k), lengths with no constant (24, 128, 203), and rows that are one row expanded ([B, 1, k]
// over [B, T, k] against [B, T, 1]: the row's stride 0 between rows).
TEST(ElementwiseViews, ColumnOverShortRowsEqualsTheExpandedColumn) {
  mt::manual_seed(31);
  using Op = mt::Tensor (*)(const mt::Tensor&, const mt::Tensor&);
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::add(a, b); }},
      {"sub", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::sub(a, b); }},
      {"mul", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::mul(a, b); }},
      {"div", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::div(a, b); }},
      {"maximum", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::maximum(a, b); }},
      {"pow", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::pow(a, b); }},
  };
  for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kInt64, mt::kBFloat16})
    for (int64_t k : {16, 32, 64, 24, 128, 203})
      for (bool narrow : {false, true}) {
        const mt::Tensor whole = (mt::rand({37, 2 * k}) * 3.0 + 0.5).to(dt);
        const mt::Tensor rows = narrow ? whole.narrow(1, 0, k) : whole.narrow(1, 0, k).contiguous();
        const mt::Tensor column = (mt::rand({37, 1}) * 2.0 + 0.5).to(dt), wide = column.expand({37, k}).contiguous();
        for (const auto& [name, op] : ops) {
          if (name == "div" && dt == mt::kInt64) continue;
          const std::string what =
              name + ", k " + std::to_string(k) + (narrow ? " narrow, " : ", ") + mt::dtype_name(dt);
          expect_same(op(rows, column), op(rows.contiguous(), wide), what + ": rows op column");
          expect_same(op(column, rows), op(wide, rows.contiguous()), what + ": column op rows");
        }
        const mt::Tensor row = (mt::rand({2, 1, k}) * 3.0 + 0.5).to(dt), spread = row.expand({2, 5, k});
        const mt::Tensor col = (mt::rand({2, 5, 1}) * 2.0 + 0.5).to(dt), col_wide = col.expand({2, 5, k}).contiguous();
        for (const auto& [name, op] : ops) {
          if (name == "div" && dt == mt::kInt64) continue;
          const std::string what = name + ", k " + std::to_string(k) + ", " + mt::dtype_name(dt);
          expect_same(op(spread, col), op(spread.contiguous(), col_wide), what + ": expanded row op column");
          expect_same(op(col, spread), op(col_wide, spread.contiguous()), what + ": column op expanded row");
        }
      }
}

// Every public binary op of MT_BINARY_OPS (the fused backward formulas are met through
// autograd) with a transposed, a narrowed and a strided operand, against its contiguous copy.
TEST(ElementwiseViews, EveryBinaryOpOnViewsEqualsTheContiguousKernel) {
  using Op = mt::Tensor (*)(const mt::Tensor&, const mt::Tensor&);
  const std::map<std::string, Op> ops = {
      {"add", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::add(a, b); }},
      {"sub", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::sub(a, b); }},
      {"mul", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::mul(a, b); }},
      {"div", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::div(a, b); }},
      {"maximum", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::maximum(a, b); }},
      {"minimum", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::minimum(a, b); }},
      {"pow", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::pow(a, b); }},
      {"eq", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::eq(a, b); }},
      {"ne", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::ne(a, b); }},
      {"lt", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::lt(a, b); }},
      {"le", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::le(a, b); }},
      {"gt", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::gt(a, b); }},
      {"ge", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::ge(a, b); }},
      {"logical_and", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::logical_and(a, b); }},
      {"logical_or", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::logical_or(a, b); }},
      {"add_scaled", [](const mt::Tensor& a, const mt::Tensor& b) { return mt::add(a, b, 0.5); }},
  };
#define MT_CHECK_SWEPT(Enum, name, ...) \
  EXPECT_TRUE(std::string(#name).ends_with("_backward") || ops.count(#name)) << #name << " is not swept";
  MT_BINARY_OPS(MT_CHECK_SWEPT)
#undef MT_CHECK_SWEPT
  mt::manual_seed(8);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kHalf, mt::kFloat64, mt::kInt64}) {
    // a is positive, so pow(a, b) has finite results to compare, not only NaN.
    const mt::Tensor a = mt::abs(sample({53, 37}, dt)), b = sample({37, 53}, dt), c = sample({37, 60}, dt);
    const std::vector<std::pair<std::string, mt::Tensor>> views = {
        {"t of [53, 37]", a.t()},
        {"narrow of [37, 60]", c.narrow(1, 5, 53)},
        {"step-2 slice", c.slice(1, 0, 60, 2).narrow(1, 0, 30)}};
    for (const auto& [name, op] : ops)
      for (const auto& [what, v] : views) {
        const mt::Tensor other = v.size(1) == 53 ? b : b.narrow(1, 0, 30);
        mt::Tensor want;
        try {
          want = op(v.contiguous(), other);
        } catch (const mt::Error&) {
          continue;  // not defined for this dtype
        }
        const std::string d = name + "(" + what + ", b), " + mt::dtype_name(dt);
        expect_same(op(v, other), want, d);
        expect_same(op(other, v), op(other, v.contiguous()), name + "(b, " + what + "), " + mt::dtype_name(dt));
      }
    // Both operands one value along each row of 700 (an expanded gradient times a per-channel
    // weight): one block's results and a fill; NaN, inf and -0 among the rows' values.
    const mt::Tensor ca = mt::abs(sample({5, 1}, dt)).expand({5, 700}), cb = sample({5, 1}, dt).expand({5, 700});
    for (const auto& [name, op] : ops) {
      mt::Tensor want;
      try {
        want = op(ca.contiguous(), cb.contiguous());
      } catch (const mt::Error&) {
        continue;
      }
      expect_same(op(ca, cb), want, name + " of two expanded columns, " + std::string(mt::dtype_name(dt)));
    }
  }
}

TEST(ElementwiseViews, GradientsThroughTransposedViews) {
  // The backward of a product with a transposed view receives and produces permuted layouts.
  mt::manual_seed(6);
  const mt::Tensor a = mt::randn({24, 40}).requires_grad_(), b = mt::randn({40, 24});
  const mt::Tensor y = mt::silu(a.t()) * b;
  const mt::Tensor g = mt::randn({40, 24});
  const mt::Tensor ga = mt::autograd::grad({y}, {a}, {g})[0];
  const mt::Tensor a2 = a.detach().t().contiguous().requires_grad_();
  const mt::Tensor ga2 = mt::autograd::grad({mt::silu(a2) * b}, {a2}, {g})[0];
  expect_same(ga, ga2.t(), "silu(a^T) * b, d/da", false);  // the transpose's backward: a view
}

TEST(ElementwiseViews, WhereAndMaskedFillOnTransposedViews) {
  mt::manual_seed(7);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kInt64, mt::kBool}) {
    const mt::Tensor x = dt == mt::kBool ? mt::gt(mt::randn({70, 130}), mt::zeros({})) : sample({70, 130}, dt);
    const mt::Tensor other = dt == mt::kBool ? mt::gt(mt::randn({130, 70}), mt::zeros({})) : sample({130, 70}, dt);
    const mt::Tensor mask = mt::gt(mt::randn({130, 70}), mt::zeros({})),
                     mask_t = mt::gt(mt::randn({70, 130}), mt::zeros({}));
    const std::string d = mt::dtype_name(dt);
    expect_same(mt::masked_fill(x.t(), mask, 1), mt::masked_fill(x.t().contiguous(), mask, 1),
                "masked_fill(x^T), " + d);
    expect_same(mt::masked_fill(other, mask_t.t(), 0), mt::masked_fill(other, mask_t.t().contiguous(), 0),
                "masked_fill with a transposed mask, " + d);
    expect_same(mt::where(mask_t.t(), x.t(), other), mt::where(mask_t.t().contiguous(), x.t().contiguous(), other),
                "where(c^T, x^T, y), " + d);
  }
}

TEST(ElementwiseViews, ClampOfNarrowFloatsIsTheFp32ClampRounded) {
  // bf16 / fp16 clamp computes in fp32 (bounds representable in both: the same values), NaN
  // propagates, on contiguous and transposed inputs.
  mt::manual_seed(8);
  for (mt::DType dt : {mt::kBFloat16, mt::kHalf}) {
    const mt::Tensor x = sample({33, 150}, dt);
    for (const mt::Tensor& v : {x, x.t()}) {
      expect_same(mt::clamp(v, -1.0, 1.5), mt::clamp(v.to(mt::kFloat32), -1.0, 1.5).to(dt),
                  std::string("clamp of ") + mt::dtype_name(dt));
      expect_same(mt::clamp(v, std::nullopt, 0.25), mt::clamp(v.to(mt::kFloat32), std::nullopt, 0.25).to(dt),
                  std::string("clamp max only, ") + mt::dtype_name(dt));
    }
  }
}

TEST(ElementwiseViews, FewLongRowsSplitAcrossThreadsMatchElementByElement) {
  // Operands that coalesce to one row (contiguous where) or to a few long rows (a narrow of
  // [3, 80000]) are split into pieces the threads share (core/cpu/loops.h for_each_row).
  mt::manual_seed(9);
  const int64_t n = 200001;
  const mt::Tensor c = mt::gt(mt::randn({n}), mt::zeros({})), a = mt::randn({n}), b = mt::randn({n});
  const std::vector<double> vc = values(c), va = values(a), vb = values(b), got = values(mt::where(c, a, b));
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += got[size_t(i)] != (vc[size_t(i)] != 0 ? va[size_t(i)] : vb[size_t(i)]);
  EXPECT_EQ(wrong, 0);
  const mt::Tensor x = sample({3, 80000}, mt::kBFloat16);
  for (const mt::Tensor& v : {x.narrow(1, 5, 70001), x.slice(1, 1, 80000, 2)}) {
    expect_same(-v, -v.contiguous(), "neg of 3 long rows");
    expect_same(mt::masked_fill(v, mt::gt(v, mt::zeros({})), 0),
                mt::masked_fill(v.contiguous(), mt::gt(v, mt::zeros({})), 0), "masked_fill of 3 long rows");
  }
}

TEST(ElementwiseViews, ShortRowsInBlocksEqualTheContiguousKernels) {
  // Rows of at most 64 unit-stride elements go through the vector kernels in blocks of whole
  // rows (core/cpu/loops.h for_each_short_rows): gathered where a side's rows are not adjacent,
  // scattered back where the output's are not (an in-place op on a narrow); rows of 16, 32 and
  // 64 of a plain element type (fp32, fp64, int64) straight from row to row, each with the
  // contiguous kernel of a constant length. Row counts that leave a partial block, rows of 1,
  // 16, 32, 64 (the longest) and 65 (the long-row path), a broadcast row, a head-split q
  // against a [T, E] table (rotary embeddings), and empty dims.
  mt::manual_seed(10);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kHalf, mt::kFloat64, mt::kInt64}) {
    const std::string d = mt::dtype_name(dt);
    for (int64_t len : {1, 16, 32, 64, 65}) {
      const mt::Tensor x = sample({3001, len + 7}, dt);
      const mt::Tensor v = x.narrow(1, 5, len);
      const std::string what = "rows of " + std::to_string(len) + ", " + d;
      expect_same(-v, -v.contiguous(), "neg of " + what);
      if (mt::is_floating(dt)) expect_same(mt::silu(v), mt::silu(v.contiguous()), "silu of " + what);
      const mt::Tensor w = sample({3001, len}, dt), bias = sample({len}, dt);
      expect_same(v * w, v.contiguous() * w, "narrow * contiguous, " + what);
      expect_same(v + bias, v.contiguous() + bias, "narrow + a broadcast row, " + what);
      // In place on the narrow: the result goes back to rows that are not adjacent, and the
      // columns outside the narrow keep their values.
      mt::Tensor in_place = x.clone(), want = x.clone();
      in_place.narrow(1, 5, len).mul_(w);
      want.narrow(1, 5, len).copy_(v.contiguous() * w);
      expect_same(in_place, want, "narrow *= w, " + what);
    }
    const mt::Tensor q = sample({2, 300, 4, 32}, dt), table = sample({300, 32}, dt);
    const mt::Tensor qh = q.permute({0, 2, 1, 3});
    expect_same(qh * table, qh.contiguous() * table, "head-split q * table, " + d);
    expect_same(mt::cat({-qh.narrow(3, 16, 16), qh.narrow(3, 0, 16)}, 3),
                mt::cat({-qh.contiguous().narrow(3, 16, 16), qh.contiguous().narrow(3, 0, 16)}, 3),
                "rotate_half of a head-split q, " + d);
  }
  // Many rows: the runs split across threads.
  const mt::Tensor big = sample({70000, 32}, mt::kBFloat16);
  expect_same(-big.narrow(1, 16, 16), -big.narrow(1, 16, 16).contiguous(), "neg of 70000 rows of 16");
  const mt::Tensor e = sample({0, 32}, mt::kFloat32), e2 = sample({5, 0}, mt::kFloat32);
  expect_same(-e.narrow(1, 0, 16), -e.narrow(1, 0, 16).contiguous(), "rows of 16, none of them");
  expect_same(-e2.narrow(1, 0, 0), mt::zeros({5, 0}), "rows of 0");
}

TEST(ElementwiseViews, SignOpsOfHalfFloatsOnTheirBitsEqualTheFp32OpRounded) {
  // neg, abs and relu of bf16 / fp16 work on the values' bits (core/cpu/elementwise.cpp
  // sign_bits_block): over every one of the 65536 bit patterns (subnormals, +-0, +-inf, NaNs of
  // both signs), contiguous and as a narrow, each equals the op in fp32 rounded back (NaN as NaN).
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(i);
  for (mt::DType dt : {mt::kBFloat16, mt::kHalf}) {
    const mt::Tensor x = mt::from_blob(bits.data(), {512, 128}, dt, {.dtype = dt});
    using Op = mt::Tensor (*)(const mt::Tensor&);
    const std::vector<std::pair<std::string, Op>> ops = {{"neg", [](const mt::Tensor& v) { return -v; }},
                                                         {"abs", [](const mt::Tensor& v) { return mt::abs(v); }},
                                                         {"relu", [](const mt::Tensor& v) { return mt::relu(v); }}};
    for (const auto& [name, op] : ops)
      for (const mt::Tensor& v : {x, x.narrow(1, 8, 40), x.narrow(1, 8, 16)}) {  // blocks; row by row
        const std::string what = name + " of every " + mt::dtype_name(dt) + " value";
        expect_same(op(v), op(v.to(mt::kFloat32)).to(dt), what);
        // the sign of zero: neg(+0) = -0, abs(+0) = relu(+0) = +0
        EXPECT_TRUE(std::signbit(values(op(mt::zeros({1}, {.dtype = dt})))[0]) == (name == "neg")) << what;
      }
  }
}

TEST(ElementwiseViews, ClampMatchesItsDefinitionElementByElement) {
  // clamp's vector form (core/cpu/vec_math.h) against x < lo ? lo : x > hi ? hi : x per
  // element, in fp32, bf16 and fp16: NaN propagates, -0 stays -0 at a bound of 0, +-inf clamp,
  // a missing bound leaves that side alone, and lo > hi gives hi everywhere (PyTorch's rule).
  const std::vector<float> xs = {-3.5f, -0.0f, 0.0f, 0.25f, 1.0f, 7.0f, INFINITY, -INFINITY, NAN, -1e-40f, 2.5f};
  struct Bounds {
    std::optional<double> lo, hi;
  };
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kHalf})
    for (const Bounds& b :
         std::vector<Bounds>{{0.0, 2.0}, {-1.0, 0.0}, {std::nullopt, 0.5}, {0.25, std::nullopt}, {3.0, 1.0}}) {
      std::vector<float> many;  // 37 copies: whole vectors and a tail
      for (int k = 0; k < 37; ++k) many.insert(many.end(), xs.begin(), xs.end());
      const mt::Tensor x = mt::from_vector(many).to(dt);
      const std::vector<double> in = values(x), got = values(mt::clamp(x, b.lo, b.hi));
      const double lo = b.lo.value_or(-INFINITY), hi = b.hi.value_or(INFINITY);
      int64_t wrong = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const double v = in[i];
        // each bound as the dtype holds it (all of these are exact in every dtype here)
        const double want = std::isnan(v) ? v : lo > hi ? hi : v < lo ? lo : v > hi ? hi : v;
        wrong +=
            std::isnan(want) ? !std::isnan(got[i]) : std::bit_cast<uint64_t>(got[i]) != std::bit_cast<uint64_t>(want);
      }
      EXPECT_EQ(wrong, 0) << mt::dtype_name(dt) << " clamp(" << lo << ", " << hi << ")";
    }
}

namespace {

// Sets the cache size the CPU kernels' streaming-store choice assumes while it lives (1: every
// output streamed; core/cpu/streaming_store.h), and restores the previous one.
struct StreamingCache {
  int64_t previous;
  explicit StreamingCache(int64_t bytes) : previous(mt::cpu::set_streaming_cache_bytes(bytes)) {}
  ~StreamingCache() { mt::cpu::set_streaming_cache_bytes(previous); }
};

}  // namespace

// Outputs too large for the caches are written by streaming stores through a 1 KiB stage
// (write_streamed): an unaligned head, whole lines, a partial tail, per thread. Every element
// must be the one plain stores write: unary, binary, tensor-scalar ops, casts, fills and copies,
// out of place and in place on views that start mid-line, lengths around the thread split.
TEST(ElementwiseViews, StreamedOutputsEqualThePlainStores) {
  using Op = std::function<mt::Tensor(const mt::Tensor&, const mt::Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"exp", [](const mt::Tensor& a, const mt::Tensor&) { return mt::exp(a); }},
      {"relu", [](const mt::Tensor& a, const mt::Tensor&) { return mt::relu(a); }},
      {"neg", [](const mt::Tensor& a, const mt::Tensor&) { return mt::neg(a); }},
      {"sigmoid", [](const mt::Tensor& a, const mt::Tensor&) { return mt::sigmoid(a); }},
      {"gelu", [](const mt::Tensor& a, const mt::Tensor&) { return mt::gelu(a); }},
      {"mul", [](const mt::Tensor& a, const mt::Tensor& b) { return a * b; }},
      {"add", [](const mt::Tensor& a, const mt::Tensor& b) { return a + b; }},
      {"a * 2.5", [](const mt::Tensor& a, const mt::Tensor&) { return a * 2.5; }},
      {"to fp32", [](const mt::Tensor& a, const mt::Tensor&) { return a.to(mt::kFloat32); }},
      {"to bf16", [](const mt::Tensor& a, const mt::Tensor&) { return a.to(mt::kBFloat16); }},
      {"to fp16", [](const mt::Tensor& a, const mt::Tensor&) { return a.to(mt::kHalf); }},
      {"to fp64", [](const mt::Tensor& a, const mt::Tensor&) { return a.to(mt::kFloat64); }},
      {"clone", [](const mt::Tensor& a, const mt::Tensor&) { return a.clone(); }},
      {"full_like", [](const mt::Tensor& a, const mt::Tensor&) { return mt::full_like(a, 1.75); }},
      // In place on views that start 1-5 elements into a line: the head before the first whole
      // line is written straight, and the copy's and fill's destinations are such views too.
      {"mul_ of a view at +3",
       [](const mt::Tensor& a, const mt::Tensor&) {
         mt::Tensor c = a.clone();
         c.narrow(0, 3, a.size(0) - 3).mul_(-1.5);
         return c;
       }},
      {"copy_ into a view at +1",
       [](const mt::Tensor& a, const mt::Tensor& b) {
         mt::Tensor c = b.clone();
         c.narrow(0, 1, a.size(0) - 1).copy_(a.narrow(0, 0, a.size(0) - 1));
         return c;
       }},
      {"fill_ of a view at +5",
       [](const mt::Tensor& a, const mt::Tensor&) {
         mt::Tensor c = a.clone();
         c.narrow(0, 5, a.size(0) - 5).fill_(-2.0);
         return c;
       }},
  };
  mt::manual_seed(9);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kHalf, mt::kFloat64, mt::kInt32, mt::kUInt8})
    for (int64_t n : {6, 17, 1000, 40013, 70001, 262147}) {
      const mt::Tensor a = sample({n}, dt), b = sample({n}, dt);
      for (const auto& [name, op] : ops) {
        const std::string what = name + ", " + mt::dtype_name(dt) + " [" + std::to_string(n) + "]";
        mt::Tensor plain;
        {
          const StreamingCache none(int64_t(1) << 50);
          try {
            plain = op(a, b);
          } catch (const mt::Error&) {
            continue;  // not defined for this dtype
          }
        }
        const StreamingCache all(1);
        expect_same(op(a, b), plain, what + ", streamed");
      }
    }
  // Broadcast operands over rows of 33000 (streamed row by row where a row has 64 KiB or more):
  // a bias row, a per-row column on either side, where / masked_fill with a mask row.
  const std::vector<std::pair<std::string, Op>> row_ops = {
      {"a + bias row", [](const mt::Tensor& a, const mt::Tensor& b) { return a + b.select(0, 0); }},
      {"a * column", [](const mt::Tensor& a, const mt::Tensor& b) { return a * b.narrow(1, 0, 1); }},
      {"column - a", [](const mt::Tensor& a, const mt::Tensor& b) { return b.narrow(1, 0, 1) - a; }},
      {"maximum(a, column)",
       [](const mt::Tensor& a, const mt::Tensor& b) { return mt::maximum(a, b.narrow(1, 5, 1)); }},
      {"where(mask row, a, b)",
       [](const mt::Tensor& a, const mt::Tensor& b) { return mt::where(b.select(0, 1) > 0.0, a, b); }},
      {"masked_fill(a, mask, -7)",
       [](const mt::Tensor& a, const mt::Tensor& b) { return mt::masked_fill(a, b.narrow(0, 0, 1) < 0.0, -7.0); }},
  };
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64, mt::kInt32})
    for (int64_t rows : {3, 40}) {
      const mt::Tensor a = sample({rows, 33000}, dt), b = sample({rows, 33000}, dt);
      for (const auto& [name, op] : row_ops) {
        mt::Tensor plain;
        {
          const StreamingCache none(int64_t(1) << 50);
          plain = op(a, b);
        }
        const StreamingCache all(1);
        expect_same(op(a, b), plain,
                    name + ", " + mt::dtype_name(dt) + " [" + std::to_string(rows) + ", 33000], streamed");
      }
    }
}
