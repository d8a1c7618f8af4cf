// interpolate / Upsample against torch 1.13 (tests/fixtures/reference_upsample.json from
// tools/gen_reference_upsample.py): forward values and input gradients for nearest 1-D/2-D,
// linear and bilinear (align_corners true and false), by size and by scale_factor (non-integer,
// downsampling, a scale that keeps the size); errors; empty batch, strided input, NaN, and the
// reduced float dtypes (computed in fp32, rounded once).
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using json = nlohmann::json;
using mt::Tensor;
using testing::HasSubstr;

namespace {

const json& fixture() { return mt::test::load_fixture("reference_upsample.json", "tools/gen_reference_upsample.py"); }

Tensor load(const json& j, mt::DType dtype) {
  return mt::from_vector(j.at("data").get<std::vector<double>>(), j.at("shape").get<mt::Shape>(), {.dtype = dtype});
}

F::InterpolateOptions options(const json& c) {
  F::InterpolateOptions o;
  o.mode = c.at("mode").get<std::string>();
  if (c.contains("size")) o.size = c.at("size").get<std::vector<int64_t>>();
  if (c.contains("scale_factor")) o.scale_factor = c.at("scale_factor").get<std::vector<double>>();
  if (c.contains("align_corners")) o.align_corners = c.at("align_corners").get<bool>();
  return o;
}

double max_abs_diff(const Tensor& got, const json& want) {
  const std::vector<double> g = got.to_vector<double>(), w = want.at("data").get<std::vector<double>>();
  double m = 0;
  for (size_t i = 0; i < w.size(); ++i) m = std::max(m, std::abs(g[i] - w[i]));
  return m;
}

}  // namespace

TEST(InterpolateReference, ForwardAndInputGradient) {
  double max64 = 0, max32 = 0;
  for (const json& c : fixture().at("cases")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const bool f32 = c.at("dtype") == "float32";
    const mt::DType dt = f32 ? mt::kFloat32 : mt::kFloat64;
    const double tol = f32 ? 2e-6 : 1e-12;
    Tensor x = load(c.at("x"), dt).requires_grad_();
    Tensor y = F::interpolate(x, options(c));
    mt::test::expect_close_to_reference(y, c.at("y"), tol, name + " y");
    y.backward(load(c.at("gy"), dt));
    mt::test::expect_close_to_reference(x.grad(), c.at("gx"), tol, name + " gx");
    double& m = f32 ? max32 : max64;
    m = std::max({m, max_abs_diff(y, c.at("y")), max_abs_diff(x.grad(), c.at("gx"))});
  }
  std::printf("interpolate vs torch 1.13: max abs diff %.3g (float64 cases), %.3g (float32 cases)\n", max64, max32);
}

TEST(Interpolate, Errors) {
  const Tensor x3 = mt::ones({1, 2, 3}), x4 = mt::ones({1, 2, 3, 4}), x5 = mt::ones({1, 1, 2, 2, 2});
  EXPECT_ERROR(F::interpolate(x4, {.size = {4}, .mode = "linear"}), HasSubstr("interpolate"),
               HasSubstr("mode 'linear'"), HasSubstr("[1, 2, 3, 4]"));
  EXPECT_ERROR(F::interpolate(x3, {.size = {4}, .mode = "bilinear"}), HasSubstr("interpolate"),
               HasSubstr("mode 'bilinear'"), HasSubstr("[1, 2, 3]"));
  EXPECT_ERROR(F::interpolate(x5, {.size = {4}}), HasSubstr("mode 'nearest'"), HasSubstr("[1, 1, 2, 2, 2]"));
  EXPECT_ERROR(F::interpolate(mt::ones({4}), {.size = {4}}), HasSubstr("interpolate"), HasSubstr("[4]"));
  EXPECT_ERROR(F::interpolate(x4, {.size = {4, 4}, .scale_factor = {2.0}}),
               HasSubstr("only one of size and scale_factor"), HasSubstr("[1, 2, 3, 4]"));
  EXPECT_ERROR(F::interpolate(x4, {}), HasSubstr("either size or scale_factor"), HasSubstr("[1, 2, 3, 4]"));
  EXPECT_ERROR(F::interpolate(x4, {.size = {0, 4}}), HasSubstr("output size [0, 4] must be positive"),
               HasSubstr("[1, 2, 3, 4]"));
  EXPECT_ERROR(F::interpolate(x3, {.scale_factor = {0.2}}), HasSubstr("output size [0]"),
               HasSubstr("scale_factor [0.2]"));
  EXPECT_ERROR(F::interpolate(x3, {.scale_factor = {-2.0}}), HasSubstr("must be positive"));
  EXPECT_ERROR(F::interpolate(x4, {.size = {2, 3, 4}}), HasSubstr("size [2, 3, 4] must have 1 or 2 values"));
  EXPECT_ERROR(F::interpolate(x4, {.size = {4, 4}, .mode = "bicubic"}), HasSubstr("mode 'bicubic' is not supported"));
  EXPECT_ERROR(F::interpolate(x4, {.size = {4, 4}, .align_corners = true}), HasSubstr("align_corners"));
  EXPECT_ERROR(F::interpolate(mt::ones({1, 2, 0}), {.size = {4}}), HasSubstr("empty spatial dim"));
  EXPECT_ERROR(F::interpolate(mt::ones({1, 2, 3}, {.dtype = mt::kInt64}), {.size = {4}}), HasSubstr("floating-point"));
}

TEST(Interpolate, EmptyBatch) {
  for (const char* mode : {"nearest", "bilinear"}) {
    Tensor x = mt::ones({0, 3, 4, 5}).requires_grad_();
    Tensor y = F::interpolate(x, {.size = {7, 3}, .mode = mode});
    EXPECT_EQ(y.sizes(), (mt::Shape{0, 3, 7, 3}));
    mt::sum(y).backward();
    EXPECT_EQ(x.grad().sizes(), (mt::Shape{0, 3, 4, 5}));
  }
  Tensor x = mt::ones({0, 2, 5}).requires_grad_();
  EXPECT_EQ(F::interpolate(x, {.scale_factor = {1.7}, .mode = "linear"}).sizes(), (mt::Shape{0, 2, 8}));
}

TEST(Interpolate, StridedInputMatchesContiguous) {
  mt::manual_seed(3);
  for (const char* mode : {"nearest", "bilinear"}) {
    SCOPED_TRACE(mode);
    Tensor base = mt::randn({2, 5, 4, 3}, {.dtype = mt::kFloat64});
    Tensor a = base.detach().requires_grad_();
    Tensor view = a.transpose(1, 3);  // [2, 3, 4, 5], not contiguous
    ASSERT_FALSE(view.is_contiguous());
    Tensor b = view.contiguous().detach().requires_grad_();
    const F::InterpolateOptions o{.size = {6, 7}, .mode = mode};
    Tensor ya = F::interpolate(view, o), yb = F::interpolate(b, o);
    EXPECT_EQ(ya.to_vector<double>(), yb.to_vector<double>());
    mt::sum(ya * ya).backward();
    mt::sum(yb * yb).backward();
    EXPECT_EQ(a.grad().transpose(1, 3).contiguous().to_vector<double>(), b.grad().to_vector<double>());
  }
}

TEST(Interpolate, NanPropagates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Nearest 1-D, x2: outputs 2 and 3 read element 1.
  Tensor x = mt::from_vector<double>({1, nan, 3, 4}, {1, 1, 4});
  std::vector<double> y = F::interpolate(x, {.size = {8}}).to_vector<double>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(std::isnan(y[size_t(i)]), i == 2 || i == 3) << i;
  // Linear: every output with a nonzero weight on element 1 is NaN.
  y = F::interpolate(x, {.size = {7}, .mode = "linear", .align_corners = true}).to_vector<double>();
  // align_corners: source d * 0.5 -> outputs 0 to 3 read element 1
  // (as torch: output 0 reads element 1 with weight 0, and 0 * NaN is NaN).
  for (int i = 0; i < 7; ++i) EXPECT_EQ(std::isnan(y[size_t(i)]), i <= 3) << i;
  // Bilinear: the NaN pixel spreads to its neighbourhood only.
  Tensor x2 = mt::zeros({1, 1, 4, 4}, {.dtype = mt::kFloat64});
  {
    mt::NoGradGuard ng;
    x2.select(2, 0).select(2, 0).fill_(nan);
  }
  std::vector<double> y2 = F::interpolate(x2, {.size = {8, 8}, .mode = "bilinear"}).to_vector<double>();
  // torch 1.13: the top-left 3x3 outputs are NaN, the rest 0.
  for (int h = 0; h < 8; ++h)
    for (int w = 0; w < 8; ++w) EXPECT_EQ(std::isnan(y2[size_t(h * 8 + w)]), h < 3 && w < 3) << h << ", " << w;
}

TEST(Interpolate, ReducedFloatsComputeInFloat32) {
  mt::manual_seed(9);
  for (mt::DType low : {mt::kHalf, mt::kBFloat16}) {
    for (const char* mode : {"nearest", "bilinear"}) {
      SCOPED_TRACE(std::string(mt::dtype_name(low)) + " " + mode);
      Tensor x = mt::randn({2, 3, 5, 4}).to(low).requires_grad_();
      const F::InterpolateOptions o{.scale_factor = {1.7, 2.0}, .mode = mode};
      Tensor y = F::interpolate(x, o);
      EXPECT_EQ(y.dtype(), low);
      Tensor x32 = x.detach().to(mt::kFloat32).requires_grad_();
      Tensor y32 = F::interpolate(x32, o);
      EXPECT_EQ(y.to(mt::kFloat32).to_vector<float>(), y32.to(low).to(mt::kFloat32).to_vector<float>());
      Tensor gy = mt::randn(y.sizes()).to(low);
      y.backward(gy);
      y32.backward(gy.to(mt::kFloat32));
      EXPECT_EQ(x.grad().dtype(), low);
      EXPECT_EQ(x.grad().to(mt::kFloat32).to_vector<float>(), x32.grad().to(low).to(mt::kFloat32).to_vector<float>());
    }
  }
}

TEST(Interpolate, UpsampleModule) {
  mt::manual_seed(4);
  Tensor x = mt::randn({1, 2, 3, 3});
  mt::nn::Upsample up({.scale_factor = {2.0}, .mode = "bilinear", .align_corners = true});
  EXPECT_EQ(up.forward(x).to_vector<float>(),
            F::interpolate(x, {.scale_factor = {2.0}, .mode = "bilinear", .align_corners = true}).to_vector<float>());
  EXPECT_EQ(up.forward(x).sizes(), (mt::Shape{1, 2, 6, 6}));
  EXPECT_EQ(up.extra_repr(), "scale_factor=[2], mode=bilinear, align_corners=True");
  EXPECT_TRUE(up.parameters().empty());
  // Nearest x2 repeats each pixel in a 2x2 block.
  Tensor p = mt::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_EQ(mt::nn::Upsample({.scale_factor = {2.0}}).forward(p).to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}
