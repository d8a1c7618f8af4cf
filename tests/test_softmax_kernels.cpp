// The softmax / log_softmax kernels (core/cpu/softmax.cpp): along last and non-last dims
// against float64 loops, the one-pass backward against gradcheck, huge logits (log_softmax
// and cross_entropy keep log(sum)), a bf16 input under autocast read without an fp32 copy,
// and `where` with broadcast masks against a scalar loop.
#include <cmath>
#include <vector>

#include "core/nn_kernels.h"
#include "test_util.h"

namespace mt = mantissa;
using mt::Tensor;

namespace {

// softmax (or log_softmax) of x [A, B, C] along dim, in double by plain loops.
std::vector<double> reference_softmax(const std::vector<double>& x, const mt::Shape& s, int64_t dim, bool log) {
  const int64_t n = s[dim];
  int64_t inner = 1, outer = 1;
  for (int64_t d = dim + 1; d < int64_t(s.size()); ++d) inner *= s[d];
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + c; };
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[at(j)]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[at(j)] - mx);
      for (int64_t j = 0; j < n; ++j) y[at(j)] = log ? (x[at(j)] - mx) - std::log(sum) : std::exp(x[at(j)] - mx) / sum;
    }
  return y;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  const std::vector<double> g = got.to(mt::kFloat64).to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

}  // namespace

// Rows longer than a vector, shorter than one, and columns blocks that do not divide kCols.
TEST(SoftmaxKernels, EveryDimMatchesFloat64Loops) {
  mt::manual_seed(11);
  // {2, 300, 200} along dim 1: a bf16 output's column buffer holds 96 of a block's columns at a
  // time (blocks of 128 and 72 columns: 96 + 32, then 72).
  for (const mt::Shape& s : {mt::Shape{3, 37, 5}, mt::Shape{2, 4, 300}, mt::Shape{130, 3, 2}, mt::Shape{2, 300, 200}}) {
    Tensor x = mt::randn(s) * 4.0;
    const std::vector<double> xd = x.to(mt::kFloat64).to_vector<double>();
    for (int64_t d = 0; d < 3; ++d)
      for (bool log : {false, true}) {
        const std::string what = std::string(log ? "log_softmax" : "softmax") + " dim " + std::to_string(d);
        const std::vector<double> want = reference_softmax(xd, s, d, log);
        expect_near_all(log ? mt::log_softmax(x, d) : mt::softmax(x, d), want, 2e-6, what + " fp32");
        expect_near_all(log ? mt::log_softmax(x.to(mt::kFloat64), d) : mt::softmax(x.to(mt::kFloat64), d), want, 1e-12,
                        what + " fp64");
        // bf16 in, bf16 out: one rounding of the fp32 result (the input is exactly its bf16 value).
        Tensor xb = x.to(mt::kBFloat16);
        const std::vector<double> wantb = reference_softmax(xb.to(mt::kFloat64).to_vector<double>(), s, d, log);
        expect_near_all(log ? mt::log_softmax(xb, d) : mt::softmax(xb, d), wantb, 8e-3, what + " bf16");
      }
  }
}

TEST(SoftmaxKernels, NonContiguousInputAndMaskedRows) {
  Tensor x = mt::randn({6, 5}).t();  // [5, 6] transposed view
  const std::vector<double> xd = x.contiguous().to(mt::kFloat64).to_vector<double>();
  expect_near_all(mt::softmax(x, 1), reference_softmax(xd, {5, 6}, 1, false), 2e-6, "transposed, dim 1");
  expect_near_all(mt::softmax(x, 0), reference_softmax(xd, {5, 6}, 0, false), 2e-6, "transposed, dim 0");
  // A row of -inf gives NaN in softmax and log_softmax along either dim, as PyTorch 1.13 (0 / 0
  // and -inf - log(0)); the shift keeps it from being inf - inf inside the kernel.
  Tensor m = mt::full({2, 3}, -INFINITY);
  for (int64_t d = 0; d < 2; ++d) {
    for (double v : mt::softmax(m, d).to_vector<double>()) EXPECT_TRUE(std::isnan(v));
    for (double v : mt::log_softmax(m, d).to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  }
}

// The one-pass backward kernel along every dim, float64.
TEST(SoftmaxKernels, BackwardGradcheckEveryDim) {
  mt::manual_seed(3);
  Tensor x = mt::randn({3, 4, 5}, {.dtype = mt::kFloat64}).requires_grad_();
  for (int64_t d = 0; d < 3; ++d)
    for (bool log : {false, true}) {
      std::string why;
      const bool ok = mt::autograd::gradcheck(
          [=](const std::vector<Tensor>& in) {
            Tensor y = log ? mt::log_softmax(in[0], d) : mt::softmax(in[0], d);
            return y *
                   mt::sin(mt::arange(0, 60, 1, {.dtype = mt::kFloat64}).reshape({3, 4, 5}));  // a non-uniform upstream
          },
          {x}, {}, &why);
      EXPECT_TRUE(ok) << (log ? "log_softmax" : "softmax") << " dim " << d << ": " << why;
    }
}

// log_softmax is (x - max) - log(sum): PyTorch 1.13 gives log_softmax([3e6, 3e6]) = -0.6931;
// x - (max + log(sum)) gave -0.75 (3e6 + 0.693 rounds to 3e6 + 0.75 in fp32).
TEST(SoftmaxKernels, HugeLogitsKeepLogSum) {
  Tensor x = mt::tensor({3e6f, 3e6f});
  for (double v : mt::log_softmax(x, 0).to_vector<double>()) EXPECT_NEAR(v, -std::log(2.0), 1e-6);
  // Logits near 1e4 (exact in fp32): the differences 0, 1, 2 are exact, so the reference is too.
  Tensor y = mt::tensor({1e4f, 1e4f + 1, 1e4f + 2}).reshape({1, 3});
  const double ls = std::log(1 + std::exp(1.0) + std::exp(2.0));
  const std::vector<double> want = {-ls, 1 - ls, 2 - ls};
  expect_near_all(mt::log_softmax(y, 1), want, 1e-6, "log_softmax near 1e4");
  // cross_entropy: the loss and its gradient softmax - onehot.
  for (int64_t target : {0, 2}) {
    Tensor logits = y.clone().requires_grad_();
    Tensor loss = mt::nn::functional::cross_entropy(logits, mt::from_vector<int64_t>({target}, {1}));
    EXPECT_NEAR(loss.item<double>(), -want[target], 1e-6) << "target " << target;
    loss.backward();
    std::vector<double> g = logits.grad().to_vector<double>();
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_NEAR(g[c], std::exp(want[c]) - (c == target ? 1.0 : 0.0), 1e-6) << "target " << target << " c " << c;
  }
  Tensor big = mt::tensor({3e6f, 3e6f}).reshape({1, 2}).requires_grad_();
  Tensor loss = mt::nn::functional::cross_entropy(big, mt::from_vector<int64_t>({0}, {1}));
  EXPECT_NEAR(loss.item<double>(), std::log(2.0), 1e-6);
  loss.backward();
  const std::vector<double> g = big.grad().to_vector<double>();
  EXPECT_NEAR(g[0], -0.5, 1e-6);
  EXPECT_NEAR(g[1], 0.5, 1e-6);
}

// Under autocast a bf16 input feeds the fp32 softmax directly: the output is fp32 and equals the
// softmax of the fp32 copy bit for bit; the gradient comes back in bf16, one rounding of the fp32 one.
// Rows of 145 along dim 2 take the software-pipelined row kernel (rows of 128-2048) on AVX-512.
TEST(SoftmaxKernels, Bf16InputUnderAutocastReadsBf16) {
  mt::manual_seed(7);
  for (const mt::Shape& shape : {mt::Shape{4, 8, 16}, mt::Shape{3, 5, 145}})
    for (int64_t d : {1, 2})
      for (bool log : {false, true}) {
        Tensor x32 = mt::randn(shape) * 3.0;
        Tensor gy = mt::randn(shape);
        Tensor xb = x32.to(mt::kBFloat16).requires_grad_();
        Tensor xf = xb.detach().to(mt::kFloat32).requires_grad_();
        Tensor yb, yf = log ? mt::log_softmax(xf, d) : mt::softmax(xf, d);
        {
          mt::amp::Autocast ac(mt::kBFloat16);
          yb = log ? mt::log_softmax(xb, d) : mt::softmax(xb, d);
        }
        ASSERT_EQ(yb.dtype(), mt::kFloat32);
        EXPECT_EQ(yb.to_vector<float>(), yf.to_vector<float>())
            << mt::shape_str(shape) << " dim " << d << " log " << log;
        (yb * gy).sum().backward();
        (yf * gy).sum().backward();
        ASSERT_EQ(xb.grad().dtype(), mt::kBFloat16);
        EXPECT_EQ(xb.grad().to_vector<float>(), xf.grad().to(mt::kBFloat16).to_vector<float>()) << "dim " << d;
      }
}

// Last-dim rows go through the kernel in groups of up to 8 that fit a 4096-float buffer, longer
// rows one at a time: row counts that leave a partial group, rows of 1000 (4 to a group) and of
// 5000 (alone, in chunks), forward and backward, in fp32, bf16 and fp16 against float64 loops.
TEST(SoftmaxKernels, RowGroupsAndLongRows) {
  mt::manual_seed(5);
  for (const mt::Shape& s : {mt::Shape{19, 256}, mt::Shape{7, 1000}, mt::Shape{3, 5000}, mt::Shape{9, 1}}) {
    Tensor x = mt::randn(s) * 3.0;
    Tensor gy = mt::randn(s);
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kHalf})
      for (bool log : {false, true}) {
        const std::string what =
            std::string(log ? "log_softmax " : "softmax ") + mt::dtype_name(dt) + " rows of " + std::to_string(s[1]);
        Tensor xt = x.to(dt).clone().requires_grad_();  // to(kFloat32) of x is x itself
        const std::vector<double> xd = xt.detach().to(mt::kFloat64).to_vector<double>();
        const std::vector<double> want = reference_softmax(xd, {1, s[0], s[1]}, 2, log);
        Tensor y = log ? mt::log_softmax(xt, 1) : mt::softmax(xt, 1);
        const double tol = dt == mt::kFloat32 ? 2e-6 : dt == mt::kBFloat16 ? 8e-3 : 1e-3;
        expect_near_all(y, want, tol, what);
        // Backward against the float64 formula applied to the rounded output and gradient.
        Tensor g = gy.to(dt);
        (y * g).sum().backward();
        const std::vector<double> yd = y.detach().to(mt::kFloat64).to_vector<double>();
        const std::vector<double> gd = g.to(mt::kFloat64).to_vector<double>();
        std::vector<double> gx(yd.size());
        for (int64_t r = 0; r < s[0]; ++r) {
          double sum = 0;
          for (int64_t i = 0; i < s[1]; ++i) sum += log ? gd[r * s[1] + i] : gd[r * s[1] + i] * yd[r * s[1] + i];
          for (int64_t i = 0; i < s[1]; ++i) {
            const int64_t k = r * s[1] + i;
            gx[k] = log ? gd[k] - std::exp(yd[k]) * sum : yd[k] * (gd[k] - sum);
          }
        }
        expect_near_all(xt.grad(), gx, dt == mt::kFloat32 ? 1e-5 : 2e-2, what + " backward");
      }
  }
}

// Last-dim softmax rows of 128 to 2048 run software-pipelined on AVX-512 (a row's maximum, the
// next row's exps and the one before's output in one loop; first and last rows outside it): rows
// ending in a partial 32 (1, 17) or not, several tasks' worth of rows, a row of -inf (NaN, as
// torch), a half-masked row (exact zeros) and a row holding a NaN (NaN, its neighbours not), in
// fp32 and bf16. Every row equals the same row's softmax computed alone, bit for bit, and the
// float64 loops within the dtype's tolerance.
TEST(SoftmaxKernels, PipelinedRowsMatchRowsAlone) {
  mt::manual_seed(11);
  for (const int64_t n : {int64_t(128), int64_t(145), int64_t(161), int64_t(2048)}) {
    const int64_t rows = n == 2048 ? 9 : 300;
    Tensor x = mt::randn({rows, n}) * 3.0;
    x.select(0, 1).fill_(-INFINITY);
    x.select(0, 2).narrow(0, 0, n / 2).fill_(-INFINITY);
    x.select(0, 4).select(0, n - 1).fill_(NAN);
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
      const std::string what = std::string("softmax ") + mt::dtype_name(dt) + " rows of " + std::to_string(n);
      const Tensor xt = x.to(dt);
      const std::vector<float> y = mt::softmax(xt, 1).to(mt::kFloat32).to_vector<float>();
      const std::vector<double> want =
          reference_softmax(xt.to(mt::kFloat64).to_vector<double>(), {1, rows, n}, 2, false);
      const double tol = dt == mt::kFloat32 ? 2e-6 : 8e-3;
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> alone = mt::softmax(xt.narrow(0, r, 1), 1).to(mt::kFloat32).to_vector<float>();
        for (int64_t i = 0; i < n; ++i) {
          const float got = y[r * n + i];
          const bool nan_row = r == 1 || r == 4;
          ASSERT_EQ(std::isnan(got), nan_row) << what << " row " << r << " at " << i;
          if (nan_row) continue;
          ASSERT_EQ(got, alone[i]) << what << " row " << r << " at " << i << " against the row alone";
          if (r == 2 && i < n / 2) {
            ASSERT_EQ(got, 0.0f) << what << ": a masked element";
          }
          ASSERT_NEAR(got, want[r * n + i], tol * (1 + std::fabs(want[r * n + i])))
              << what << " row " << r << " at " << i;
        }
      }
    }
  }
}

// Along a middle dim, whole blocks of 128 columns go through kernels that keep the block's
// maxima and sums in registers (forward with an fp32 output, backward); the same columns in a
// narrower tensor (blocks of 100: the general loops) give the same bits, output and gradient,
// in fp32, in bf16 under autocast (fp32 out, bf16 gradient) and in bf16 (bf16 out and gradient).
// A column of -inf and one holding a NaN give NaN (that column only); a half-masked column
// exact zeros (softmax) and -inf (log_softmax).
TEST(SoftmaxKernels, ColumnBlocksMatchNarrowerBlocks) {
  mt::manual_seed(13);
  const int64_t n = 40, inner = 256;
  Tensor x = mt::randn({2, n, inner}) * 3.0;
  x.select(2, 3).fill_(-INFINITY);
  x.select(2, 130).select(1, 7).fill_(NAN);
  x.select(2, 200).narrow(1, 0, n / 2).fill_(-INFINITY);
  const Tensor gy = mt::randn({2, n, inner});
  enum class Mode { kFp32, kAutocast, kBf16 };
  for (Mode mode : {Mode::kFp32, Mode::kAutocast, Mode::kBf16})
    for (bool log : {false, true}) {
      const std::string what =
          std::string(log ? "log_softmax " : "softmax ") + (mode == Mode::kFp32       ? "fp32"
                                                            : mode == Mode::kAutocast ? "autocast bf16"
                                                                                      : "bf16");
      const Tensor xt = x.to(mode == Mode::kFp32 ? mt::kFloat32 : mt::kBFloat16);
      // The output and the input's gradient, both as floats.
      auto run = [&](const Tensor& t, const Tensor& g) {
        Tensor leaf = t.detach().requires_grad_();
        Tensor y;
        {
          mt::amp::Autocast ac(mt::kBFloat16, mode == Mode::kAutocast);
          y = log ? mt::log_softmax(leaf, 1) : mt::softmax(leaf, 1);
        }
        (y * g.to(y.dtype())).sum().backward();
        return std::make_pair(y.to(mt::kFloat32).to_vector<float>(), leaf.grad().to(mt::kFloat32).to_vector<float>());
      };
      const auto [y, gx] = run(xt, gy);
      for (int64_t c0 : {int64_t(0), int64_t(100), int64_t(156)}) {
        const auto [part, gpart] = run(xt.narrow(2, c0, 100).contiguous(), gy.narrow(2, c0, 100).contiguous());
        for (int64_t o = 0; o < 2; ++o)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < 100; ++c) {
              const size_t at = size_t((o * n + j) * inner + c0 + c), pat = size_t((o * n + j) * 100 + c);
              const int64_t col = c0 + c;
              const bool nan_column = col == 3 || col == 130;
              ASSERT_EQ(std::isnan(y[at]), nan_column) << what << " column " << col << " row " << j;
              ASSERT_EQ(std::isnan(gx[at]), nan_column) << what << " gradient, column " << col << " row " << j;
              if (nan_column) continue;
              ASSERT_EQ(y[at], part[pat]) << what << " column " << col << " row " << j << " against blocks of 100";
              ASSERT_EQ(gx[at], gpart[pat]) << what << " gradient, column " << col << " row " << j;
              if (col == 200 && j < n / 2) {
                ASSERT_EQ(y[at], log ? -INFINITY : 0.0f) << what << ": a masked element";
              }
            }
      }
    }
}

// The backward kernel over bf16 rows (y, g and the gradient bf16) equals the one over the same
// values in fp32, rounded once, bit for bit: on AVX-512 it reads bf16 as even and odd halves,
// rounds by vcvtne2ps2bf16 and puts the elements back in order. Rows of 256, 145 and 1000 (tails
// of 17 and 40), softmax and log_softmax. (Its row sums' order, which it keeps, moves a bf16
// result too rarely to be seen here; a hash of the bits against the previous kernel checked it.)
TEST(SoftmaxKernels, Bf16BackwardRowsAreTheFp32KernelRounded) {
  mt::manual_seed(17);
  const mt::NnKernels& k = mt::nn_kernels_for(mt::Device::cpu(), "softmax_backward");
  for (int64_t n : {int64_t(256), int64_t(145), int64_t(1000)})
    for (bool log : {false, true}) {
      const Tensor x = mt::randn({5, n}) * 3.0;
      const Tensor yb = (log ? mt::log_softmax(x, 1) : mt::softmax(x, 1)).to(mt::kBFloat16);
      const Tensor gb = mt::randn({5, n}).to(mt::kBFloat16);
      const Tensor gxb = mt::empty({5, n}, {.dtype = mt::kBFloat16}), gxf = mt::empty({5, n});
      k.softmax_backward(yb, gb, gxb, log);
      k.softmax_backward(yb.to(mt::kFloat32), gb.to(mt::kFloat32), gxf, log);
      const std::vector<float> got = gxb.to(mt::kFloat32).to_vector<float>();
      const std::vector<float> want = gxf.to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << (log ? "log_softmax" : "softmax") << " rows of " << n << ", element " << i;
    }
}

// where over [B, H, T, T] with a [1, 1, T, T] mask, a scalar fill and non-unit strides, every
// element size, against a scalar loop.
TEST(WhereKernel, BroadcastMaskMatchesScalarLoop) {
  mt::manual_seed(5);
  const int64_t B = 2, H = 3, T = 7;
  Tensor mask = mt::rand({1, 1, T, T}) > 0.5;
  const std::vector<double> m = mask.to(mt::kFloat64).to_vector<double>();
  for (mt::DType t : {mt::kFloat32, mt::kBFloat16, mt::kHalf, mt::kFloat64, mt::kInt64, mt::kInt32, mt::kUInt8}) {
    Tensor a = (mt::rand({B, H, T, T}) * 100.0).to(t);
    Tensor b = (mt::rand({B, H, T, T}) * 100.0).to(t);
    const std::vector<double> av = a.to(mt::kFloat64).to_vector<double>(), bv = b.to(mt::kFloat64).to_vector<double>();
    const std::vector<double> y = mt::where(mask, a, b).to(mt::kFloat64).to_vector<double>();
    const std::vector<double> f = mt::masked_fill(a, mask, 3).to(mt::kFloat64).to_vector<double>();
    // b transposed in its last two dims: a non-unit inner stride.
    Tensor bt = b.transpose(2, 3);
    const std::vector<double> yt = mt::where(mask, a, bt).to(mt::kFloat64).to_vector<double>();
    for (int64_t i = 0; i < B * H * T * T; ++i) {
      const int64_t r = (i / T) % T, c = i % T, mi = r * T + c, ti = (i / (T * T)) * T * T + c * T + r;
      ASSERT_EQ(y[i], m[mi] != 0 ? av[i] : bv[i]) << mt::dtype_name(t) << " at " << i;
      ASSERT_EQ(f[i], m[mi] != 0 ? 3.0 : av[i]) << mt::dtype_name(t) << " at " << i;
      ASSERT_EQ(yt[i], m[mi] != 0 ? av[i] : bv[ti]) << mt::dtype_name(t) << " at " << i;
    }
  }
}

// A bf16 output takes the cheaper exp (core/cpu/vec_math.h, 3.4e-6): softmax and log_softmax
// into bf16 along the last dim (rows of 256 in groups, rows of 5000, longer than the row
// buffer) and along a middle dim stay within one bf16 step of the fp32 kernels' results rounded
// to bf16, a confident row's log-probability of -8e-5 included (exp(0) is exactly 1 in both). log_softmax's backward
// keeps the fp32 exp (g - exp(y) sum(g) cancels): into bf16 it is within a bf16 step of the double formula.
TEST(SoftmaxKernels, Bf16OutputWithinOneStepOfTheFp32Kernel) {
  mt::manual_seed(5);
  for (const auto& [shape, dim] : std::vector<std::pair<mt::Shape, int64_t>>{
           {{24, 256}, 1}, {{3, 5000}, 1}, {{4, 300, 40}, 1}, {{2, 64, 130}, 1}}) {
    Tensor x = mt::randn(shape) * 3.0;
    if (dim == 1 && shape.size() == 2) x.select(0, 0).fill_(0.0).select(0, 0).fill_(15.0);  // a confident row
    const Tensor xb = x.to(mt::kBFloat16);
    for (bool log : {false, true}) {
      auto op = [log, d = dim](const Tensor& t) { return log ? mt::log_softmax(t, d) : mt::softmax(t, d); };
      const std::vector<float> got = op(xb).to(mt::kFloat32).to_vector<float>();
      const std::vector<float> want = op(xb.to(mt::kFloat32)).to(mt::kBFloat16).to(mt::kFloat32).to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(mt::test::bf16_steps(got[i], want[i]), 1)
            << (log ? "log_softmax " : "softmax ") << mt::shape_str(shape) << " at " << i << ": " << got[i] << ", fp32 "
            << want[i];
    }
    Tensor xl = xb.detach().requires_grad_(true);
    const Tensor y = mt::log_softmax(xl, dim);
    const Tensor g = (mt::randn(shape) * 0.5).to(mt::kBFloat16);
    y.backward(g);
    const std::vector<double> yd = y.to(mt::kFloat64).to_vector<double>(), gd = g.to(mt::kFloat64).to_vector<double>();
    const Tensor gsum = g.to(mt::kFloat64).sum({dim}, true).expand(shape).contiguous();
    const std::vector<double> sd = gsum.to_vector<double>();
    const std::vector<double> gx = xl.grad().to(mt::kFloat64).to_vector<double>();
    for (size_t i = 0; i < gx.size(); ++i) {
      const double term = std::exp(yd[i]) * sd[i], want = gd[i] - term;
      ASSERT_NEAR(gx[i], want, 0x1p-8 * std::fabs(want) + 1e-6 * (std::fabs(gd[i]) + std::fabs(term)))
          << "log_softmax backward " << mt::shape_str(shape) << " at " << i;
    }
  }
}

// Autocast's fp32 softmax feeding a bf16 op (its output cast by Tensor::to): the cast's bf16
// gradient reaches softmax's backward as it is, read in the kernel (no fp32 copy of it), with the
// same bits as when it is widened first, which a hook on the softmax output forces (the engine
// widens a cast's narrow gradient wherever anything else can see it: hooks, retain_grad,
// autograd::grad, a sum with another gradient, a leaf). Rows and middle dims, 128-column blocks.
TEST(SoftmaxKernels, CastGradientReadAsBf16MatchesWidenedOne) {
  mt::manual_seed(11);
  auto copies = [](const mt::profiler::Profile& p) {
    int64_t n = 0;
    for (const auto& s : p.op_stats())
      if (s.name == "copy") n += s.calls;
    return n;
  };
  for (const mt::Shape& shape : {mt::Shape{4, 8, 16}, mt::Shape{3, 5, 145}, mt::Shape{2, 40, 256}})
    for (int64_t d : {1, 2})
      for (bool log : {false, true}) {
        const std::string what = mt::shape_str(shape) + " dim " + std::to_string(d) + (log ? " log" : "");
        const Tensor x0 = (mt::randn(shape) * 3.0).to(mt::kBFloat16);
        const Tensor w = mt::randn(shape).to(mt::kBFloat16), w32 = mt::randn(shape);
        // mode 0: as is; 1: a hook on y (sees fp32); 2: y also used in fp32 (a sum of gradients);
        // 3: y.retain_grad()
        std::vector<float> grads[4];
        int64_t copy_calls[4] = {};
        for (int mode = 0; mode < 4; ++mode) {
          Tensor x = x0.detach().requires_grad_();
          mt::profiler::Profile prof;
          Tensor y, loss;
          {
            mt::amp::Autocast ac(mt::kBFloat16);
            y = log ? mt::log_softmax(x, d) : mt::softmax(x, d);
            if (mode == 1)
              y.register_hook([&](const Tensor& g) {
                EXPECT_EQ(g.dtype(), mt::kFloat32) << what;
                return Tensor();
              });
            if (mode == 3) y.retain_grad();
            loss = (y.to(mt::kBFloat16) * w).sum();
            if (mode == 2) loss = loss + (y * w32).sum();
          }
          loss.backward();
          prof.stop();
          copy_calls[mode] = copies(prof);
          ASSERT_EQ(x.grad().dtype(), mt::kBFloat16) << what;
          grads[mode] = x.grad().to(mt::kFloat32).to_vector<float>();
          if (mode == 3) {
            ASSERT_EQ(y.grad().dtype(), mt::kFloat32) << what;
            EXPECT_EQ(y.grad().to_vector<float>(), w.to(mt::kFloat32).to_vector<float>()) << what;
          }
        }
        EXPECT_EQ(grads[0], grads[1]) << what;
        EXPECT_EQ(grads[0], grads[3]) << what;
        // The widened gradient is one copy more (bf16 -> fp32) than the one read as it is.
        EXPECT_EQ(copy_calls[0] + 1, copy_calls[1]) << what;
        // A sum with y's own fp32 gradient: the reference widens the cast's gradient, then adds.
        Tensor x = x0.detach().requires_grad_();
        Tensor y = log ? mt::log_softmax(x.to(mt::kFloat32), d) : mt::softmax(x.to(mt::kFloat32), d);
        Tensor g = w.to(mt::kFloat32) + w32;
        (y * g).sum().backward();
        EXPECT_EQ(grads[2], x.grad().to(mt::kFloat32).to_vector<float>()) << what;
      }
  // fp16 autocast: the cast's fp16 gradient reaches softmax's node too, which widens it itself
  // (its kernel reads bf16 only): the same bits as with the widening forced.
  {
    const Tensor x0 = mt::randn({5, 33}).to(mt::kFloat16), w = mt::randn({5, 33}).to(mt::kFloat16);
    std::vector<float> got[2];
    for (int hooked = 0; hooked < 2; ++hooked) {
      Tensor x = x0.detach().requires_grad_(), loss;
      {
        mt::amp::Autocast ac(mt::kFloat16);
        Tensor y = mt::softmax(x, 1);
        if (hooked == 1) y.register_hook([](const Tensor&) { return Tensor(); });
        loss = (y.to(mt::kFloat16) * w).sum();
      }
      loss.backward();
      ASSERT_EQ(x.grad().dtype(), mt::kFloat16);
      got[hooked] = x.grad().to(mt::kFloat32).to_vector<float>();
    }
    EXPECT_EQ(got[0], got[1]);
  }
  // A cast of an fp32 leaf: its .grad in fp32, the bf16 gradient widened; autograd::grad likewise.
  Tensor leaf = mt::randn({3, 7}).requires_grad_();
  const Tensor wb = mt::randn({3, 7}).to(mt::kBFloat16);
  (leaf.to(mt::kBFloat16) * wb).sum().backward();
  ASSERT_EQ(leaf.grad().dtype(), mt::kFloat32);
  EXPECT_EQ(leaf.grad().to_vector<float>(), wb.to(mt::kFloat32).to_vector<float>());
  Tensor mid = leaf * 2.0;
  const std::vector<Tensor> gm = mt::autograd::grad({(mid.to(mt::kBFloat16) * wb).sum()}, {mid});
  ASSERT_EQ(gm[0].dtype(), mt::kFloat32);
  EXPECT_EQ(gm[0].to_vector<float>(), wb.to(mt::kFloat32).to_vector<float>());
}
