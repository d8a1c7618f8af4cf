// The CPU's vectorized float math against double libm: erf (a rational interpolant, not libm's
// erff) through the erf and gelu ops, fp32 and bf16, dense sweeps and the special values.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/elementwise_math.h"
#include "test_util.h"

namespace mt = mantissa;
using mt::Tensor;
using mt::test::bf16_steps;

namespace {

// -8 ... 8 in steps that hit no grid, the specials, and tiny and denormal values.
std::vector<float> erf_inputs() {
  std::vector<float> v;
  for (int i = -80000; i <= 80000; ++i) v.push_back(float(i) * 1.00003e-4f);
  for (float s : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, 3.9f, 4.0f, 4.1f, 10.0f, -10.0f, 1e30f, -1e30f}) v.push_back(s);
  return v;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// The bits of f rounded to the nearest bf16 (ties to even), NaN quieted.
uint16_t bf16_rne_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace

TEST(VectorErf, Fp32WithinAFewUlpOfDoubleErf) {
  const std::vector<float> x = erf_inputs();
  const std::vector<float> y = mt::erf(mt::from_vector(x)).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::erf(double(x[i]));
    // 8 ulp of the result; denormal results (x below 1e-38) to 1e-42, their intermediate
    // products having lost bits.
    ASSERT_NEAR(y[i], want, std::max(8 * std::fabs(want) * 0x1p-24, 1e-42)) << "erf(" << x[i] << ")";
  }
  const std::vector<float> gy = mt::gelu(mt::from_vector(x)).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = gelu_ref(double(x[i]));
    // 1 + erf(x / sqrt 2) cancels for x << 0 (torch computes the same fp32 expression).
    ASSERT_NEAR(gy[i], want, 1e-6 * std::fabs(want) + 2e-7 * std::fabs(double(x[i]))) << "gelu(" << x[i] << ")";
  }
}

TEST(VectorErf, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> e = mt::erf(mt::from_vector(std::vector<float>{inf, -inf, nan, -0.0f})).to_vector<float>();
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], -1.0f);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_TRUE(std::signbit(e[3]));
  const std::vector<float> g = mt::gelu(mt::from_vector(std::vector<float>{inf, -inf, nan})).to_vector<float>();
  EXPECT_EQ(g[0], inf);
  EXPECT_TRUE(std::isnan(g[1]));  // -inf * 0, as torch.nn.functional.gelu(-inf)
  EXPECT_TRUE(std::isnan(g[2]));
}

// bf16 goes through the word-pair loop (two elements per 32-bit word) and rounds once.
TEST(VectorErf, Bf16MatchesTheRoundedFp32Result) {
  std::vector<float> x = erf_inputs();
  x.push_back(0.5f);  // an odd length: the last element outside the word pairs
  const Tensor xb = mt::from_vector(x).to(mt::kBFloat16);
  const Tensor xf = xb.to(mt::kFloat32);
  const std::vector<float> want = mt::gelu(xf).to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
  const std::vector<float> got = mt::gelu(xb).to(mt::kFloat32).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "gelu(" << xf.to_vector<float>()[i] << ")";
}

// fp32 -> bf16 rounds to nearest even in every path, the AVX512-BF16 instruction included,
// which flushes denormals by itself: vectors of 16 with and without a denormal, and a tail.
TEST(VectorBf16Round, NearestEvenKeepsDenormals) {
  std::vector<float> x;
  for (int i = 0; i < 48; ++i) x.push_back(1.0f + float(i) * 0x1p-9f);  // ties (odd multiples of 2^-9) and not
  for (float v : {1e-39f, -1e-39f, 1e-45f, 1.1754942e-38f, 0.0f, -0.0f, 3.4e38f, -3.4e38f}) x.push_back(v);
  for (int i = 0; i < 8; ++i) x.push_back(-2.5f - float(i));
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(5e-40f);  // in the tail
  const Tensor b = mt::from_vector(x).to(mt::kBFloat16);
  const auto* bits = static_cast<const uint16_t*>(b.raw_data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bits[i], bf16_rne_bits(x[i])) << "element " << i << ": " << x[i];
}

// math::exp_fast (gelu's backward, the CUDA nn kernels) and the CPU exp op (cpu::exp_floats:
// vscalefps on AVX-512, exp_fast elsewhere; softmax and attention take their exps from it too):
// within 2 ulp of double exp over the whole float range, denormal results and overflow
// included; sigmoid (libmvec) agrees.
TEST(VectorExp, Fp32MatchesDoubleExpIncludingDenormalsAndOverflow) {
  std::vector<float> x;
  for (int i = -1100000; i <= 900000; ++i) x.push_back(float(i) * 1.00001e-4f);  // -110 ... 90
  const float inf = std::numeric_limits<float>::infinity();
  for (float s : {inf, -inf, 88.7228f, 88.7229f, -87.3365f, -103.27f, -103.98f, -0.0f, 2e14f, -2e14f, 3e38f, -3e38f})
    x.push_back(s);  // huge |x|: the clamp keeps x - n ln 2 small
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = mt::math::exp_fast(x[i]);
  const std::vector<float> op = mt::exp(mt::from_vector(x)).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = double(float(std::exp(double(x[i]))));  // rounded to float: 0 or inf at the ends
    if (std::isinf(want)) {
      ASSERT_EQ(y[i], float(want)) << "exp(" << x[i] << ")";
      ASSERT_EQ(op[i], float(want)) << "exp op (" << x[i] << ")";
      continue;
    }
    // 2 ulp of normal results; one denormal step (1.4e-45) below 1.2e-38.
    ASSERT_NEAR(y[i], want, std::max(2 * want * 0x1p-24, 1.5e-45)) << "exp(" << x[i] << ")";
    ASSERT_NEAR(op[i], want, std::max(2 * want * 0x1p-24, 1.5e-45)) << "exp op (" << x[i] << ")";
  }
  EXPECT_TRUE(std::isnan(mt::math::exp_fast(std::nanf(""))));
  // Every length up to 40 (the vector loop's masked tail) with the specials at every position,
  // in fp32 and in bf16 (rounded from the fp32 result).
  const float nan = std::nanf("");
  for (int n = 1; n <= 40; ++n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[size_t(i)] = float(i - 20) * 0.37f;
    v[size_t(n / 2)] = nan;
    v[size_t(n - 1)] = n % 2 ? inf : -inf;
    const std::vector<float> e = mt::exp(mt::from_vector(v)).to_vector<float>();
    const Tensor vb = mt::from_vector(v).to(mt::kBFloat16);
    const std::vector<float> eb = mt::exp(vb).to(mt::kFloat32).to_vector<float>();
    const std::vector<float> wb = mt::exp(vb.to(mt::kFloat32)).to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
    for (int i = 0; i < n; ++i) {
      const size_t k = size_t(i);
      if (std::isnan(v[k])) {
        ASSERT_TRUE(std::isnan(e[k]) && std::isnan(eb[k])) << "n " << n;
        continue;
      }
      const double want = std::exp(double(v[k]));
      if (std::isinf(want))
        ASSERT_EQ(e[k], inf) << "n " << n;
      else
        ASSERT_NEAR(e[k], want, 2 * want * 0x1p-24) << "n " << n << ", exp(" << v[k] << ")";
      ASSERT_LE(bf16_steps(eb[k], wb[k]), 1) << "n " << n << ", bf16 exp(" << v[k] << ")";
    }
  }
  EXPECT_TRUE(std::isnan(mt::exp(mt::from_vector(std::vector<float>{std::nanf("")})).to_vector<float>()[0]));
  // torch.sigmoid: 0 where exp(-x) overflows (x = -90), 1.8e-35 at -80
  const std::vector<float> s =
      mt::sigmoid(mt::from_vector(std::vector<float>{-200.0f, -90.0f, -80.0f, 0.0f, 90.0f})).to_vector<float>();
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_NEAR(s[2], 1.8048513e-35, 1e-41);
  EXPECT_EQ(s[3], 0.5f);
  EXPECT_EQ(s[4], 1.0f);
}

// sigmoid and silu (their AVX-512 forms in cpu::vector_form, libmvec's expf elsewhere): within
// 6 ulp of the double formulas from -100 to 100 (0 where e^-x overflows float; libmvec's AVX2
// expf gave 4.0-4.3 ulp in the tail, the AVX-512 form under 4), every length up to 40 (the
// masked tail), the limits at +-inf, NaN kept; bf16 within one step of the rounded fp32 result
// (its exp is the cheaper one: VectorBf16Result below).
TEST(VectorSigmoid, SigmoidAndSiluMatchDouble) {
  const float inf = std::numeric_limits<float>::infinity();
  // floor: one denormal step of the sigmoid, times x for silu
  auto near = [](float got, double want, double floor = 1.5e-45) {
    return std::fabs(double(got) - want) <= std::max(6 * std::fabs(want) * 0x1p-24, floor);
  };
  std::vector<float> x;
  for (int i = -1000000; i <= 1000000; i += 7) x.push_back(float(i) * 1e-4f);
  for (int n = 1; n <= 40; ++n) {
    std::vector<float> v = x;
    if (n < 40) v.assign(x.begin() + 1000 * n, x.begin() + 1000 * n + n);
    const std::vector<float> s = mt::sigmoid(mt::from_vector(v)).to_vector<float>();
    const std::vector<float> u = mt::silu(mt::from_vector(v)).to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      const double e = std::exp(-double(v[i]));  // 0 where e^-x overflows float, as torch's float sigmoid
      const double sd = std::isinf(float(e)) ? 0.0 : 1.0 / (1.0 + e);
      ASSERT_TRUE(near(s[i], sd)) << "sigmoid(" << v[i] << ") = " << s[i] << ", want " << sd;
      ASSERT_TRUE(near(u[i], double(v[i]) * sd, std::fabs(double(v[i])) * 1.5e-45))
          << "silu(" << v[i] << ") = " << u[i];
    }
    const Tensor vb = mt::from_vector(v).to(mt::kBFloat16);
    for (auto op : {+[](const Tensor& t) { return mt::sigmoid(t); }, +[](const Tensor& t) { return mt::silu(t); }}) {
      const std::vector<float> got = op(vb).to(mt::kFloat32).to_vector<float>();
      const std::vector<float> want = op(vb.to(mt::kFloat32)).to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
      for (size_t i = 0; i < v.size(); ++i) ASSERT_LE(bf16_steps(got[i], want[i]), 1) << "bf16, n " << n;
    }
  }
  const std::vector<float> specials{inf, -inf, std::nanf(""), -0.0f, 0.0f, -87.0f, -89.0f, 89.0f};
  const std::vector<float> s = mt::sigmoid(mt::from_vector(specials)).to_vector<float>();
  const std::vector<float> u = mt::silu(mt::from_vector(specials)).to_vector<float>();
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_TRUE(std::isnan(s[2]) && std::isnan(u[2]));
  EXPECT_EQ(s[3], 0.5f);
  EXPECT_EQ(s[4], 0.5f);
  EXPECT_TRUE(near(s[5], 1.0 / (1.0 + std::exp(87.0))));
  EXPECT_EQ(s[6], 0.0f);  // e^89 overflows float, as in torch
  EXPECT_EQ(s[7], 1.0f);
  EXPECT_EQ(u[0], inf);
  EXPECT_TRUE(std::signbit(u[3]) && u[3] == 0.0f);  // -0 * 0.5
}

// tanh (Eigen's rational on AVX-512, libmvec's tanhf elsewhere): within 6 ulp of double tanh
// from -20 to 20 and near 0 (x itself below 4e-4), every length up to 40 (the masked tail),
// +-0, +-inf and NaN as tanhf; bf16 (in registers where the CPU has AVX512-BF16, through its own
// rational: VectorBf16Result) within one step of the rounded fp32 result.
TEST(VectorTanh, MatchesDoubleAndBf16IsTheRoundedFp32) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (int i = -200000; i <= 200000; i += 3) x.push_back(float(i) * 1e-4f);
  for (float v = 1e-7f; v < 2e-3f; v *= 1.1f) {
    x.push_back(v);
    x.push_back(-v);
  }
  for (int n = 1; n <= 40; ++n) {
    std::vector<float> v = x;
    if (n < 40) v.assign(x.begin() + 3000 * n, x.begin() + 3000 * n + n);
    const std::vector<float> t = mt::tanh(mt::from_vector(v)).to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) {
      const double want = std::tanh(double(v[i]));
      ASSERT_LE(std::fabs(double(t[i]) - want), 6 * std::fabs(want) * 0x1p-24) << "tanh(" << v[i] << ") = " << t[i];
    }
    const Tensor vb = mt::from_vector(v).to(mt::kBFloat16);
    const std::vector<float> got = mt::tanh(vb).to(mt::kFloat32).to_vector<float>();
    const std::vector<float> want = mt::tanh(vb.to(mt::kFloat32)).to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) ASSERT_LE(bf16_steps(got[i], want[i]), 1) << "bf16, n " << n;
  }
  const std::vector<float> t =
      mt::tanh(mt::from_vector(std::vector<float>{inf, -inf, std::nanf(""), -0.0f, 0.0f, 1e-40f})).to_vector<float>();
  EXPECT_EQ(t[0], 1.0f);
  EXPECT_EQ(t[1], -1.0f);
  EXPECT_TRUE(std::isnan(t[2]));
  EXPECT_TRUE(t[3] == 0.0f && std::signbit(t[3]));
  EXPECT_TRUE(t[4] == 0.0f && !std::signbit(t[4]));
  EXPECT_EQ(t[5], 1e-40f);  // a denormal stays itself
}

// gelu's tanh form (x sigmoid(2u) in its AVX-512 form) and the backward of it and of silu (the
// binary launcher's vector forms), through the ops and autograd: within a few ulp of the double
// formulas, plus the conditioning of u's rounding (4 |2u| ulp) where sigmoid(2u) is in its tail;
// the backward ones relative to the size of their two terms (each has a zero where they cancel).
TEST(VectorSigmoid, GeluTanhAndBackwardsMatchDouble) {
  std::vector<float> v;
  for (int i = -120000; i <= 120000; i += 3) v.push_back(float(i) * 1e-4f);  // -12 ... 12
  v.push_back(-0.0f);
  const Tensor x = mt::from_vector(v, {}, {.requires_grad = true});
  const Tensor g = mt::from_vector(std::vector<float>(v.size(), 0.75f));
  const Tensor y = mt::gelu(x, "tanh");
  y.backward(g);
  const std::vector<float> gy = y.to_vector<float>(), gx = x.grad().to_vector<float>();
  const Tensor xs = mt::from_vector(v, {}, {.requires_grad = true});
  mt::silu(xs).backward(g);
  const std::vector<float> sx = xs.grad().to_vector<float>();
  const double k = 0.79788456080286535588, c = 0.044715;
  for (size_t i = 0; i < v.size(); ++i) {
    // 0.5 (1 + tanh(u)) as 1 / (1 + e^-2u), 0.5 (1 - tanh(u)^2) as 2 s (1 - s): the same values,
    // without the cancellation of 1 + tanh(u) near -1 (which double has too, below u = -19).
    // (0 where e^-2u overflows float, as the float sigmoid.)
    const double xd = v[i], u = k * (xd + c * xd * xd * xd), e = std::exp(-2 * u);
    const double su = std::isinf(float(e)) ? 0.0 : 1 / (1 + e);
    const double want_y = xd * su;
    const double gx_term2 = 0.75 * xd * 2 * su * (1 - su) * k * (1 + 3 * c * xd * xd);
    const double want_gx = 0.75 * su + gx_term2;
    const double s = std::isinf(float(std::exp(-xd))) ? 0.0 : 1 / (1 + std::exp(-xd));
    const double want_sx = 0.75 * s * (1 + xd * (1 - s)), sx_size = 0.75 * s * (1 + std::fabs(xd) * (1 - s));
    const double ulps = 6 + 4 * std::fabs(2 * u);  // u is rounded ~2 ulp; s moves by 2u times that
    const double floor = 1e-40;                    // deep in the denormals (s below 1e-38) a few bits may differ
    // Without AVX-512 the functors' textbook form 0.5 x (1 + tanh(u)) runs (as in torch): where
    // tanh(u) nears -1, 1 + tanh(u) and 1 - tanh(u)^2 cancel, an absolute error of an ulp of 1
    // (2^-24) times the terms' factors, and the form gives 0 below x = -5.2 (tanh rounds to -1).
    const double du = k * (1 + 3 * c * xd * xd);
    const bool cancels = u < -0.55;  // tanh(u) < -0.5
    const double y_floor = cancels ? std::fabs(xd) * 0x1p-24 : floor;
    const double gx_floor = cancels ? 0.75 * (0.5 + std::fabs(xd) * du) * 0x1p-23 : floor;
    ASSERT_NEAR(gy[i], want_y, ulps * std::fabs(want_y) * 0x1p-24 + y_floor) << "gelu_tanh(" << v[i] << ")";
    ASSERT_NEAR(gx[i], want_gx, ulps * (0.75 * su + std::fabs(gx_term2)) * 0x1p-24 + gx_floor)
        << "gelu_tanh'(" << v[i] << ")";
    ASSERT_NEAR(sx[i], want_sx, (6 + 2 * std::fabs(xd)) * sx_size * 0x1p-24 + floor) << "silu'(" << v[i] << ")";
  }
  EXPECT_TRUE(std::signbit(gy.back()) && gy.back() == 0.0f);  // gelu(-0) = -0
  // NaN stays NaN, the limits hold.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> sp =
      mt::gelu(mt::from_vector(std::vector<float>{std::nanf(""), inf, -inf}), "tanh").to_vector<float>();
  EXPECT_TRUE(std::isnan(sp[0]));
  EXPECT_EQ(sp[1], inf);
}

// sigmoid's AVX-512 form takes e^-x from exp16_neg, which folds the negation into the reduction:
// bit for bit the exp op of -x, so sigmoid(x) equals 1 / (1 + exp(-x)) made of the ops, each
// rounded once (AVX-512 builds: elsewhere sigmoid is libmvec's).
TEST(VectorSigmoid, SigmoidIsOneOverOnePlusExpOfMinusXBitForBit) {
  if (!mt::cpu::kernels_use_avx512()) GTEST_SKIP() << "sigmoid's AVX-512 form only";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,   -0.0f,  inf,     -inf,   std::nanf(""), 1e-40f, -1e-40f, 88.7f, -88.7f, 89.0f,
                          -89.0f, 103.9f, -103.9f, 104.0f, -104.0f,       110.0f, -110.0f, 3e38f, -3e38f};
  for (int i = -1200000; i <= 1200000; i += 7) v.push_back(float(i) * 1e-4f);  // -120 ... 120
  const Tensor x = mt::from_vector(v);
  const Tensor one = mt::ones({int64_t(v.size())});
  const std::vector<float> got = mt::sigmoid(x).to_vector<float>();
  const std::vector<float> want = mt::div(one, mt::add(one, mt::exp(mt::neg(x)))).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "sigmoid(" << v[i] << ")";
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << "sigmoid(" << v[i] << ") = " << got[i] << ", 1 / (1 + exp(-x)) = " << want[i];
  }
}

// gelu (erf form) and its backward through their AVX-512 forms (Eigen's rational erf with the
// 1 / sqrt 2 folded in, exp16):
// within a few ulp of the double formulas, relative to the size of the backward's two terms.
TEST(VectorSigmoid, GeluErfAndBackwardMatchDouble) {
  std::vector<float> v;
  for (int i = -120000; i <= 120000; i += 3) v.push_back(float(i) * 1e-4f);  // -12 ... 12
  const Tensor x = mt::from_vector(v, {}, {.requires_grad = true});
  const Tensor y = mt::gelu(x);
  y.backward(mt::from_vector(std::vector<float>(v.size(), 0.75f)));
  const std::vector<float> gy = y.to_vector<float>(), gx = x.grad().to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    const double xd = v[i], cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double pdf_term = xd * std::exp(-0.5 * xd * xd) * 0.39894228040143267794;
    // erf to a few ulp of 1 (its rational form is absolute-accurate), so x Phi(x) to ~8 ulp of |x|/2
    ASSERT_NEAR(gy[i], xd * cdf, 8 * 0.5 * std::fabs(xd) * 0x1p-24 + 1e-44) << "gelu(" << v[i] << ")";
    ASSERT_NEAR(gx[i], 0.75 * (cdf + pdf_term), 8 * 0.75 * (0.5 + std::fabs(pdf_term)) * 0x1p-24 + 1e-44)
        << "gelu'(" << v[i] << ")";
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> sp =
      mt::gelu(mt::from_vector(std::vector<float>{std::nanf(""), inf, -0.0f})).to_vector<float>();
  EXPECT_TRUE(std::isnan(sp[0]));
  EXPECT_EQ(sp[1], inf);
  EXPECT_TRUE(std::signbit(sp[2]) && sp[2] == 0.0f);
}

namespace {

// Every bf16 bit pattern once (NaNs, infinities, denormals, +-0), plus one more element so
// that the length is odd (the register loop's tail).
Tensor every_bf16() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint32_t u = b << 16;
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
  }
  v.push_back(0.5f);
  return mt::from_vector(v).to(mt::kBFloat16);
}

// d rounded to float, then to the nearest bf16 (ties to even), NaN kept.
float round_to_bf16(double d) {
  const uint32_t u = uint32_t(bf16_rne_bits(float(d))) << 16;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// double sigmoid as the float ops define it: 0 where e^-x overflows float.
double sigmoid_ref(double x) {
  const double e = std::exp(-x);
  return std::isinf(float(e)) ? 0.0 : 1.0 / (1.0 + e);
}

}  // namespace

// A result rounded to bf16 takes exp16's cheaper twin (vec_math.h: a degree-4 polynomial within
// 3.4e-6). Over every bf16 input, through the bf16 register loops, each exp-based op is within
// one bf16 step of the correctly rounded double result (on AVX-512, where the vector forms are;
// elsewhere bf16 is the fp32 kernel rounded, and e.g. gelu's tanh form through tanhf is 3 steps
// off at -4.56) and of the fp32 kernel's result rounded to bf16, and rounds differently from the
// latter for at most 1 input in 10000 (the fp32 path itself misses the correctly rounded result
// about as often).
TEST(VectorBf16Result, EveryBf16InputWithinOneStepOfTheCorrectlyRoundedResult) {
  const Tensor xb = every_bf16();
  const Tensor xf = xb.to(mt::kFloat32);
  const std::vector<float> x = xf.to_vector<float>();
  struct Op {
    const char* name;
    Tensor (*op)(const Tensor&);
    double (*ref)(double);
  };
  const Op ops[] = {
      {"exp", [](const Tensor& t) { return mt::exp(t); }, [](double v) { return std::exp(v); }},
      {"sigmoid", [](const Tensor& t) { return mt::sigmoid(t); }, sigmoid_ref},
      {"silu", [](const Tensor& t) { return mt::silu(t); }, [](double v) { return v * sigmoid_ref(v); }},
      {"tanh", [](const Tensor& t) { return mt::tanh(t); }, [](double v) { return std::tanh(v); }},
      {"gelu tanh", [](const Tensor& t) { return mt::gelu(t, "tanh"); },
       [](double v) { return v * sigmoid_ref(2 * 0.79788456080286535588 * (v + 0.044715 * v * v * v)); }},
  };
  const bool avx512 = mt::cpu::kernels_use_avx512();
  for (const Op& op : ops) {
    const std::vector<float> got = op.op(xb).to(mt::kFloat32).to_vector<float>();
    const std::vector<float> fp32 = op.op(xf).to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
    int64_t differ = 0, fp32_misses = 0, bf16_misses = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double r = op.ref(double(x[i]));
      const float want = round_to_bf16(r);
      if (avx512) {  // the vector forms; elsewhere the fp32 kernels' own accuracy (tests above)
        ASSERT_LE(bf16_steps(got[i], want), 1) << op.name << "(" << x[i] << ") = " << got[i] << ", want " << want;
      }
      ASSERT_LE(bf16_steps(got[i], fp32[i]), 1) << op.name << "(" << x[i] << ") = " << got[i] << ", fp32 " << fp32[i];
      differ += got[i] != fp32[i] && !(std::isnan(got[i]) && std::isnan(fp32[i]));
      fp32_misses += bf16_steps(fp32[i], want) != 0;
      bf16_misses += bf16_steps(got[i], want) != 0;
    }
    // (Zen 5: 0-4 differ; 0 fp32 and 0-4 bf16 results miss the correctly rounded one.)
    EXPECT_LE(differ * 10000, int64_t(x.size()))
        << op.name << ": fp32 misses " << fp32_misses << ", bf16 " << bf16_misses;
  }
}

// bf16 add, sub, mul and div in every layout binary ops take (same shape, a bias row, a column,
// a scalar on either side, a strided view): each result is the fp32 result of the bf16 operands
// rounded to nearest even, bit for bit, NaN as NaN. Rows of 1000 and 1041 (the in-register
// path takes 32 at a time: tails of 8 and 17); operands include ties, denormal results, zeros,
// infinities and NaN.
TEST(VectorBf16Arithmetic, EveryLayoutIsTheRoundedFp32Result) {
  std::vector<float> pool = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             0x1p-127f,
                             -0x1p-130f,
                             1e-20f,
                             3e-19f,
                             1e30f,
                             -2e30f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             1.0f + 0x1p-8f,
                             1.0f + 0x1p-7f};
  for (int i = 0; i < 97; ++i)
    pool.push_back(std::ldexp(1.0f + float(i % 13) * 0x1p-7f, (i * 37) % 61 - 30) * (i % 3 ? 1.0f : -1.0f));
  struct Op {
    const char* name;
    Tensor (*op)(const Tensor&, const Tensor&);
    float (*ref)(float, float);
  };
  const Op ops[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](float a, float b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](float a, float b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](float a, float b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](float a, float b) { return a / b; }},
  };
  auto values = [&](int64_t n, int64_t seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = pool[size_t((i * 7 + seed * 13 + i / 5) % int64_t(pool.size()))];
    return mt::from_vector(v).to(mt::kBFloat16);
  };
  for (int64_t cols : {1000, 1041}) {
    const int64_t rows = 3;
    const Tensor a = values(rows * cols, 1).reshape({rows, cols});
    const Tensor wide = values(rows * cols * 2, 2).reshape({rows, cols * 2});
    struct Layout {
      const char* name;
      Tensor a, b;
    };
    const Layout layouts[] = {
        {"same shape", a, values(rows * cols, 3).reshape({rows, cols})},
        {"bias row", a, values(cols, 4)},
        {"column", a, values(rows, 5).reshape({rows, 1})},
        {"scalar", a, values(1, 6).reshape({})},
        {"scalar first", values(1, 9).reshape({}), a},
        {"column first", values(rows, 7).reshape({rows, 1}), a},
        {"strided", a, wide.slice(1, 0, cols * 2, 2)},
    };
    for (const Op& op : ops) {
      for (const Layout& l : layouts) {
        const Tensor got = op.op(l.a, l.b);
        ASSERT_EQ(got.dtype(), mt::kBFloat16);
        const Tensor af = l.a.to(mt::kFloat32).expand(got.sizes()).contiguous();
        const Tensor bf = l.b.to(mt::kFloat32).expand(got.sizes()).contiguous();
        const std::vector<float> av = af.to_vector<float>(), bv = bf.to_vector<float>();
        const Tensor gc = got.contiguous();
        const auto* bits = static_cast<const uint16_t*>(gc.raw_data());
        for (size_t i = 0; i < av.size(); ++i) {
          const float want = op.ref(av[i], bv[i]);
          if (std::isnan(want)) {
            ASSERT_EQ(bits[i] & 0x7F80u, 0x7F80u) << op.name << ", " << l.name << ", element " << i;
            ASSERT_NE(bits[i] & 0x7Fu, 0u) << op.name << ", " << l.name << ", element " << i;
          } else {
            ASSERT_EQ(bits[i], bf16_rne_bits(want)) << op.name << ", " << l.name << ", cols " << cols << ", element "
                                                    << i << ": " << av[i] << ", " << bv[i];
          }
        }
      }
    }
  }
}

// pow(x, e) by its exponent's kind (core/elementwise_math.h, with_pow_kind): 1 and 0 as x and 1,
// integer exponents as pow(|x|, e) with x's sign where e is odd, the rest by pow. Every kind
// against double pow (0.5 and -0.5: sqrt, as PyTorch) of the same input, over negative and positive bases, -0, inf and
// NaN, in fp32, fp64 and bf16, and through a view (the strided loop).
TEST(PowScalar, EveryExponentKindMatchesDoublePow) {
  std::vector<double> base;
  for (int i = -400; i <= 400; ++i) base.push_back(double(i) * 0.0137);
  for (double s : {0.0, -0.0, 1.0, -1.0, 1e-20, -1e-20, 3e4, -3e4, double(INFINITY), -double(INFINITY), double(NAN)})
    base.push_back(s);
  const int64_t n = int64_t(base.size());
  for (double e : {0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -1.0, -2.0, -3.0, -4.0, 7.0, 1e10, 2.5, -0.5, 0.5, -1.5}) {
    for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kBFloat16}) {
      const Tensor x = mt::from_vector(base, {n}, {.dtype = mt::kFloat64}).to(dt);
      const std::vector<double> in = x.to(mt::kFloat64).to_vector<double>();
      const Tensor wide = mt::cat({x.unsqueeze(1), x.unsqueeze(1)}, 1);  // [n, 2]: column 0 is a strided view
      for (const Tensor& got_t : {mt::pow(x, e), mt::pow(wide.select(1, 0), e)}) {
        const std::vector<double> got = got_t.to(mt::kFloat64).to_vector<double>();
        const double tol = dt == mt::kFloat64 ? 4e-16 : dt == mt::kFloat32 ? 6e-7 : 8e-3;
        for (int64_t i = 0; i < n; ++i) {
          // The reference rounded to the dtype, as the kernel's result is; 0.5 and -0.5 as PyTorch
          // computes them, by sqrt (sqrt(-0) = -0, sqrt(-inf) = NaN, unlike pow).
          const double v = in[size_t(i)];
          const double exact = e == 0.5 ? std::sqrt(v) : e == -0.5 ? 1 / std::sqrt(v) : std::pow(v, e);
          const double want = mt::from_vector(std::vector<double>{exact}, {1}, {.dtype = mt::kFloat64})
                                  .to(dt)
                                  .to(mt::kFloat64)
                                  .item<double>();
          const std::string what = std::string(mt::dtype_name(dt)) + " pow(" + std::to_string(in[size_t(i)]) + ", " +
                                   std::to_string(e) + ")";
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[size_t(i)])) << what;
          } else if (std::isinf(want) || want == 0) {
            EXPECT_EQ(got[size_t(i)], want) << what;
            EXPECT_EQ(std::signbit(got[size_t(i)]), std::signbit(want)) << what;
          } else {
            EXPECT_NEAR(got[size_t(i)], want, tol * std::fabs(want)) << what;
          }
        }
      }
    }
  }
}
