// scaled_dot_product_attention and tril/triu: PyTorch reference values (forward and every
// gradient, tests/fixtures/reference_attention.json from tools/gen_reference_attention.py),
// float64 gradcheck with and without masks, agreement with the composite definition across
// query tiles, dropout, fully masked rows, autocast backward against fp32, and errors.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using json = nlohmann::json;
using Inputs = std::vector<mt::Tensor>;

namespace {

const json& ref(const std::string& key) {
  static const json j = [] {
    std::ifstream f(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_attention.json");
    EXPECT_TRUE(f.good()) << "missing tests/fixtures/reference_attention.json (run tools/gen_reference_attention.py)";
    return json::parse(f);
  }();
  return j.at(key);
}

mt::Tensor tensor(const json& t, mt::DType dtype, bool grad = false) {
  if (t.is_null()) return {};
  mt::Tensor r =
      mt::from_vector(t.at("data").get<std::vector<double>>(), t.at("shape").get<mt::Shape>(), {.dtype = dtype});
  if (grad) r.requires_grad_();
  return r;
}

using mantissa::test::expect_close_to_reference;

double max_abs_diff(const mt::Tensor& a, const mt::Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

double max_abs(const mt::Tensor& a) {
  double m = 0;
  for (double v : a.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

// fn throws mantissa::Error naming the op and containing needle.
template <typename Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << needle;
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("scaled_dot_product_attention"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

mt::Tensor randn(const mt::Shape& s, mt::DType dt = mt::kFloat64, bool grad = true) {
  return mt::randn(s, {.dtype = dt, .requires_grad = grad});
}

// The definition, with differentiable ops: softmax(q k^T * scale + mask) v.
mt::Tensor composite(const mt::Tensor& q, const mt::Tensor& k, const mt::Tensor& v, bool causal) {
  const int64_t L = q.size(-2), S = k.size(-2);
  mt::Tensor s = mt::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));
  if (causal) {
    mt::Tensor hide = mt::triu(mt::ones({L, S}, {.dtype = mt::kBool}), 1);
    s = mt::masked_fill(s, hide, -std::numeric_limits<double>::infinity());
  }
  return mt::matmul(mt::softmax(s, -1), v);
}

#define EXPECT_GRADCHECK(fn, inputs)                                   \
  do {                                                                 \
    std::string why;                                                   \
    EXPECT_TRUE(mt::autograd::gradcheck(fn, inputs, {}, &why)) << why; \
  } while (0)

}  // namespace

TEST(Triangle, MatchesPyTorch) {
  for (const json& c : ref("triangle")) {
    const int64_t d = c.at("diagonal");
    for (mt::DType dt : {mt::kFloat64, mt::kFloat32}) {
      mt::Tensor x = tensor(c["x"], dt);
      const double tol = dt == mt::kFloat64 ? 0.0 : 1e-7;  // float32: the input's own rounding
      expect_close_to_reference(mt::tril(x, d), c["tril"], tol, "tril " + std::to_string(d));
      expect_close_to_reference(mt::triu(x, d), c["triu"], tol, "triu " + std::to_string(d));
    }
  }
}

TEST(Triangle, IntegerBoolAndNonContiguous) {
  mt::Tensor ones = mt::ones({3, 3}, {.dtype = mt::kBool});
  EXPECT_EQ(mt::tril(ones).to(mt::kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  mt::Tensor x = mt::arange(6).reshape({2, 3}).t();  // [3, 2], strided
  EXPECT_EQ(mt::triu(x, -1).to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 0, 5}));
}

TEST(Triangle, Gradcheck) {
  mt::manual_seed(3);
  EXPECT_GRADCHECK([](const Inputs& in) { return mt::tril(in[0], 1); }, Inputs{randn({2, 3, 4})});
  EXPECT_GRADCHECK([](const Inputs& in) { return mt::triu(in[0], -1); }, Inputs{randn({4, 3})});
}

TEST(Triangle, RejectsVectors) { EXPECT_THROW(mt::tril(mt::ones({3})), mt::Error); }

TEST(Attention, MatchesPyTorch) {
  for (const json& c : ref("attention")) {
    for (auto [dt, tol] : {std::pair{mt::kFloat64, 1e-9}, {mt::kFloat32, 2e-5}}) {
      const std::string what = c.at("name").get<std::string>() + " " + mt::dtype_name(dt);
      mt::Tensor q = tensor(c["q"], dt, true), k = tensor(c["k"], dt, true), v = tensor(c["v"], dt, true);
      mt::AttentionOptions o{.is_causal = c.at("causal").get<bool>()};
      if (!c["mask"].is_null())
        o.attn_mask = c.at("mask_bool").get<bool>() ? tensor(c["mask"], mt::kFloat32) != 0.0 : tensor(c["mask"], dt);
      if (!c["scale"].is_null()) o.scale = c["scale"].get<double>();
      mt::Tensor y = F::scaled_dot_product_attention(q, k, v, o);
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt));
      expect_close_to_reference(q.grad(), c["gq"], tol, what + " gq");
      expect_close_to_reference(k.grad(), c["gk"], tol, what + " gk");
      expect_close_to_reference(v.grad(), c["gv"], tol, what + " gv");
    }
  }
}

TEST(Attention, GradcheckPlainCausalAndMasks) {
  mt::manual_seed(5);
  auto plain = [](const Inputs& in) { return mt::scaled_dot_product_attention(in[0], in[1], in[2]); };
  EXPECT_GRADCHECK(plain, (Inputs{randn({2, 3, 4}), randn({2, 5, 4}), randn({2, 5, 3})}));
  auto causal = [](const Inputs& in) {
    return mt::scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true});
  };
  EXPECT_GRADCHECK(causal, (Inputs{randn({1, 2, 4, 3}), randn({1, 2, 6, 3}), randn({1, 2, 6, 2})}));
  // A key-padding mask broadcast over heads and queries, and causal on top of it.
  mt::Tensor pad = mt::tensor({1, 1, 0, 1, 1, 1, 1, 0}, {2, 1, 1, 4}) != 0.0;
  for (bool is_causal : {false, true}) {
    auto masked = [&](const Inputs& in) {
      return mt::scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = pad, .is_causal = is_causal});
    };
    EXPECT_GRADCHECK(masked, (Inputs{randn({2, 2, 4, 3}), randn({2, 2, 4, 3}), randn({2, 2, 4, 3})}));
  }
  mt::Tensor additive = randn({3, 5}, mt::kFloat64, false);
  auto float_mask = [&](const Inputs& in) {
    return mt::scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = additive, .scale = 0.7});
  };
  EXPECT_GRADCHECK(float_mask, (Inputs{randn({3, 4}), randn({5, 4}), randn({5, 2})}));
}

TEST(Attention, GradcheckWithDropout) {
  // The same seed before each call draws the same dropout mask, so the function is fixed.
  auto dropped = [](const Inputs& in) {
    mt::manual_seed(11);
    return mt::scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true, .dropout_p = 0.3});
  };
  mt::manual_seed(6);
  EXPECT_GRADCHECK(dropped, (Inputs{randn({2, 5, 3}), randn({2, 5, 3}), randn({2, 5, 3})}));
  // Dropout zeroes some probabilities: the output differs from the undropped one.
  mt::Tensor q = randn({1, 8, 4}, mt::kFloat64, false);
  mt::manual_seed(11);
  mt::Tensor a = mt::scaled_dot_product_attention(q, q, q, {.dropout_p = 0.5});
  EXPECT_GT(max_abs_diff(a, mt::scaled_dot_product_attention(q, q, q)), 1e-3);
}

TEST(Attention, MatchesCompositeAcrossTiles) {
  // 150 queries span three 64-row tiles, the last one partial.
  mt::manual_seed(7);
  for (bool causal : {false, true}) {
    mt::Tensor q = randn({2, 2, 150, 16}, mt::kFloat32), k = randn({2, 2, 150, 16}, mt::kFloat32),
               v = randn({2, 2, 150, 8}, mt::kFloat32);
    mt::Tensor y = mt::scaled_dot_product_attention(q, k, v, {.is_causal = causal});
    mt::Tensor gy = randn(y.sizes(), mt::kFloat32, false);
    y.backward(gy);
    Inputs fused{q.grad(), k.grad(), v.grad()};
    for (auto& t : {q, k, v}) t.set_grad({});
    mt::Tensor yc = composite(q, k, v, causal);
    yc.backward(gy);
    EXPECT_LT(max_abs_diff(y, yc), 1e-5) << "causal " << causal;
    EXPECT_LT(max_abs_diff(fused[0], q.grad()), 1e-4);
    EXPECT_LT(max_abs_diff(fused[1], k.grad()), 1e-4);
    EXPECT_LT(max_abs_diff(fused[2], v.grad()), 1e-4);
  }
}

// bf16 attention (bf16 dot products on a CPU with AVX512-BF16: core/cpu/bf16_tile_gemm.h)
// against the float64 attention of the same bf16 values: output and gradients within the
// bf16 roundings of P, dS and the results (0.2-0.5 % of the largest value here). Odd head widths and key counts (the
// last k-pair half empty), queries != keys, a key count over 256 (two passes over k in P V), tiles of 64 queries with a
// partial last one, boolean and additive masks, causal, and dropout (the same seed draws the same mask in both dtypes).
TEST(Attention, Bf16MatchesFloat64OfTheSameValues) {
  struct Case {
    int64_t B, H, L, S, E, Ev;
    bool causal;
    int mask;  // 0 none, 1 boolean key padding, 2 additive [L, S]
    double dropout;
  };
  const Case cases[] = {{2, 2, 150, 150, 32, 32, true, 0, 0.0}, {1, 3, 70, 45, 31, 17, false, 1, 0.0},
                        {1, 2, 40, 300, 64, 64, false, 2, 0.0}, {1, 1, 130, 130, 128, 128, true, 0, 0.0},
                        {2, 1, 65, 33, 16, 8, true, 1, 0.2},    {1, 2, 1, 7, 3, 1, false, 0, 0.0}};
  mt::manual_seed(21);
  for (const Case& c : cases) {
    const std::string what = "L " + std::to_string(c.L) + " S " + std::to_string(c.S) + " E " + std::to_string(c.E);
    Inputs bf{randn({c.B, c.H, c.L, c.E}, mt::kBFloat16), randn({c.B, c.H, c.S, c.E}, mt::kBFloat16),
              randn({c.B, c.H, c.S, c.Ev}, mt::kBFloat16)};
    mt::AttentionOptions o{.is_causal = c.causal, .dropout_p = c.dropout};
    if (c.mask == 1) o.attn_mask = mt::rand({c.B, 1, 1, c.S}) > 0.2;
    if (c.mask == 2) o.attn_mask = randn({c.L, c.S}, mt::kFloat32, false);
    mt::Tensor gy = randn({c.B, c.H, c.L, c.Ev}, mt::kBFloat16, false);
    mt::manual_seed(5);
    mt::Tensor y = mt::scaled_dot_product_attention(bf[0], bf[1], bf[2], o);
    y.backward(gy);
    Inputs wide;
    for (const auto& t : bf) wide.push_back(t.detach().to(mt::kFloat64).requires_grad_());
    if (c.mask == 2) o.attn_mask = o.attn_mask.to(mt::kFloat64);
    mt::manual_seed(5);
    mt::Tensor y64 = mt::scaled_dot_product_attention(wide[0], wide[1], wide[2], o);
    y64.backward(gy.to(mt::kFloat64));
    ASSERT_EQ(y.dtype(), mt::kBFloat16);
    EXPECT_LT(max_abs_diff(y, y64), 1e-2 * max_abs(y64)) << what;
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(bf[i].grad().dtype(), mt::kBFloat16);
      EXPECT_LT(max_abs_diff(bf[i].grad(), wide[i].grad()), 1e-2 * max_abs(wide[i].grad())) << what << " input " << i;
    }
  }
}

// Empty dimensions (no queries, no keys, zero-width heads, zero-width values) and a NaN key
// through the fp32 and bf16 tile paths: the float64 attention's values (no keys: zeros;
// zero-width heads: uniform weights), finite gradients of the right shapes, the NaN only in the
// rows that see it.
TEST(Attention, EmptyDimensionsAndNaNOnTheTilePaths) {
  mt::manual_seed(23);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    for (auto [L, S, E, Ev] : {std::array<int64_t, 4>{0, 5, 4, 4}, {3, 0, 4, 4}, {3, 5, 0, 4}, {3, 5, 4, 0}}) {
      const std::string what = std::string(mt::dtype_name(dt)) + " L " + std::to_string(L) + " S " + std::to_string(S) +
                               " E " + std::to_string(E) + " Ev " + std::to_string(Ev);
      Inputs in{randn({2, L, E}, dt), randn({2, S, E}, dt), randn({2, S, Ev}, dt)};
      for (bool causal : {false, true}) {
        mt::Tensor y = mt::scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = causal});
        ASSERT_EQ(y.sizes(), (mt::Shape{2, L, Ev})) << what;
        Inputs wide;
        for (const auto& t : in) wide.push_back(t.detach().to(mt::kFloat64));
        mt::Tensor y64 = mt::scaled_dot_product_attention(wide[0], wide[1], wide[2], {.is_causal = causal});
        if (y.numel() > 0) {
          EXPECT_LT(max_abs_diff(y, y64), 1e-2 * (max_abs(y64) + 1)) << what;
        }
        y.sum().backward();
        for (size_t i = 0; i < 3; ++i) {
          ASSERT_TRUE(in[i].grad().defined()) << what;
          EXPECT_EQ(in[i].grad().sizes(), in[i].sizes()) << what;
          for (double g : in[i].grad().to_vector<double>()) EXPECT_TRUE(std::isfinite(g)) << what;
          in[i].set_grad({});
        }
      }
    }
    // A NaN in key 5 of problem 0 reaches exactly the causal rows that see it (i >= 5; the
    // earlier rows mask it to -inf, as masked_fill does), across the first two query tiles.
    mt::Tensor k = randn({2, 70, 32}, mt::kFloat32, false), qv = randn({2, 70, 32}, dt, false);
    k.index_put_({0, 5, 0}, std::nan(""));
    mt::Tensor y = mt::scaled_dot_product_attention(qv, k.to(dt), qv, {.is_causal = true});
    const std::vector<double> v = y.to_vector<double>();
    for (int64_t i = 0; i < 2 * 70; ++i)
      for (int64_t e = 0; e < 32; ++e)
        EXPECT_EQ(std::isnan(v[size_t(i * 32 + e)]), i >= 5 && i < 70) << mt::dtype_name(dt) << " row " << i;
  }
}

// 0-dim, 1-D and integer inputs are errors naming the op; transposed (non-contiguous) q, k, v
// give the results of their contiguous copies on the fp32 and bf16 tile paths.
TEST(Attention, ZeroDimIntegerAndNonContiguousInputs) {
  const mt::Tensor scalar = mt::randn({}), vec = mt::randn({4}), ints = mt::ones({2, 3, 4}, {.dtype = mt::kInt64});
  expect_error([&] { mt::scaled_dot_product_attention(scalar, scalar, scalar); }, "rank >= 2");
  expect_error([&] { mt::scaled_dot_product_attention(vec, vec, vec); }, "rank >= 2");
  expect_error([&] { mt::scaled_dot_product_attention(ints, ints, ints); }, "floating dtype");
  mt::manual_seed(29);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    const mt::Tensor q = randn({2, 32, 70}, dt, false).transpose(1, 2),
                     k = randn({2, 32, 70}, dt, false).transpose(1, 2);
    const mt::Tensor v = randn({2, 16, 70}, dt, false).transpose(1, 2);
    ASSERT_FALSE(q.is_contiguous());
    const mt::Tensor y = mt::scaled_dot_product_attention(q, k, v, {.is_causal = true});
    const mt::Tensor yc =
        mt::scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), {.is_causal = true});
    EXPECT_EQ(max_abs_diff(y, yc), 0.0) << mt::dtype_name(dt);
  }
}

TEST(Attention, FullyMaskedRowsGiveZerosNotNaN) {
  mt::Tensor q = randn({1, 3, 4}), k = randn({1, 3, 4}), v = randn({1, 3, 4});
  mt::Tensor mask = mt::tensor({1, 1, 1, 0, 0, 0, 1, 0, 1}, {3, 3}) != 0.0;  // query 1 sees nothing
  mt::Tensor y = mt::scaled_dot_product_attention(q, k, v, {.attn_mask = mask});
  y.sum().backward();
  EXPECT_EQ(max_abs(y.select(1, 1)), 0.0);
  for (const mt::Tensor& g : {q.grad(), k.grad(), v.grad()})
    for (double x : g.to_vector<double>()) EXPECT_TRUE(std::isfinite(x));
  EXPECT_EQ(max_abs(q.grad().select(1, 1)), 0.0);
  EXPECT_GT(max_abs(y.select(1, 0)), 0.0);
}

// A NaN query makes every score of its row NaN. The running max skips NaN, so the row had
// looked fully masked and given zeros; as PyTorch, its output is NaN and so are the gradients
// that go through its probabilities, while a fully masked row in the same call stays 0 and every
// other row stays finite. Tile paths (fp32, bf16), the widened fp16 path and float64; causal and
// with a boolean mask.
TEST(Attention, NaNQueryGivesANaNRowNotZeros) {
  mt::manual_seed(31);
  const int64_t L = 70, D = 16;              // two query tiles
  auto rows_nan = [](const mt::Tensor& t) {  // [L, D] -> per row: all NaN (1), all finite (0), else -1
    std::vector<int> r;
    const std::vector<double> v = t.to_vector<double>();
    const size_t w = size_t(t.size(1));
    for (size_t i = 0; i < v.size() / w; ++i) {
      size_t n = 0, f = 0;
      for (size_t e = 0; e < w; ++e) {
        n += std::isnan(v[i * w + e]) ? 1 : 0;
        f += std::isfinite(v[i * w + e]) ? 1 : 0;
      }
      r.push_back(n == w ? 1 : f == w ? 0 : -1);
    }
    return r;
  };
  for (mt::DType dt : {mt::kFloat64, mt::kFloat32, mt::kBFloat16, mt::kHalf})
    for (bool causal : {true, false}) {
      const std::string what = std::string(mt::dtype_name(dt)) + (causal ? " causal" : " masked");
      mt::Tensor q0 = randn({1, 2, L, D}, mt::kFloat32, false);
      q0.index_put_({0, 0, 3, 7}, std::nan(""));  // one NaN element: every score of query 3 is NaN
      Inputs in{q0.to(dt).requires_grad_(), randn({1, 2, L, D}, dt), randn({1, 2, L, D}, dt)};
      mt::Tensor mask = mt::ones({L, L}).to(mt::kBool);
      mask.index_put_({5}, 0.0);  // query 5 sees nothing
      mt::Tensor y = causal ? mt::scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true})
                            : mt::scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = mask});
      y.sum().backward();
      for (int64_t h = 0; h < 2; ++h) {
        const std::vector<int> yr = rows_nan(y.select(1, h).select(0, 0));
        const std::vector<int> gq = rows_nan(in[0].grad().select(1, h).select(0, 0));
        const std::vector<int> gk = rows_nan(in[1].grad().select(1, h).select(0, 0));
        const std::vector<int> gv = rows_nan(in[2].grad().select(1, h).select(0, 0));
        for (int64_t i = 0; i < L; ++i) {
          const std::string at = what + " head " + std::to_string(h) + " row " + std::to_string(i);
          const bool nan_row = h == 0 && i == 3;
          EXPECT_EQ(yr[size_t(i)], nan_row ? 1 : 0) << at;
          EXPECT_EQ(gq[size_t(i)], nan_row ? 1 : 0) << at;
          // Key i's gradients: NaN where query 3 sees key i (P and dS of row 3 are NaN there),
          // finite in the other head; dV is also finite for the keys a causal query 3 does not
          // see (dK there takes 0 times the NaN query in the tile products: either).
          const bool seen = h == 0 && (!causal || i <= 3);
          EXPECT_EQ(gv[size_t(i)], seen ? 1 : 0) << at;
          if (seen || h == 1) {
            EXPECT_EQ(gk[size_t(i)], seen ? 1 : 0) << at;
          }
        }
        if (!causal) {
          EXPECT_EQ(max_abs(y.select(1, h).select(0, 0).select(0, 5)), 0.0) << what;  // fully masked
        }
      }
    }
}

TEST(Attention, AutocastBackwardMatchesFp32) {
  // fp32 leaves; under autocast the op runs in fp16/bf16 with fp32 softmax statistics and the
  // gradients come back in fp32, within the lower precision's rounding of the fp32 ones.
  mt::manual_seed(8);
  Inputs base{randn({2, 4, 40, 16}, mt::kFloat32, false), randn({2, 4, 40, 16}, mt::kFloat32, false),
              randn({2, 4, 40, 16}, mt::kFloat32, false)};
  mt::Tensor gy = randn({2, 4, 40, 16}, mt::kFloat32, false);
  auto run = [&](std::optional<mt::DType> amp, Inputs& grads) {
    Inputs in;
    for (auto& t : base) in.push_back(t.clone().requires_grad_());
    mt::Tensor y;
    {
      std::optional<mt::amp::Autocast> ac;
      if (amp) ac.emplace(*amp);
      y = mt::scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true});
    }
    if (amp) {
      EXPECT_EQ(y.dtype(), *amp);
    }
    y.backward(gy.to(y.dtype()));
    for (auto& t : in) grads.push_back(t.grad());
    return y.to(mt::kFloat32);
  };
  Inputs g32, g16, gbf;
  mt::Tensor y32 = run(std::nullopt, g32), y16 = run(mt::kHalf, g16), ybf = run(mt::kBFloat16, gbf);
  EXPECT_LT(max_abs_diff(y16, y32), 2e-2 * max_abs(y32));
  EXPECT_LT(max_abs_diff(ybf, y32), 6e-2 * max_abs(y32));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(g16[i].dtype(), mt::kFloat32);
    EXPECT_LT(max_abs_diff(g16[i], g32[i]), 2e-2 * max_abs(g32[i])) << "input " << i;
    EXPECT_LT(max_abs_diff(gbf[i], g32[i]), 6e-2 * max_abs(g32[i])) << "input " << i;
  }
}

// Attention as a user writes it (one projection split by select into q, k, v, then matmul,
// masked_fill, softmax, matmul) under bf16 autocast: the select gradients gathered into one
// tensor (autograd/view_window.h), the transposed bf16 products (dV = P^T dY, dK^T = Q^T dS,
// dQ = dS K: core/cpu/matmul_k_major.cpp where the CPU has AVX512-BF16) and the cast's bf16
// gradient read by softmax's backward all meet here: the gradients follow fp32's.
TEST(Attention, UserWrittenUnderBf16AutocastMatchesFp32) {
  mt::manual_seed(9);
  const int64_t N = 2, T = 40, H = 4, E = 16, D = H * E;
  mt::Tensor x0 = randn({N, T, D}, mt::kFloat32, false), w0 = randn({3 * D, D}, mt::kFloat32, false) * 0.2;
  mt::Tensor gy = randn({N, T, D}, mt::kFloat32, false);
  mt::Tensor mask = mt::triu(mt::ones({T, T}), 1).to(mt::kBool);
  auto run = [&](bool amp, Inputs& grads) {
    mt::Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
    mt::Tensor y;
    {
      mt::amp::Autocast ac(mt::kBFloat16, amp);
      mt::Tensor qkv = mt::matmul(x, w.t()).reshape({N, T, 3, H, E}).permute({2, 0, 3, 1, 4});
      mt::Tensor q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
      mt::Tensor s = mt::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(E)));
      mt::Tensor p = mt::softmax(mt::masked_fill(s, mask, -INFINITY), -1);
      y = mt::matmul(p, v).transpose(1, 2).reshape({N, T, D});
    }
    y.backward(gy.to(y.dtype()));
    grads = {x.grad(), w.grad()};
    return y.to(mt::kFloat32);
  };
  Inputs g32, gbf;
  mt::Tensor y32 = run(false, g32), ybf = run(true, gbf);
  EXPECT_LT(max_abs_diff(ybf, y32), 3e-2 * max_abs(y32));
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(gbf[i].dtype(), mt::kFloat32);
    EXPECT_LT(max_abs_diff(gbf[i], g32[i]), 3e-2 * max_abs(g32[i])) << (i ? "w" : "x");
  }
}

TEST(Attention, BadInputsThrowNamingTheOp) {
  mt::Tensor q = mt::randn({2, 3, 4}), k = mt::randn({2, 5, 4}), v = mt::randn({2, 5, 6});
  expect_error([&] { mt::scaled_dot_product_attention(q, mt::randn({2, 5, 3}), v); }, "last dim");
  expect_error([&] { mt::scaled_dot_product_attention(q, k, mt::randn({2, 4, 6})); }, "length S");
  expect_error([&] { mt::scaled_dot_product_attention(q, mt::randn({3, 5, 4}), mt::randn({3, 5, 6})); }, "leading");
  expect_error([&] { mt::scaled_dot_product_attention(q, k.to(mt::kFloat64), v); }, "dtype");
  expect_error([&] { mt::scaled_dot_product_attention(q, k, v, {.attn_mask = mt::ones({3, 4})}); }, "broadcast");
  expect_error([&] { mt::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}); }, "dropout_p");
  expect_error(
      [&] {
        mt::scaled_dot_product_attention(q, k, v, {.attn_mask = mt::ones({3, 5}, {.dtype = mt::kInt64})});
      },
      "bool");
}

TEST(Attention, AutocastPolicyAndLongSequences) {
  // The autocast policy lists the op as lower precision (GEMMs in fp16/bf16).
  EXPECT_EQ(mt::amp::cast_policy("scaled_dot_product_attention"), mt::amp::CastPolicy::LowerPrecision);
  // Inside the op, forward and backward agree with the composite for S much longer than L.
  mt::manual_seed(9);
  mt::Tensor q = randn({1, 2, 700, 8}, mt::kFloat32), k = randn({1, 2, 700, 8}, mt::kFloat32);
  mt::Tensor y = mt::scaled_dot_product_attention(q, k, k, {.is_causal = true});
  EXPECT_LT(max_abs_diff(y, composite(q, k, k, true)), 1e-5);
}
