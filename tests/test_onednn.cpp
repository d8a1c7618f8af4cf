// The oneDNN path of the CPU matmul and conv2d kernels (core/cpu/onednn/): results agree with
// a float64 computation (always Eigen) within the dtype's tolerance, for strided, transposed,
// broadcast and batched matmuls and for padded, strided, dilated and grouped convolutions.
// CTest also reruns this binary and the nn/AMP tests with MANTISSA_CPU_ISA=eigen and =onednn
// (tests/cpu_isa.cmake), so both paths pass every test.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/cpu/onednn.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
namespace onednn = mt::cpu::onednn;
using mt::Tensor;

namespace {

// Values exactly representable in bf16, so the low-precision and float64 runs see one input.
Tensor input(const mt::Shape& shape, mt::DType dt) { return mt::randn(shape).to(mt::kBFloat16).to(dt); }

// |got - want| <= rel * |want| + abs_scale * scale, element-wise; `scale` is sum |a||b| per
// output (the accumulation's magnitude), so long dot products get their fp32 rounding room.
void expect_close(const Tensor& got, const Tensor& want, const Tensor& scale, double rel, double abs_scale,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = got.to_vector<double>(), w = want.to_vector<double>(), s = scale.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], rel * std::fabs(w[i]) + abs_scale * s[i] + 1e-30) << what << " element " << i;
}

// Relative tolerance of one result rounded to dtype (half an ulp, with room for fp32 sums).
double rounding(mt::DType dt) { return dt == mt::kBFloat16 ? 1.0 / 128 : 1e-6; }

Tensor absd(const Tensor& t) { return mt::abs(t.to(mt::kFloat64)); }

class OneDnnDtype : public testing::TestWithParam<mt::DType> {};

TEST(OneDnn, DescribesThePath) {
  const std::string d = onednn::describe();
  const char* env = std::getenv("MANTISSA_CPU_ISA");
  if (env != nullptr && std::string(env) == "eigen") {
    EXPECT_FALSE(onednn::use_onednn(onednn::OpKind::Matmul, mt::kBFloat16));
    EXPECT_FALSE(onednn::use_onednn(onednn::OpKind::Conv, mt::kFloat32));
  }
  // (A build without libdnnl-dev has no oneDNN to force.)
  if (env != nullptr && std::string(env) == "onednn" && d.find("not built in") == std::string::npos) {
    EXPECT_TRUE(onednn::use_onednn(onednn::OpKind::Matmul, mt::kFloat32));
    // bf16 where oneDNN has bf16 primitives (AVX-512 on); an AVX2 CPU keeps it on Eigen.
    EXPECT_EQ(onednn::use_onednn(onednn::OpKind::Conv, mt::kBFloat16), d.find("isa avx512") != std::string::npos) << d;
  }
  // float64 and float16 always stay on Eigen (oneDNN 2.6 has no fp64, and fp16 only on AVX512-FP16).
  EXPECT_FALSE(onednn::use_onednn(onednn::OpKind::Matmul, mt::kFloat64));
  EXPECT_FALSE(onednn::use_onednn(onednn::OpKind::Conv, mt::kFloat16));
  EXPECT_NE(d.find("oneDNN"), std::string::npos) << d;
}

TEST_P(OneDnnDtype, MatmulLayoutsAgreeWithFloat64) {
  const mt::DType dt = GetParam();
  mt::manual_seed(3);
  struct Case {
    const char* name;
    Tensor a, b;
  };
  const Tensor a2 = input({37, 70}, dt), b2 = input({70, 45}, dt);
  const Tensor at = input({70, 37}, dt), bt = input({45, 70}, dt);
  const Tensor a3 = input({3, 17, 33}, dt), b3 = input({3, 33, 9}, dt), w = input({33, 9}, dt);
  const Case cases[] = {
      {"plain", a2, b2},
      {"a transposed", at.t(), b2},
      {"b transposed (linear's weight)", a2, bt.t()},
      {"both transposed", at.t(), bt.t()},
      {"batched", a3, b3},
      {"batched, b broadcast", a3, w},
      {"batched, a transposed", a3.transpose(1, 2).contiguous().transpose(1, 2), b3},
      {"vector rows", input({1, 70}, dt), b2},
  };
  for (const Case& c : cases) {
    const Tensor got = mt::matmul(c.a, c.b);
    const Tensor want = mt::matmul(c.a.to(mt::kFloat64), c.b.to(mt::kFloat64));
    const Tensor scale = mt::matmul(absd(c.a), absd(c.b));
    EXPECT_EQ(got.dtype(), dt);
    expect_close(got, want, scale, rounding(dt), 1e-5, std::string(mt::dtype_name(dt)) + " " + c.name);
  }
}

// The bias is added to the fp32 accumulator and the sum is rounded once: a @ b = 257 (a tie
// between the bf16 neighbours 256 and 258) plus 0.75 must give 258, where rounding the product
// first (256) and then the sum would give 256.
TEST(OneDnn, MatmulBiasRoundsOnce) {
  if (!onednn::use_onednn(onednn::OpKind::Matmul, mt::kBFloat16)) GTEST_SKIP() << onednn::describe();
  const Tensor a = mt::from_vector(std::vector<float>{16, 1}, {1, 1, 2}, {.dtype = mt::kBFloat16});
  const Tensor b = mt::from_vector(std::vector<float>{16, 1}, {1, 2, 1}, {.dtype = mt::kBFloat16});
  const Tensor bias = mt::from_vector(std::vector<float>{0.75f}, {1}, {.dtype = mt::kBFloat16});
  const Tensor out = mt::make_tensor({1, 1, 1}, mt::kBFloat16, mt::Device::cpu());
  ASSERT_TRUE(onednn::matmul(a, b, bias, out));
  EXPECT_EQ(out.to_vector<float>()[0], 258.0f);
  ASSERT_TRUE(onednn::matmul(a, b, Tensor(), out));
  EXPECT_EQ(out.to_vector<float>()[0], 256.0f);
}

// An operand that repeats a row or a column (stride 0 inside its matrices: a gradient expanded
// from a sum) is materialized before the GEMM (oneDNN ran its reference kernel on it, 300x
// slower): the product equals the dense operand's bit for bit, in every dtype and batch form.
TEST(OneDnn, MatmulOfABroadcastOperandEqualsTheDenseOne) {
  mt::manual_seed(31);
  for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kBFloat16, mt::kHalf}) {
    const Tensor col = input({256, 1}, dt), row = input({1, 64}, dt), w = input({64, 48}, dt);
    const Tensor r1 = input({1, 48}, dt), one = input({1, 1}, dt);
    struct Case {
      const char* name;
      Tensor a, b;
    };
    const std::vector<Case> cases = {
        {"ones [256, 1] expanded x [1, 48]", one.expand({256, 1}), r1},
        {"a column expanded along K x [64, 48]", col.expand({256, 64}), w},
        {"a row expanded along M x [64, 48]", row.expand({256, 64}), w},
        {"[64, 48] x a column expanded along N", w.t(), input({64, 1}, dt).expand({64, 32})},
        {"batched: [4, 256, 64] rows expanded x [64, 48]", row.expand({4, 256, 64}), w},
    };
    for (const Case& c : cases) {
      const std::string what = std::string(mt::dtype_name(dt)) + " " + c.name;
      const Tensor got = mt::matmul(c.a, c.b), want = mt::matmul(c.a.contiguous(), c.b.contiguous());
      ASSERT_EQ(got.sizes(), want.sizes()) << what;
      EXPECT_EQ(got.to(mt::kFloat64).to_vector<double>(), want.to(mt::kFloat64).to_vector<double>()) << what;
    }
  }
}

struct ConvCase {
  const char* name;
  mt::Shape x, w;
  F::Conv2dFuncOptions opts;
  bool bias;
};

TEST_P(OneDnnDtype, Conv2dForwardBackwardAgreeWithFloat64) {
  const mt::DType dt = GetParam();
  mt::manual_seed(5);
  const ConvCase cases[] = {
      {"3x3 pad 1", {4, 3, 9, 8}, {6, 3, 3, 3}, {.padding = 1}, true},
      {"single input channel (MNIST conv1)", {3, 1, 12, 12}, {8, 1, 3, 3}, {.padding = 1}, true},
      {"stride 2, dilation 2", {2, 4, 11, 10}, {5, 4, 3, 3}, {.stride = 2, .padding = {2, 1}, .dilation = 2}, true},
      {"groups 2, no bias", {2, 4, 7, 7}, {6, 2, 3, 3}, {.padding = 1, .groups = 2}, false},
      {"1x1", {2, 8, 5, 5}, {4, 8, 1, 1}, {}, true},
      {"stride 2 drops the last row", {2, 3, 6, 6}, {4, 3, 1, 1}, {.stride = 2}, true},
      // 16k channels: activations go to and from oneDNN's nChw16c by our tiled transposition
      // (7x7: 3 whole 16-pixel tiles and a tail; 8x8 -> 4x4: whole tiles only).
      {"32 channels, 7x7", {2, 32, 7, 7}, {32, 32, 3, 3}, {.padding = 1}, true},
      {"16 channels, stride 2", {3, 16, 8, 8}, {16, 16, 3, 3}, {.stride = 2, .padding = 1}, false},
  };
  for (const ConvCase& c : cases) {
    const std::string what = std::string(mt::dtype_name(dt)) + " " + c.name;
    const Tensor x = input(c.x, dt).requires_grad_(), w = input(c.w, dt).requires_grad_();
    const Tensor b = c.bias ? input({c.w[0]}, dt).requires_grad_() : Tensor();
    const Tensor x64 = x.detach().to(mt::kFloat64).requires_grad_(), w64 = w.detach().to(mt::kFloat64).requires_grad_();
    const Tensor b64 = c.bias ? b.detach().to(mt::kFloat64).requires_grad_() : Tensor();
    const Tensor y = F::conv2d(x, w, b, c.opts), y64 = F::conv2d(x64, w64, b64, c.opts);
    const Tensor gy = input(y.sizes(), dt);
    y.backward(gy);
    y64.backward(gy.to(mt::kFloat64));
    // Magnitudes of each result's sum: the same convolutions on absolute values.
    mt::NoGradGuard no_grad;
    const Tensor ax = absd(x), aw = absd(w), agy = absd(gy);
    const Tensor y_scale = F::conv2d(ax, aw, c.bias ? absd(b) : Tensor(), c.opts);
    expect_close(y, y64, y_scale, rounding(dt), 1e-5, what + " y");
    // |gx| and |gw| are bounded by the backward of the |.| convolution at |gy|.
    const Tensor ax_g = ax.clone().requires_grad_(), aw_g = aw.clone().requires_grad_();
    {
      mt::EnableGradGuard grad;
      F::conv2d(ax_g, aw_g, Tensor(), c.opts).backward(agy);
    }
    expect_close(x.grad(), x64.grad(), ax_g.grad(), rounding(dt), 1e-5, what + " gx");
    expect_close(w.grad(), w64.grad(), aw_g.grad(), rounding(dt), 1e-5, what + " gw");
    if (c.bias) expect_close(b.grad(), b64.grad(), mt::sum(agy, {0, 2, 3}), rounding(dt), 1e-5, what + " gb");
  }
}

// Where oneDNN is on for a dtype, these geometries do run on it (no silent fallback).
TEST_P(OneDnnDtype, Conv2dRunsOnOneDnnWhereEnabled) {
  const mt::DType dt = GetParam();
  if (!onednn::use_onednn(onednn::OpKind::Conv, dt)) GTEST_SKIP() << onednn::describe();
  mt::Conv2dGeometry g{.N = 2, .C = 3, .H = 9, .W = 8, .Cout = 6, .KH = 3, .KW = 3, .PH = 1, .PW = 1, .OH = 9, .OW = 8};
  const Tensor x = input({2, 3, 9, 8}, dt), w = input({6, 3, 3, 3}, dt), b = input({6}, dt);
  const Tensor y = mt::make_tensor({2, 6, 9, 8}, dt, mt::Device::cpu());
  EXPECT_TRUE(onednn::conv2d_forward(x, w, b, y, g));
  const Tensor gx = mt::make_tensor(x.sizes(), dt, mt::Device::cpu()),
               gw = mt::make_tensor(w.sizes(), dt, mt::Device::cpu());
  const Tensor gb = mt::make_tensor({6}, dt, mt::Device::cpu());
  EXPECT_TRUE(onednn::conv2d_backward(y, x, w, gx, gw, gb, g));
  EXPECT_TRUE(onednn::conv2d_backward(y, x, w, Tensor(), Tensor(), gb, g));  // bias gradient alone
}

// The branch-free bf16 rounding of the blocked elementwise loops (core/cpu/loops.h) gives
// Eigen's bits: ties to even, carries into the exponent, overflow to inf, NaN quieted.
TEST(Bf16Rounding, MatchesEigenBitForBit) {
  auto check = [](uint32_t u) {
    const float f = std::bit_cast<float>(u);
    const uint16_t want = std::bit_cast<uint16_t>(mt::BFloat16(f));
    ASSERT_EQ(mt::cpu::bf16_bits_rne(f), want) << std::hex << "float bits 0x" << u;
  };
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 65521) check(uint32_t(u));  // a prime stride
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x3F808000u, 0x3F818000u, 0x3F80FFFFu, 0x7F7FFFFFu, 0x7F800000u,
                     0xFF800000u, 0x7F800001u, 0xFFC00001u, 0x00000001u, 0x807FFFFFu, 0x4B7F8000u})
    check(u);
}

// The vector fp16 conversions (core/cpu/loops.h) give Eigen's values: every fp16 bit pattern
// widens exactly, and floats round to nearest even (ties, subnormals, overflow to inf), in
// lengths that use the vector body and the scalar tail. NaN stays NaN (payloads may differ).
TEST(Fp16Conversion, MatchesEigen) {
  std::vector<mt::Half> halves(65536);
  for (uint32_t u = 0; u < 65536; ++u) halves[u] = std::bit_cast<mt::Half>(uint16_t(u));
  std::vector<float> widened(halves.size());
  mt::cpu::half_to_float(halves.data(), widened.data(), int64_t(halves.size()) - 3);
  for (uint32_t u = 0; u + 3 < 65536; ++u) {
    const float want = static_cast<float>(halves[u]);
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(widened[u])) << u;
    else
      ASSERT_EQ(std::bit_cast<uint32_t>(widened[u]), std::bit_cast<uint32_t>(want)) << std::hex << u;
  }
  std::vector<float> floats;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 65519) floats.push_back(std::bit_cast<float>(uint32_t(u)));
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 1.0009765625f, 1.00048828125f,
                  1.00146484375f, std::numeric_limits<float>::infinity()})
    floats.push_back(f);
  std::vector<mt::Half> rounded(floats.size());
  mt::cpu::float_to_half(floats.data(), rounded.data(), int64_t(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    const mt::Half want(floats[i]);
    if (std::isnan(floats[i]))
      ASSERT_TRUE(std::isnan(static_cast<float>(rounded[i]))) << floats[i];
    else
      ASSERT_EQ(std::bit_cast<uint16_t>(rounded[i]), std::bit_cast<uint16_t>(want)) << floats[i];
  }
}

// fp16 convolutions (no fp16 math on this CPU path) widen once, run in fp32 and round once:
// forward and all three gradients agree with float64 to fp16 rounding.
TEST(Fp16Conv, MatchesFloat64) {
  mt::manual_seed(21);
  auto f16 = [](const Tensor& t) { return t.to(mt::kHalf).to(mt::kFloat64); };  // fp16-exact values
  const Tensor x0 = f16(mt::randn({2, 3, 9, 8})), w0 = f16(mt::randn({5, 3, 3, 3}) * 0.3), b0 = f16(mt::randn({5}));
  Tensor x = x0.to(mt::kHalf), w = w0.to(mt::kHalf), b = b0.to(mt::kHalf), xd = x0.clone(), wd = w0.clone(),
         bd = b0.clone();
  for (Tensor* t : {&x, &w, &b, &xd, &wd, &bd}) t->requires_grad_();
  const Tensor y = F::conv2d(x, w, b, {.padding = 1}), yd = F::conv2d(xd, wd, bd, {.padding = 1});
  EXPECT_EQ(y.dtype(), mt::kHalf);
  auto rel = [](const Tensor& got, const Tensor& want) {
    return ((got.to(mt::kFloat64) - want).abs().max() / (want.abs().max() + 1e-12)).item<double>();
  };
  EXPECT_LT(rel(y, yd), 2e-3);
  const Tensor gy = f16(mt::randn(yd.sizes()));
  y.backward(gy.to(mt::kHalf));
  yd.backward(gy);
  EXPECT_LT(rel(x.grad(), xd.grad()), 2e-3);
  EXPECT_LT(rel(w.grad(), wd.grad()), 2e-3);
  EXPECT_LT(rel(b.grad(), bd.grad()), 2e-3);
}

// bf16 elementwise ops (blocked fp32 loops) equal the fp32 op rounded once to bf16.
TEST(Bf16Elementwise, BlockedLoopsRoundOnce) {
  mt::manual_seed(11);
  const Tensor a = input({1000, 37}, mt::kBFloat16), b = input({1000, 37}, mt::kBFloat16);
  const Tensor af = a.to(mt::kFloat32), bf = b.to(mt::kFloat32);
  EXPECT_EQ(mt::relu(a).to_vector<float>(), mt::relu(af).to(mt::kBFloat16).to_vector<float>());
  EXPECT_EQ((a + b).to_vector<float>(), (af + bf).to(mt::kBFloat16).to_vector<float>());
  EXPECT_EQ((a * 0.375).to_vector<float>(), (af * 0.375).to(mt::kBFloat16).to_vector<float>());
  EXPECT_EQ(af.to(mt::kBFloat16).to_vector<float>(), a.to_vector<float>());
}

// The 2x2 / stride 2 max pool's vector loop (fp32 and bf16) picks the value and index the
// general loop (float64 here) picks: first of equal values, NaN propagating, -inf windows.
// Widths 9 (a padded tail chunk only) and 37 (two full 8-wide chunks, a tail, an odd column).
TEST(MaxPool2x2, VectorLoopMatchesTheGeneralLoop) {
  mt::manual_seed(13);
  for (int64_t W : {9, 28, 37, 64}) {  // rows of 4, 14, 18 and 32 outputs: partial and whole steps of 16
    std::vector<float> v = mt::randn({2 * 3 * 8 * W}).to(mt::kBFloat16).to_vector<float>();
    const float inf = std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < v.size(); i += 7) v[i] = v[i + 1];  // ties inside windows
    v[20] = std::nanf("");
    v[50] = v[51] = std::nanf("");
    v[0] = v[1] = v[size_t(W)] = v[size_t(W) + 1] = -inf;  // a whole window of -inf
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat16}) {
      const Tensor x = mt::from_vector(v, {2, 3, 8, W}, {.dtype = dt});
      const auto got = F::max_pool2d_with_indices(x, 2);
      const auto want = F::max_pool2d_with_indices(x.to(mt::kFloat64), 2);
      EXPECT_EQ(got.indices.to_vector<int64_t>(), want.indices.to_vector<int64_t>()) << mt::dtype_name(dt) << W;
      const auto g = got.values.to_vector<double>(), w = want.values.to_vector<double>();
      ASSERT_EQ(g.size(), w.size());
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) << mt::dtype_name(dt) << " " << i;
    }
  }
}

// Max pooling whose windows all lie inside the plane (no padding or dilation) runs window element
// by window element over up to 256 outputs at a time: its values and indices against a plain scan
// (window order, the first of equal values, NaN taking over, -inf windows), in 1-D and 2-D.
TEST(MaxPoolWindowsInside, VectorLoopMatchesAPlainScan) {
  mt::manual_seed(15);
  struct Case {
    int64_t H, W, KH, KW, SH, SW;
  };
  // 1-D rows (H = KH = 1) of 350 and 700 outputs (chunk boundaries), a leftover column; 2-D windows.
  for (const Case& c : {Case{1, 700, 1, 2, 1, 2}, Case{1, 702, 1, 3, 1, 1}, Case{1, 523, 1, 5, 1, 3},
                        Case{9, 11, 3, 3, 2, 2}, Case{7, 30, 2, 3, 1, 2}, Case{6, 6, 3, 3, 1, 1}}) {
    const int64_t n = 2 * 3 * c.H * c.W;
    std::vector<double> v = mt::randn({n}).to(mt::kBFloat16).to_vector<double>();
    for (size_t i = 0; i + 1 < v.size(); i += 5) v[i + 1] = v[i];  // ties inside windows
    v[7] = v[40] = v[41] = std::nan("");
    v[60] = v[61] = v[62] = v[63] = v[64] = -std::numeric_limits<double>::infinity();
    const int64_t OH = (c.H - c.KH) / c.SH + 1, OW = (c.W - c.KW) / c.SW + 1;
    std::vector<double> want_v;
    std::vector<int64_t> want_i;
    for (int64_t p = 0; p < 2 * 3; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t at = oh * c.SH * c.W + ow * c.SW;
          for (int64_t kh = 0; kh < c.KH; ++kh)
            for (int64_t kw = 0; kw < c.KW; ++kw) {
              const int64_t pos = (oh * c.SH + kh) * c.W + ow * c.SW + kw;
              const double x = v[size_t(p * c.H * c.W + pos)];
              if (x > best || std::isnan(x)) {
                best = x;
                at = pos;
              }
            }
          want_v.push_back(best);
          want_i.push_back(at);
        }
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64}) {
      const Tensor x = mt::from_vector(v, {2, 3, c.H, c.W}).to(dt);
      const auto got = F::max_pool2d_with_indices(x, {c.KH, c.KW}, {.stride = {c.SH, c.SW}});
      const std::string what = std::string(mt::dtype_name(dt)) + " " + std::to_string(c.H) + "x" + std::to_string(c.W) +
                               " window " + std::to_string(c.KH) + "x" + std::to_string(c.KW);
      EXPECT_EQ(got.indices.to_vector<int64_t>(), want_i) << what;
      const auto g = got.values.to_vector<double>();
      ASSERT_EQ(g.size(), want_v.size()) << what;
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE(g[i] == want_v[i] || (std::isnan(g[i]) && std::isnan(want_v[i]))) << what << " at " << i;
    }
  }
}

// max_pool2d's backward kernel: disjoint windows write each picked position once, overlapping
// ones (3x3, stride 1) sum several gradients there, in float for bf16. Against float64.
TEST(MaxPool2x2, BackwardMatchesFloat64) {
  mt::manual_seed(14);
  // odd sizes (positions outside every 2x2 window), and even ones written whole (rows of 14 and
  // 36 outputs: partial and whole steps of 16)
  for (const mt::Shape& shape : {mt::Shape{2, 3, 9, 11}, mt::Shape{2, 3, 8, 28}, mt::Shape{1, 2, 6, 72}}) {
    const Tensor x0 = mt::randn(shape).to(mt::kBFloat16).to(mt::kFloat64);
    for (bool overlap : {false, true})
      for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat16}) {
        auto pool = [&](const Tensor& x) {
          return overlap ? F::max_pool2d(x, 3, {.stride = 1, .padding = 1}) : F::max_pool2d(x, 2);
        };
        Tensor x = x0.to(dt), xd = x0.clone();
        x.requires_grad_();
        xd.requires_grad_();
        const Tensor gy = mt::randn(pool(x0).sizes()).to(mt::kBFloat16).to(mt::kFloat64);
        pool(x).backward(gy.to(dt));
        pool(xd).backward(gy);
        // bf16/fp16: one rounding of a sum of <= 9 terms; disjoint windows move each gradient as is
        const double tol = overlap && dt != mt::kFloat32 ? 0.05 : 1e-12;
        EXPECT_LT((x.grad().to(mt::kFloat64) - xd.grad()).abs().max().item<double>(), tol)
            << mt::dtype_name(dt) << (overlap ? " overlapping" : " disjoint") << " " << x0.shape_str();
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OneDnnDtype, testing::Values(mt::kFloat32, mt::kBFloat16),
                         [](const auto& info) { return std::string(mt::dtype_name(info.param)); });

}  // namespace

namespace {
// 2x2 max pooling at the edges: an empty batch, a non-contiguous input (channels-last view made by
// a permute) against its contiguous copy, and an integer input refused.
TEST(MaxPool2x2, EdgeInputs) {
  const Tensor empty = mt::zeros({0, 3, 8, 8});
  EXPECT_EQ(F::max_pool2d(empty, 2).sizes(), (mt::Shape{0, 3, 4, 4}));
  mt::manual_seed(15);
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    const Tensor nhwc = mt::randn({2, 12, 20, 3}).to(dt);
    const Tensor x = nhwc.permute({0, 3, 1, 2});  // [2, 3, 12, 20], not contiguous
    const auto got = F::max_pool2d_with_indices(x, 2), want = F::max_pool2d_with_indices(x.contiguous(), 2);
    EXPECT_EQ(got.indices.to_vector<int64_t>(), want.indices.to_vector<int64_t>()) << mt::dtype_name(dt);
    EXPECT_EQ(got.values.to(mt::kFloat64).to_vector<double>(), want.values.to(mt::kFloat64).to_vector<double>());
  }
  EXPECT_THROW(F::max_pool2d(mt::ones({1, 1, 4, 4}).to(mt::kInt32), 2), mt::Error);
}
}  // namespace
