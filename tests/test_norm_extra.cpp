// GroupNorm, RMSNorm, InstanceNorm1d/2d and channel dropout (Dropout1d/2d): float64 gradchecks,
// the modules against their functions, autocast, edges and errors. PyTorch reference values
// for the norms are in tests/fixtures/reference_new_ops.json (tests/test_new_ops.cpp).
#include <cmath>

#include "autograd/gradcheck.h"
#include "test_util.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
using testing::HasSubstr;

namespace {
double max_diff(const Tensor& a, const Tensor& b) {
  return mt::amax(mt::abs(a.to(mt::kFloat64) - b.to(mt::kFloat64))).item<double>();
}
bool close(const Tensor& a, const Tensor& b) { return a.sizes() == b.sizes() && max_diff(a, b) <= 1e-6; }
bool same(const Tensor& a, const Tensor& b) { return a.sizes() == b.sizes() && max_diff(a, b) == 0; }
Tensor f64(const mt::Shape& s) { return (mt::randn(s, {.dtype = mt::kFloat64}) * 1.5 + 0.25).requires_grad_(); }
}  // namespace

// Through the layer_norm op: its backward is differentiable too.
TEST(NormExtra, Float64SecondOrder) {
  mt::manual_seed(12);
  Tensor x = f64({2, 6, 3}), w = f64({6}), b = f64({6});
  std::string why;
  EXPECT_TRUE(
      mt::autograd::gradgradcheck([](auto& in) { return F::group_norm(in[0], 3, in[1], in[2]); }, {x, w, b}, {}, &why))
      << why;
  Tensor i = f64({2, 3, 4, 2});
  EXPECT_TRUE(mt::autograd::gradgradcheck([](auto& in) { return F::instance_norm(in[0]); }, {i}, {}, &why)) << why;
}

TEST(NormExtra, Float64Gradcheck) {
  mt::manual_seed(11);
  Tensor x = f64({2, 6, 3}), w = f64({6}), b = f64({6});
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::group_norm(in[0], 3, in[1], in[2]); }, {x, w, b}));
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::group_norm(in[0], 1); }, {x}));
  Tensor r = f64({3, 4, 5}), rw = f64({5});
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::rms_norm(in[0], {5}, in[1], 1e-6); }, {r, rw}));
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::rms_norm(in[0], {4, 5}); }, {r}));
  Tensor i = f64({2, 3, 4, 2}), iw = f64({3}), ib = f64({3});
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::instance_norm(in[0], in[1], in[2]); }, {i, iw, ib}));
}

TEST(NormExtra, ModulesMatchTheirFunctionsAndNameTheirParameters) {
  mt::manual_seed(12);
  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(gn.state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  Tensor x = mt::randn({3, 4, 5, 5});
  EXPECT_TRUE(close(gn(x), F::group_norm(x, 2, gn.weight, gn.bias)));
  // Normalized groups: mean 0 and (biased) variance 1 over each group's channels and positions.
  Tensor g = gn(x).reshape({3, 2, -1});
  EXPECT_LT(mt::amax(mt::abs(mt::mean(g, {2}))).item<double>(), 1e-5);
  EXPECT_LT(mt::amax(mt::abs(mt::var(g, {2}, 0) - 1.0)).item<double>(), 1e-3);

  nn::RMSNorm rms(5);
  EXPECT_EQ(rms.state_dict().keys(), (std::vector<std::string>{"weight"}));
  Tensor y = rms(mt::randn({2, 5}) * 3.0);
  EXPECT_LT(mt::amax(mt::abs(mt::mean(y * y, {1}) - 1.0)).item<double>(), 1e-5);
  nn::RMSNorm plain(5, {.eps = 1e-3, .elementwise_affine = false});
  EXPECT_TRUE(plain.state_dict().keys().empty());

  nn::InstanceNorm2d in2(3, {.affine = true});
  EXPECT_EQ(in2.state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  Tensor img = mt::randn({3, 4, 4});  // unbatched [C, H, W]
  EXPECT_TRUE(close(in2(img), in2(img.unsqueeze(0)).squeeze(0)));
  nn::InstanceNorm1d in1(3);
  EXPECT_TRUE(in1.state_dict().keys().empty());  // affine = false by default, as PyTorch
  Tensor s = in1(mt::randn({2, 3, 9}));
  EXPECT_LT(mt::amax(mt::abs(mt::mean(s, {2}))).item<double>(), 1e-5);
}

TEST(NormExtra, AutocastRunsThemInFloat32) {
  Tensor x = mt::randn({2, 4, 3}).to(mt::kBFloat16);
  mt::amp::Autocast ac(mt::kBFloat16, true, mt::DeviceType::CPU);
  EXPECT_EQ(F::group_norm(x, 2).dtype(), mt::kFloat32);
  EXPECT_EQ(F::rms_norm(x, {3}).dtype(), mt::kFloat32);
  EXPECT_EQ(F::instance_norm(x).dtype(), mt::kFloat32);
}

TEST(NormExtra, EdgesAndErrors) {
  EXPECT_EQ(F::group_norm(mt::randn({0, 4, 3}), 2).sizes(), (mt::Shape{0, 4, 3}));
  EXPECT_EQ(F::instance_norm(mt::randn({0, 2, 3})).sizes(), (mt::Shape{0, 2, 3}));
  // A constant group: variance 0, output 0 (not NaN), as PyTorch with eps > 0.
  EXPECT_EQ(mt::amax(mt::abs(F::group_norm(mt::ones({1, 2, 4}), 1))).item<double>(), 0.0);
  EXPECT_THAT(
      [] {
        F::group_norm(mt::randn({2, 6, 3}), 4);
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("must divide")));
  EXPECT_THAT(
      [] {
        F::group_norm(mt::randn({2, 6, 3}), 3, mt::ones({5}));
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("weight must have shape [6]")));
  EXPECT_THAT(
      [] {
        F::rms_norm(mt::randn({2, 6}), {4});
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("trailing dims")));
  EXPECT_THAT(
      [] {
        F::group_norm(mt::ones({2, 4}, {.dtype = mt::kInt64}), 2);
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("floating-point")));
  EXPECT_THAT(
      [] {
        nn::InstanceNorm2d(3)(mt::randn({2, 3, 4}));
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("3 channels")));
  EXPECT_THAT([] { nn::GroupNorm(3, 4); }, testing::ThrowsMessage<mt::Error>(HasSubstr("divide")));
}

// Layer norm rows longer than the kernels' 64 partial sums, with a tail (200 = 3 * 64 + 8), in
// fp32 and bf16 against the same op in float64: output, input, weight and bias gradients.
TEST(NormExtra, LayerNormLongRowsMatchFloat64) {
  mt::manual_seed(9);
  const Tensor x = mt::randn({5, 200}) * 2.0 + 0.5, w = mt::randn({200}), b = mt::randn({200}),
               gy = mt::randn({5, 200});
  auto run = [&](mt::DType dt) {
    Tensor xt = x.to(dt).clone().requires_grad_(), wt = w.to(dt).clone().requires_grad_();
    Tensor bt = b.to(dt).clone().requires_grad_();
    Tensor y = F::layer_norm(xt, {200}, wt, bt);
    y.backward(gy.to(dt));
    return std::vector<Tensor>{y, xt.grad(), wt.grad(), bt.grad()};
  };
  const std::vector<Tensor> want = run(mt::kFloat64);
  const char* names[] = {"y", "gx", "gw", "gb"};
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    const std::vector<Tensor> got = run(dt);
    for (size_t k = 0; k < got.size(); ++k) {
      // relative to the largest value (gw sums 5 rows of products)
      const double scale = mt::amax(mt::abs(want[k])).item<double>();
      EXPECT_LE(max_diff(got[k], want[k]), (dt == mt::kFloat32 ? 1e-5 : 2e-2) * scale)
          << names[k] << " " << mt::dtype_name(dt);
    }
  }
}

// A bf16 layer norm computes in fp32 from its exactly widened input and rounds once, so its
// output and input gradient are the fp32 op's on the same values, rounded to bf16, bit for bit:
// rows shorter than, a multiple of, and not a multiple of the 32 elements that the AVX-512 path
// normalizes and rounds in one pass (the rest through the fp32 buffer).
TEST(NormExtra, Bf16LayerNormIsTheFp32OneRounded) {
  mt::manual_seed(21);
  for (int64_t n : {7, 64, 200, 1029}) {
    const Tensor x = (mt::randn({3, n}) * 2.0 + 0.5).to(mt::kBFloat16), gy = mt::randn({3, n}).to(mt::kBFloat16);
    const Tensor w = mt::randn({n}).to(mt::kBFloat16), b = mt::randn({n}).to(mt::kBFloat16);
    auto run = [&](mt::DType dt) {
      Tensor xt = x.to(dt).clone().requires_grad_();
      Tensor y = F::layer_norm(xt, {n}, w.to(dt), b.to(dt));
      y.backward(gy.to(dt));
      return std::pair{y.to(mt::kBFloat16), xt.grad().to(mt::kBFloat16)};
    };
    const auto [y16, gx16] = run(mt::kBFloat16);
    const auto [y32, gx32] = run(mt::kFloat32);
    EXPECT_TRUE(same(y16, y32)) << "y, n " << n;
    EXPECT_TRUE(same(gx16, gx32)) << "gx, n " << n;
  }
}

// The group_norm kernels (group and instance norm) against the same norm composed in float64:
// groups longer than the kernels' 64 partial sums and channels of one position, a permuted
// (non-contiguous) input, with and without the affine; and bf16, which computes in fp32 from
// its exactly widened input and rounds once: the fp32 op's results rounded, bit for bit.
TEST(NormExtra, GroupNormKernelsMatchFloat64AndBf16IsFp32Rounded) {
  mt::manual_seed(23);
  struct Shape4 {
    mt::Shape shape;
    int64_t groups;
  };
  for (const Shape4& c : {Shape4{{2, 8, 9, 11}, 2}, Shape4{{3, 6, 1}, 3}, Shape4{{2, 4, 5, 3}, 4}}) {
    const mt::Shape shape = c.shape;  // (named copies: clang 14 cannot capture structured bindings)
    const int64_t G = c.groups, N = shape[0], C = shape[1];
    for (bool affine : {true, false}) {
      SCOPED_TRACE(mt::shape_str(shape) + " groups " + std::to_string(G) + (affine ? " affine" : ""));
      // Stored transposed: the op sees a non-contiguous view.
      mt::Shape t = shape;
      std::swap(t[0], t[1]);
      const Tensor x64 = (mt::randn(t, {.dtype = mt::kFloat64}) * 3.0 + 2.0).transpose(0, 1);
      const Tensor w64 = mt::randn({C}, {.dtype = mt::kFloat64}), b64 = mt::randn({C}, {.dtype = mt::kFloat64});
      const Tensor gy = mt::randn(shape, {.dtype = mt::kFloat64});
      auto run = [&](mt::DType dt, bool composed) {
        Tensor x = x64.to(dt).detach().requires_grad_(), w = w64.to(dt).detach().requires_grad_();
        Tensor b = b64.to(dt).detach().requires_grad_();
        Tensor y;
        if (composed) {
          Tensor x3 = x.reshape({N, G, -1}), xm = x3 - mt::mean(x3, {2}, true);
          y = (xm * mt::rsqrt(mt::mean(xm * xm, {2}, true) + 1e-5)).reshape(x.sizes());
          if (affine) {
            mt::Shape pc(x.sizes().size(), 1);
            pc[1] = C;
            y = y * w.reshape(pc) + b.reshape(pc);
          }
        } else {
          y = affine ? F::group_norm(x, G, w, b) : F::group_norm(x, G);
        }
        y.backward(gy.to(dt));
        std::vector<Tensor> r{y, x.grad()};
        if (affine) r.insert(r.end(), {w.grad(), b.grad()});
        return r;
      };
      const auto ref = run(mt::kFloat64, true), f32 = run(mt::kFloat32, false), bf16 = run(mt::kBFloat16, false);
      for (size_t i = 0; i < ref.size(); ++i) {
        // At least 1: a group of two elements normalizes to +-1 whatever x, and its gx is ~0.
        const double scale = std::max(1.0, mt::amax(mt::abs(ref[i])).item<double>());
        EXPECT_LE(max_diff(f32[i], ref[i]), 2e-6 * scale * std::sqrt(double(x64.numel()))) << "output " << i;
      }
      // bf16's inputs are the bf16 values; the fp32 op on those same values, rounded.
      auto rounded = [&](mt::DType dt) {
        Tensor x = x64.to(mt::kBFloat16).to(dt).detach().requires_grad_();
        Tensor w = w64.to(mt::kBFloat16).to(dt), b = b64.to(mt::kBFloat16).to(dt);
        Tensor y = affine ? F::group_norm(x, G, w, b) : F::group_norm(x, G);
        y.backward(gy.to(mt::kBFloat16).to(dt));
        return std::pair{y.to(mt::kBFloat16), x.grad().to(mt::kBFloat16)};
      };
      const auto [y16, gx16] = rounded(mt::kBFloat16);
      const auto [y32, gx32] = rounded(mt::kFloat32);
      EXPECT_TRUE(same(y16, y32));
      EXPECT_TRUE(same(gx16, gx32));
      EXPECT_EQ(bf16[0].dtype(), mt::kBFloat16);
    }
  }
  // instance_norm is the group norm of one channel per group.
  const Tensor x = mt::randn({2, 3, 4, 5}), w = mt::randn({3}), b = mt::randn({3});
  EXPECT_TRUE(same(F::instance_norm(x, w, b), F::group_norm(x, 3, w, b)));
}

// A NaN stays in its own (sample, group): that run's outputs and input gradients are NaN, the
// other groups' are finite (as PyTorch's group_norm).
TEST(NormExtra, GroupNormNanStaysInItsGroup) {
  mt::manual_seed(29);
  Tensor x = mt::randn({2, 4, 3});
  x.index_put_({0, 1, 2}, NAN);  // sample 0, channel 1: group 0 of 2 (channels 0-1)
  x.requires_grad_();
  Tensor y = F::group_norm(x, 2, mt::ones({4}), mt::zeros({4}));
  y.backward(mt::ones_like(y));
  for (const Tensor& t : {y.detach(), x.grad()}) {
    const Tensor nan = mt::ne(t, t);  // NaN only
    EXPECT_TRUE(mt::all(nan.narrow(0, 0, 1).narrow(1, 0, 2)).item<bool>());
    EXPECT_FALSE(mt::any(nan.narrow(1, 2, 2)).item<bool>());
    EXPECT_FALSE(mt::any(nan.narrow(0, 1, 1)).item<bool>());
  }
}

// The forward kernel normalizes up to 4 rows at a time, phase by phase (bf16/fp16: as many as
// their fp32 copies fit in 8192 floats): every row of a tensor gives the same bits as that row
// alone, with and without weight and bias, for row counts that leave a partial group, rows
// that fit 1, 2 or 4 to a group, and per-row mean and rstd saved for backward.
TEST(NormExtra, LayerNormRowGroupsGiveEachRowsOwnResult) {
  mt::manual_seed(13);
  for (int64_t n : {7, 1000, 3000, 5000})
    for (int64_t rows : {1, 3, 6, 9})
      for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat16}) {
        const Tensor x = (mt::randn({rows, n}) * 3.0 + 1.0).to(dt), w = mt::randn({n}).to(dt),
                     b = mt::randn({n}).to(dt);
        for (bool affine : {true, false}) {
          const Tensor y = affine ? F::layer_norm(x, {n}, w, b) : F::layer_norm(x, {n});
          for (int64_t r = 0; r < rows; ++r) {
            const Tensor xr = x.slice(0, r, r + 1).contiguous();
            const Tensor yr = affine ? F::layer_norm(xr, {n}, w, b) : F::layer_norm(xr, {n});
            ASSERT_TRUE(same(y.slice(0, r, r + 1), yr))
                << "row " << r << " of " << rows << ", n " << n << ", " << mt::dtype_name(dt) << ", affine " << affine;
          }
        }
      }
}

// The forward takes a row's mean and variance from sums shifted by the mean of its first 16
// elements, one read, and the centred squares where those would cancel: rows that open with an
// outlier far from the mean (cancellation), rows around a large offset, constant rows (variance
// 0) and short rows, against the same values in float64 (output and the input gradient, which
// reads the saved statistics); a NaN or inf anywhere in a row makes that row NaN and no other.
TEST(NormExtra, LayerNormStatisticsFromOneReadMatchFloat64) {
  mt::manual_seed(17);
  for (int64_t n : {3, 200, 8192}) {
    Tensor x = mt::randn({6, n});
    x.select(0, 0).narrow(0, 0, n > 16 ? 16 : 1).add_(1e4);  // opens far from the mean: the fallback
    x.select(0, 1).add_(64.0);             // a large offset (no larger: the mean itself rounds to fp32)
    x.select(0, 2).fill_(3.5);             // constant: variance 0
    x.select(0, 3).mul_(50.0).add_(-7.0);  // wide
    x.index_put_({4, n - 1}, -3e3);        // an outlier last
    x.select(0, 5).mul_(1e-3);             // small values
    const Tensor w = mt::randn({n}), b = mt::randn({n}), gy = mt::randn({6, n});
    auto run = [&](mt::DType dt) {
      Tensor xt = x.to(dt).clone().requires_grad_();
      Tensor y = F::layer_norm(xt, {n}, w.to(dt), b.to(dt));
      y.backward(gy.to(dt));
      return std::pair{y, xt.grad()};
    };
    const auto [y64, g64] = run(mt::kFloat64);
    const auto [y32, g32] = run(mt::kFloat32);
    for (int64_t r = 0; r < 6; ++r) {
      const std::string what = "row " + std::to_string(r) + ", n " + std::to_string(n);
      const double sy = mt::amax(mt::abs(y64.select(0, r))).item<double>();
      const double sg = mt::amax(mt::abs(g64.select(0, r))).item<double>();
      EXPECT_LE(max_diff(y32.select(0, r), y64.select(0, r)), 1e-5 * sy) << what;
      EXPECT_LE(max_diff(g32.select(0, r), g64.select(0, r)), 1e-5 * (sg + 1)) << what;
    }
  }
  // NaN and inf stay in their rows, in fp32 and bf16.
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
    Tensor x = mt::randn({4, 100});
    x.index_put_({1, 0}, std::nan(""));
    x.index_put_({2, 57}, INFINITY);
    const std::vector<double> y = F::layer_norm(x.to(dt), {100}).to_vector<double>();
    for (size_t r = 0; r < 4; ++r)
      for (size_t i = 0; i < 100; ++i)
        EXPECT_EQ(std::isnan(y[r * 100 + i]), r == 1 || r == 2) << mt::dtype_name(dt) << " row " << r << " " << i;
  }
}

TEST(ChannelDropout, WholeChannelsAreDroppedAndScaled) {
  mt::manual_seed(5);
  const double p = 0.3;
  Tensor x = mt::ones({16, 32, 3, 3}).requires_grad_();
  Tensor y = F::dropout2d(x, p, true);
  // Each [3, 3] plane is all 0 or all 1 / (1 - p).
  Tensor planes = y.reshape({16 * 32, 9});
  Tensor lo = mt::amin(planes, {1}), hi = mt::amax(planes, {1});
  EXPECT_TRUE(same(lo, hi));
  std::vector<double> v = lo.to_vector<double>();
  int dropped = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || std::fabs(e - 1 / (1 - p)) < 1e-6) << e;
    dropped += e == 0.0;
  }
  EXPECT_NEAR(double(dropped) / double(v.size()), p, 0.06);  // 512 draws: 4 standard deviations
  // The gradient is the same mask.
  mt::sum(y).backward();
  EXPECT_TRUE(same(x.grad(), y.detach()));
  // Eval mode and p = 0: the identity; unbatched [C, H, W] and [C, L] inputs; modules.
  Tensor z = mt::randn({4, 3, 3});
  EXPECT_TRUE(F::dropout2d(z, p, false).is_same(z));
  EXPECT_EQ(F::dropout2d(z, p, true).sizes(), z.sizes());
  EXPECT_EQ(F::dropout1d(mt::randn({4, 7}), p, true).sizes(), (mt::Shape{4, 7}));
  nn::Dropout1d d1(0.5);
  Tensor seq = mt::ones({2, 64, 10});
  Tensor out = d1(seq);
  EXPECT_TRUE(same(mt::amin(out, {2}), mt::amax(out, {2})));
  d1.eval();
  EXPECT_TRUE(d1(seq).is_same(seq));
  EXPECT_THAT(
      [] {
        F::dropout2d(mt::randn({2, 3}), 0.5, true);
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("3 or 4 dims")));
  EXPECT_THAT(
      [] {
        F::dropout1d(mt::randn({2, 3, 4, 5}), 0.5, true);
      },
      testing::ThrowsMessage<mt::Error>(HasSubstr("2 or 3 dims")));
}
