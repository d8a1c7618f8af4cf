// Conv1d, ConvTranspose1d/2d and the 1-D pools: float64 gradchecks, module shapes, names and
// initialization, autocast and errors. PyTorch reference values (outputs and every gradient) are
// in tests/fixtures/reference_new_ops.json (tests/test_new_ops.cpp).
#include "autograd/gradcheck.h"
#include "test_util.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
using testing::HasSubstr;

namespace {
Tensor f64(const mt::Shape& s) { return mt::randn(s, {.dtype = mt::kFloat64}).requires_grad_(); }
}  // namespace

TEST(ConvExtra, Float64Gradcheck) {
  mt::manual_seed(21);
  Tensor x = f64({2, 4, 3, 3}), w = f64({4, 3, 3, 3}), b = f64({6});
  EXPECT_TRUE(mt::autograd::gradcheck(
      [](auto& in) {
        return F::conv_transpose2d(in[0], in[1], in[2],
                                   {.stride = 2, .padding = 1, .output_padding = 1, .dilation = 1, .groups = 2});
      },
      {x, w, b}));
  Tensor x1 = f64({2, 4, 7}), w1 = f64({6, 2, 3});
  EXPECT_TRUE(mt::autograd::gradcheck(
      [](auto& in) { return F::conv1d(in[0], in[1], {}, {.stride = 2, .padding = 1, .dilation = 1, .groups = 2}); },
      {x1, w1}));
  Tensor wt1 = f64({4, 3, 2});
  EXPECT_TRUE(mt::autograd::gradcheck(
      [](auto& in) { return F::conv_transpose1d(in[0], in[1], {}, {.stride = 2, .padding = 0, .output_padding = 1}); },
      {x1, wt1}));
  EXPECT_TRUE(
      mt::autograd::gradcheck([](auto& in) { return F::avg_pool1d(in[0], 3, {.stride = 2, .padding = 1}); }, {x1}));
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::adaptive_avg_pool1d(in[0], 3); }, {x1}));
  // Global pooling (a 1 x 1 output) runs its own kernels: the planes' means, fp64 and bf16.
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::adaptive_avg_pool1d(in[0], 1); }, {x1}));
  Tensor x2 = f64({2, 3, 5, 7});
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::adaptive_avg_pool2d(in[0], {1, 1}); }, {x2}));
  const std::vector<double> pooled = F::adaptive_avg_pool2d(x2, {1, 1}).to_vector<double>();
  const std::vector<double> means = mt::mean(x2, {2, 3}).to_vector<double>();
  ASSERT_EQ(pooled.size(), means.size());
  for (size_t i = 0; i < means.size(); ++i) EXPECT_NEAR(pooled[i], means[i], 1e-14);
  Tensor xb = x2.detach().to(mt::kBFloat16).requires_grad_(true);
  Tensor yb = F::adaptive_avg_pool2d(xb, {1, 1});
  EXPECT_EQ(yb.dtype(), mt::kBFloat16);
  const std::vector<float> want_b = mt::mean(xb.detach().to(mt::kFloat32), {2, 3}).to(mt::kBFloat16).to_vector<float>();
  EXPECT_EQ(yb.to_vector<float>(), want_b);
  yb.sum().backward();
  const float step = mt::full({1}, 1.0 / 35.0).to(mt::kBFloat16).item<float>();
  for (float v : xb.grad().to_vector<float>()) EXPECT_EQ(v, step);
}

// A grouped convolution with few channels per group (depthwise, or ResNeXt's groups of 4) takes
// its weight and bias gradients from the CPU's own kernel wherever oneDNN would run a GEMM per
// plane (depthwise beyond 3 x 3, small groups, strides, fp64, fp16): all three
// gradients must equal those of the same convolution written dense in float64 (groups 1, the
// weight spread on a block diagonal), on inputs rounded to the dtype first. Kernels from 3 x 3
// to 7 x 7, an asymmetric one with dilation, no padding, a padding wider than the kernel's
// reach, channels not a multiple of 16, a channel multiplier, groups of 4 and 2 x 8, a conv1d,
// strides 2 and 3 (with dilation, and a padding past the stride).
TEST(ConvExtra, SmallGroupGradientsMatchTheDenseConvolution) {
  mt::manual_seed(23);
  struct Case {
    mt::Shape x, w;
    int64_t groups;
    F::Conv2dFuncOptions o;
  };
  for (const Case& c :
       {Case{{3, 5, 9, 11}, {5, 1, 3, 3}, 5, {.padding = 1}}, Case{{2, 20, 13, 13}, {20, 1, 7, 7}, 20, {.padding = 3}},
        Case{{2, 4, 8, 10}, {4, 1, 5, 3}, 4, {.padding = {2, 1}, .dilation = {1, 2}}},
        Case{{1, 3, 6, 7}, {3, 1, 5, 5}, 3, {}}, Case{{2, 3, 5, 6}, {3, 1, 3, 3}, 3, {.padding = 3}},
        Case{{2, 6, 1, 40}, {6, 1, 1, 9}, 6, {.padding = {0, 4}}}, Case{{2, 3, 7, 7}, {6, 1, 3, 3}, 3, {.padding = 1}},
        Case{{2, 16, 9, 8}, {16, 4, 3, 3}, 4, {.padding = 1}},
        Case{{1, 4, 6, 6}, {16, 2, 3, 3}, 2, {.padding = 2, .dilation = 2}},
        Case{{2, 6, 11, 12}, {6, 1, 5, 5}, 6, {.stride = 2, .padding = 2}},
        Case{{2, 4, 10, 13}, {4, 1, 3, 4}, 4, {.stride = {2, 3}, .padding = 1, .dilation = {2, 1}}},
        Case{{2, 8, 9, 9}, {8, 2, 3, 3}, 4, {.stride = 2, .padding = 1}},
        Case{{1, 3, 8, 8}, {3, 1, 3, 3}, 3, {.stride = 3, .padding = 4}}}) {
    const int64_t C = c.x[1], Cout = c.w[0], Ci = C / c.groups, Co = Cout / c.groups;
    F::Conv2dFuncOptions grouped = c.o;
    grouped.groups = c.groups;
    // dense[o, k] = w[o, k mod Ci] where o and k are in the same group, else 0.
    std::vector<int64_t> within(static_cast<size_t>(C));
    std::vector<double> same(static_cast<size_t>(Cout * C));
    for (int64_t k = 0; k < C; ++k) within[size_t(k)] = k % Ci;
    for (int64_t o = 0; o < Cout; ++o)
      for (int64_t k = 0; k < C; ++k) same[size_t(o * C + k)] = o / Co == k / Ci ? 1 : 0;
    const Tensor index = mt::from_vector(within, {C}), mask = mt::from_vector(same, {Cout, C, 1, 1});
    for (mt::DType t : {mt::kFloat64, mt::kFloat32, mt::kBFloat16, mt::kHalf}) {
      const std::string what = mt::shape_str(c.w) + " groups " + std::to_string(c.groups) + " " + mt::dtype_name(t);
      Tensor x = mt::randn(c.x).to(t).requires_grad_(), w = mt::randn(c.w).to(t).requires_grad_(),
             b = mt::randn({Cout}).to(t).requires_grad_();
      Tensor y = F::conv2d(x, w, b, grouped);
      Tensor gy = mt::randn(y.sizes()).to(t);
      auto got = mt::autograd::grad({y}, {x, w, b}, {gy});
      Tensor x64 = x.detach().to(mt::kFloat64).requires_grad_(), w64 = w.detach().to(mt::kFloat64).requires_grad_(),
             b64 = b.detach().to(mt::kFloat64).requires_grad_();
      Tensor y64 = F::conv2d(x64, mt::index_select(w64, 1, index) * mask, b64, c.o);
      ASSERT_EQ(y64.sizes(), y.sizes()) << what;
      auto want = mt::autograd::grad({y64}, {x64, w64, b64}, {gy.to(mt::kFloat64)});
      // One step of the dtype on each result, plus fp32 accumulation over the summed positions.
      const double step = t == mt::kFloat64 ? 1e-15 : t == mt::kFloat32 ? 1.2e-7 : t == mt::kHalf ? 9.8e-4 : 7.9e-3;
      const double terms = double(y.numel() / Cout) * double(Co);
      for (int i = 0; i < 3; ++i) {
        const std::vector<double> g = got[size_t(i)].to(mt::kFloat64).to_vector<double>(),
                                  r = want[size_t(i)].to_vector<double>();
        ASSERT_EQ(g.size(), r.size()) << what;
        for (size_t k = 0; k < r.size(); ++k)
          ASSERT_NEAR(g[k], r[k], step * std::fabs(r[k]) + (t == mt::kFloat64 ? 1e-12 : 2e-6) * terms)
              << what << " gradient " << i << " at " << k;
      }
    }
  }
}

TEST(ConvExtra, ModulesShapesNamesAndInit) {
  mt::manual_seed(22);
  // A DCGAN generator's upsampling: [N, 64, 7, 7] -> [N, 32, 14, 14] -> [N, 1, 28, 28].
  nn::ConvTranspose2d up1(64, 32, 4, {.stride = 2, .padding = 1}), up2(32, 1, 4, {.stride = 2, .padding = 1});
  EXPECT_EQ(up1.weight.sizes(), (mt::Shape{64, 32, 4, 4}));
  EXPECT_EQ(up1.state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(up2(up1(mt::randn({3, 64, 7, 7}))).sizes(), (mt::Shape{3, 1, 28, 28}));
  // PyTorch's bound: fan-in from weight dim 1 (32 * 4 * 4), bias U(+-1/sqrt(512)).
  EXPECT_LE(mt::amax(mt::abs(up1.bias)).item<double>(), 1 / std::sqrt(512.0));
  EXPECT_LE(mt::amax(mt::abs(up1.weight)).item<double>(), 1 / std::sqrt(512.0) + 1e-7);
  nn::Conv1d conv(128, 100, 3, {.padding = 1});
  EXPECT_EQ(conv(mt::randn({2, 128, 20})).sizes(), (mt::Shape{2, 100, 20}));
  EXPECT_EQ(conv(mt::randn({128, 20})).sizes(), (mt::Shape{100, 20}));  // unbatched
  nn::ConvTranspose1d tconv(8, 4, 3, {.stride = 2, .bias = false});
  EXPECT_TRUE(!tconv.bias.defined());
  EXPECT_EQ(tconv(mt::randn({2, 8, 5})).sizes(), (mt::Shape{2, 4, 11}));
  EXPECT_EQ(nn::MaxPool1d(2)(mt::randn({2, 3, 9})).sizes(), (mt::Shape{2, 3, 4}));
  EXPECT_EQ(nn::AvgPool1d(3, {.stride = 1})(mt::randn({3, 9})).sizes(), (mt::Shape{3, 7}));
  EXPECT_EQ(nn::AdaptiveAvgPool1d(1)(mt::randn({2, 3, 9})).sizes(), (mt::Shape{2, 3, 1}));
}

TEST(ConvExtra, AutocastRunsTheTransposedConvInTheLowPrecision) {
  nn::ConvTranspose2d up(4, 2, 3);
  mt::amp::Autocast ac(mt::kBFloat16, true, mt::DeviceType::CPU);
  EXPECT_EQ(up(mt::randn({1, 4, 5, 5})).dtype(), mt::kBFloat16);
}

TEST(ConvExtra, Errors) {
  Tensor w = mt::randn({4, 2, 3, 3});
  EXPECT_THAT(
      [&] {
        F::conv_transpose2d(mt::randn({1, 4, 5, 5}), w, {}, {.stride = 2, .output_padding = 2});
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("output_padding")));
  EXPECT_THAT(
      [&] {
        F::conv_transpose2d(mt::randn({1, 3, 5, 5}), w);
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("channels in dim 0")));
  EXPECT_THAT(
      [&] {
        F::conv_transpose2d(mt::randn({1, 4, 5, 5}), w, mt::randn({3}));
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("bias must have shape [2]")));
  EXPECT_THAT(
      [] {
        F::conv1d(mt::randn({2, 3, 4, 5}), mt::randn({2, 3, 1}));
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("[N, C, L]")));
  EXPECT_THAT([] { nn::ConvTranspose2d(3, 4, 2, {.groups = 2}); },
              testing::ThrowsMessage<mt::Error>(HasSubstr("groups")));
}
