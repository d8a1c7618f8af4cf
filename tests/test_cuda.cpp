// CUDA backend tests: every kernel of the CUDA dispatch table is run on the same inputs as
// the CPU kernel and the results compared (the CPU kernels are checked against PyTorch
// elsewhere). Without a GPU each GPU test reports itself skipped; the few tests that need
// no GPU (clean failure, profiler ranges) always run.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/shape.h"
#include "cuda/cuda_api.h"
#include "cuda/profiler.h"

namespace mt = mantissa;

namespace {

#define REQUIRE_GPU()                                                                     \
  do {                                                                                    \
    if (mt::cuda_device_count() == 0)                                                     \
      GTEST_SKIP() << "no usable CUDA device (no GPU, no driver, or built without CUDA)"; \
  } while (0)

const mt::Device kGpu = mt::Device::cuda(0);
const mt::Device kCpu = mt::Device::cpu();

const std::vector<mt::DType> kFloatTypes = {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16};
const std::vector<mt::DType> kAllTypes = {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16,
                                          mt::kInt64,   mt::kInt32,   mt::kUInt8,   mt::kBool};

struct Tol {
  double rtol, atol;
};

// One unit in the last place of the storage type, relative, plus a little absolute slack:
// the GPU and CPU compute in the same fp32/fp64 but with different libm implementations,
// so results may land one rounding step apart.
Tol tol_for(mt::DType t) {
  switch (t) {
    case mt::DType::Float32:
      return {2e-6, 1e-6};
    case mt::DType::Float64:
      return {1e-13, 1e-13};
    case mt::DType::Float16:
      return {2e-3, 1e-3};
    case mt::DType::BFloat16:
      return {1.6e-2, 1e-2};
    default:
      return {0, 0};
  }
}

// randn values, or |randn| + 0.1 for ops that need a positive domain, in `dtype`.
mt::Tensor host_randn(const mt::Shape& shape, mt::DType dtype, bool positive = false) {
  mt::Tensor x = mt::randn(shape, {.dtype = mt::kFloat64});
  if (positive) x = mt::abs(x) + 0.1;
  return x.to(dtype);
}

// Integer-valued data in [0, 100): exact in every dtype, with many ties.
mt::Tensor host_ints(const mt::Shape& shape, mt::DType dtype, int64_t high = 100) {
  return mt::randint(0, high, shape).to(dtype);
}

void expect_close(const mt::Tensor& got, const mt::Tensor& want, Tol tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                    std::abs(g[i] - w[i]) <= tol.atol + tol.rtol * std::abs(w[i]);
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << " on the GPU, " << w[i] << " on the CPU";
  }
}

mt::Tensor on_cpu_like(const mt::Tensor& t, mt::DType dtype) { return mt::empty(t.sizes(), {.dtype = dtype}); }
mt::Tensor on_gpu_like(const mt::Tensor& t, mt::DType dtype) {
  return mt::empty(t.sizes(), {.dtype = dtype, .device = kGpu});
}

const mt::Backend& gpu() { return mt::backend_for(kGpu); }
const mt::Backend& cpu() { return mt::cpu_backend(); }

}  // namespace

// ---------------------------------------------------------------- without a GPU

TEST(CudaNoDevice, GpuTensorsFailCleanly) {
  if (mt::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(mt::Device::best(), kCpu);
  EXPECT_THROW(mt::zeros({2}, {.device = kGpu}), mt::Error);
  EXPECT_THROW(mt::ones({2}).to(kGpu), mt::Error);
}

TEST(CudaProfiler, RangesBalanceWhetherOrNotProfiling) {
  const bool was = mt::cuda::profiling_enabled();
  {
    mt::cuda::ProfileRange outer("outer");
    mt::cuda::set_profiling(true);
    { mt::cuda::ProfileRange inner("inner"); }
    mt::cuda::set_profiling(false);
  }
  mt::cuda::pop_range();  // unbalanced pop is ignored
  mt::cuda::set_profiling(was);
  SUCCEED();
}

// ---------------------------------------------------------------- device and memory

TEST(CudaDevice, PropertiesAndBadIndex) {
  REQUIRE_GPU();
  EXPECT_EQ(mt::Device::best(), kGpu);
  EXPECT_FALSE(mt::cuda::device_name(0).empty());
  EXPECT_GE(mt::cuda::compute_capability(0), 70);
  EXPECT_GT(mt::cuda::total_memory(0), size_t(0));
  EXPECT_THROW(mt::zeros({2}, {.device = mt::Device::cuda(mt::cuda_device_count())}), mt::Error);
}

TEST(CudaAllocator, CachesAndReportsStats) {
  REQUIRE_GPU();
  mt::Allocator* alloc = mt::allocator_for(kGpu);
  mt::cuda::synchronize(0);
  alloc->empty_cache();
  const mt::AllocatorStats s0 = alloc->stats();
  const size_t bytes = size_t(4) << 20;
  void* first = nullptr;
  {
    mt::Tensor t = mt::empty({int64_t(bytes / 4)}, {.device = kGpu});
    first = t.raw_data();
    const mt::AllocatorStats s1 = alloc->stats();
    EXPECT_GE(s1.allocated, s0.allocated + bytes);
    EXPECT_GE(s1.reserved, s1.allocated);
    EXPECT_GE(s1.peak_allocated, s1.allocated);
  }
  const mt::AllocatorStats s2 = alloc->stats();
  EXPECT_EQ(s2.allocated, s0.allocated);
  EXPECT_GE(s2.reserved, s0.reserved + bytes);  // kept in the cache
  {
    mt::Tensor t = mt::empty({int64_t(bytes / 4)}, {.device = kGpu});
    EXPECT_EQ(t.raw_data(), first);  // served from the cache
    EXPECT_EQ(alloc->stats().reserved, s2.reserved);
  }
  alloc->empty_cache();
  EXPECT_LE(alloc->stats().reserved, s0.reserved);
}

TEST(CudaAllocator, OutOfMemoryThrows) {
  REQUIRE_GPU();
  const int64_t too_many = int64_t(mt::cuda::total_memory(0) / 4) * 2;  // twice the device
  EXPECT_THROW(mt::empty({too_many}, {.device = kGpu}), mt::Error);
  mt::Tensor ok = mt::ones({16}, {.device = kGpu});  // still usable afterwards
  EXPECT_EQ(ok.sum().item<float>(), 16.0f);
}

// ---------------------------------------------------------------- copies and fill

TEST(CudaCopy, RoundTripEveryDtype) {
  REQUIRE_GPU();
  for (mt::DType t : kAllTypes) {
    mt::Tensor x = host_ints({3, 5, 7}, t, t == mt::kBool ? 2 : 100);
    mt::Tensor back = x.to(kGpu).to(kCpu);
    expect_close(back, x, {0, 0}, std::string("round trip ") + mt::dtype_name(t));
  }
}

TEST(CudaCopy, ConvertsEveryDtypePairOnDevice) {
  REQUIRE_GPU();
  for (mt::DType from : kAllTypes)
    for (mt::DType to : kAllTypes) {
      mt::Tensor x = from == mt::kBool ? host_ints({6, 9}, from, 2) : host_randn({6, 9}, mt::kFloat64).mul_(20).abs();
      x = x.to(from);
      mt::Tensor xt = x.t();  // a strided source
      mt::Tensor want = on_cpu_like(xt, to), got = on_gpu_like(xt, to);
      cpu().copy(xt, want);
      gpu().copy(x.to(kGpu).t(), got);
      expect_close(got, want, {0, 0}, std::string("copy ") + mt::dtype_name(from) + " -> " + mt::dtype_name(to));
    }
}

TEST(CudaCopy, BroadcastAndStridedDestinations) {
  REQUIRE_GPU();
  mt::Tensor row = host_randn({4}, mt::kFloat32);
  // host -> strided device destination, broadcast
  mt::Tensor d = mt::zeros({4, 3}, {.device = kGpu});
  d.t().copy_(row);
  mt::Tensor want = mt::zeros({4, 3});
  want.t().copy_(row);
  expect_close(d.to(kCpu), want, {0, 0}, "h2d into a transposed view");
  // device -> strided host destination, with conversion
  mt::Tensor h = mt::zeros({3, 4}, {.dtype = mt::kFloat64}).t();
  h.copy_(d);
  expect_close(h.contiguous(), want.to(mt::kFloat64), {0, 0}, "d2h into a transposed view");
  // device -> device, broadcast and slice
  mt::Tensor dd = mt::zeros({2, 4, 3}, {.dtype = mt::kFloat16, .device = kGpu});
  dd.copy_(d);
  expect_close(dd.to(kCpu), want.to(mt::kFloat16).expand({2, 4, 3}).contiguous(), {0, 0}, "d2d broadcast");
}

TEST(CudaFill, EveryDtypeAndStrided) {
  REQUIRE_GPU();
  for (mt::DType t : kAllTypes) {
    mt::Tensor g = mt::full({5, 6}, 3, {.dtype = t, .device = kGpu});
    expect_close(g.to(kCpu), mt::full({5, 6}, 3, {.dtype = t}), {0, 0}, std::string("full ") + mt::dtype_name(t));
  }
  mt::Tensor g = mt::zeros({4, 6}, {.device = kGpu});
  g.slice(1, 0, 6, 2).fill_(2.5);
  mt::Tensor c = mt::zeros({4, 6});
  c.slice(1, 0, 6, 2).fill_(2.5);
  expect_close(g.to(kCpu), c, {0, 0}, "strided fill");
}

// ---------------------------------------------------------------- elementwise

TEST(CudaElementwise, UnaryFloatOpsMatchCpu) {
  REQUIRE_GPU();
  using U = mt::UnaryOp;
  const std::vector<U> ops = {U::Neg,    U::Abs,       U::Sign,     U::Exp,      U::Log,       U::Log1p,
                              U::Sqrt,   U::Rsqrt,     U::Sin,      U::Cos,      U::Tanh,      U::Sigmoid,
                              U::Relu,   U::GeluErf,   U::GeluTanh, U::Silu,     U::Erf,       U::Reciprocal,
                              U::Square, U::PowScalar, U::Clamp,    U::IsFinite, U::LogicalNot};
  for (mt::DType t : kFloatTypes)
    for (U op : ops) {
      const bool positive = op == U::Log || op == U::Sqrt || op == U::Rsqrt || op == U::PowScalar;
      mt::Tensor x = host_randn({19, 37}, t, positive);
      const double a = op == U::Clamp ? -0.5 : 1.7, b = 0.5;
      const mt::DType out_t = (op == U::IsFinite || op == U::LogicalNot) ? mt::kBool : t;
      for (bool transposed : {false, true}) {
        mt::Tensor xc = transposed ? x.t() : x;
        mt::Tensor xg = transposed ? x.to(kGpu).t() : x.to(kGpu);
        mt::Tensor want = on_cpu_like(xc, out_t), got = on_gpu_like(xc, out_t);
        cpu().unary(op, xc, want, a, b);
        gpu().unary(op, xg, got, a, b);
        expect_close(got, want, tol_for(t),
                     "unary op " + std::to_string(int(op)) + " " + mt::dtype_name(t) + (transposed ? " (T)" : ""));
      }
    }
}

TEST(CudaElementwise, UnaryIntegerOpsMatchCpu) {
  REQUIRE_GPU();
  using U = mt::UnaryOp;
  for (mt::DType t : {mt::kInt64, mt::kInt32, mt::kUInt8})
    for (U op : {U::Neg, U::Abs, U::Sign, U::Square, U::Relu, U::Clamp, U::LogicalNot}) {
      mt::Tensor x = t == mt::kUInt8 ? host_ints({7, 9}, t) : (host_ints({7, 9}, mt::kInt64) - 50).to(t);
      const mt::DType out_t = op == U::LogicalNot ? mt::kBool : t;
      mt::Tensor want = on_cpu_like(x, out_t), got = on_gpu_like(x, out_t);
      cpu().unary(op, x, want, 10, 40);
      gpu().unary(op, x.to(kGpu), got, 10, 40);
      expect_close(got, want, {0, 0}, "int unary op " + std::to_string(int(op)) + " " + mt::dtype_name(t));
    }
}

TEST(CudaElementwise, BinaryOpsWithBroadcastMatchCpu) {
  REQUIRE_GPU();
  using B = mt::BinaryOp;
  const std::vector<B> float_ops = {B::Add,
                                    B::Sub,
                                    B::Mul,
                                    B::Div,
                                    B::Maximum,
                                    B::Minimum,
                                    B::Pow,
                                    B::ReluBackward,
                                    B::GeluErfBackward,
                                    B::GeluTanhBackward,
                                    B::SiluBackward,
                                    B::SigmoidBackwardFromOutput,
                                    B::TanhBackwardFromOutput};
  const std::vector<B> compare_ops = {B::Eq, B::Ne, B::Lt, B::Le, B::Gt, B::Ge, B::LogicalAnd, B::LogicalOr};
  // (a shape, b shape): same shape, broadcast row/column, scalar, 4-d with a middle broadcast
  const std::vector<std::pair<mt::Shape, mt::Shape>> shapes = {
      {{33, 17}, {33, 17}}, {{4, 5, 6}, {5, 1}}, {{8, 9}, {}}, {{2, 3, 4, 5}, {2, 1, 4, 1}}};
  auto run = [&](B op, mt::DType t, mt::DType out_t, const mt::Tensor& a, const mt::Tensor& b, Tol tol) {
    mt::Shape s = mt::broadcast_shapes(a.sizes(), b.sizes(), "test");
    mt::Tensor want = mt::empty(s, {.dtype = out_t}), got = mt::empty(s, {.dtype = out_t, .device = kGpu});
    cpu().binary(op, a, b, want);
    gpu().binary(op, a.to(kGpu), b.to(kGpu), got);
    expect_close(
        got, want, tol,
        "binary op " + std::to_string(int(op)) + " " + mt::dtype_name(t) + " " + a.shape_str() + b.shape_str());
  };
  for (auto& [sa, sb] : shapes) {
    for (mt::DType t : kFloatTypes) {
      for (B op : float_ops) {
        const bool positive = op == B::Pow;
        run(op, t, t, host_randn(sa, t, positive), host_randn(sb, t), tol_for(t));
      }
      for (B op : compare_ops) {
        mt::Tensor a = host_ints(sa, t, 4), b = host_ints(sb, t, 4);  // many equal pairs
        run(op, t, mt::kBool, a, b, {0, 0});
      }
    }
    for (mt::DType t : {mt::kInt64, mt::kInt32}) {
      mt::Tensor a = (host_ints(sa, mt::kInt64) - 50).to(t), b = (host_ints(sb, mt::kInt64, 9) - 4).to(t);
      b = mt::where(b == 0, mt::full_like(b, 3), b);  // floor division by nonzero
      for (B op : {B::Add, B::Sub, B::Mul, B::Div, B::Maximum, B::Minimum}) run(op, t, t, a, b, {0, 0});
      for (B op : compare_ops) run(op, t, mt::kBool, a, b, {0, 0});
    }
  }
}

TEST(CudaElementwise, WhereMatchesCpu) {
  REQUIRE_GPU();
  for (mt::DType t : kAllTypes) {
    mt::Tensor cond = host_ints({3, 4}, mt::kBool, 2);
    mt::Tensor a = host_ints({3, 4}, t, t == mt::kBool ? 2 : 100), b = host_ints({4}, t, t == mt::kBool ? 2 : 100);
    mt::Tensor want = mt::empty({3, 4}, {.dtype = t}), got = mt::empty({3, 4}, {.dtype = t, .device = kGpu});
    cpu().where(cond, a, b, want);
    gpu().where(cond.to(kGpu), a.to(kGpu), b.to(kGpu), got);
    expect_close(got, want, {0, 0}, std::string("where ") + mt::dtype_name(t));
  }
}

// ---------------------------------------------------------------- reductions

namespace {
// Tolerance for a sum of n terms of magnitude ~1 in the output dtype.
Tol sum_tol(mt::DType t, int64_t n) {
  const double scale = std::sqrt(double(n));
  switch (t) {
    case mt::DType::Float32:
      return {1e-5, 1e-6 * double(n)};
    case mt::DType::Float64:
      return {1e-12, 1e-13 * double(n)};
    case mt::DType::Float16:
      return {4e-3, 2e-3 * scale};
    case mt::DType::BFloat16:
      return {3e-2, 2e-2 * scale};
    default:
      return {0, 0};
  }
}
}  // namespace

TEST(CudaReduce, AllOpsAllPathsMatchCpu) {
  REQUIRE_GPU();
  using R = mt::ReduceOp;
  // (rows, n): warp per row, block per row, split rows (few rows, n >= 65536)
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{7, 33}, {5, 1000}, {3, 5000}, {1, 300000}, {2, 100000}};
  for (auto [rows, n] : shapes)
    for (mt::DType t : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16, mt::kInt64, mt::kInt32}) {
      const bool fl = mt::is_floating(t);
      for (R op : {R::Sum, R::Max, R::Min, R::ArgMax, R::ArgMin}) {
        // Integer-valued floats for max/min so that ties (lowest index wins) are tested too.
        mt::Tensor x = (op == R::Sum && fl) ? host_randn({rows, n}, t) : host_ints({rows, n}, t, 1000);
        const mt::DType out_t = (op == R::ArgMax || op == R::ArgMin) ? mt::kInt64
                                : (op == R::Sum && t == mt::kInt32)  ? mt::kInt64
                                                                     : t;
        mt::Tensor want = mt::empty({rows}, {.dtype = out_t}),
                   got = mt::empty({rows}, {.dtype = out_t, .device = kGpu});
        cpu().reduce(op, x, want);
        gpu().reduce(op, x.to(kGpu), got);
        expect_close(got, want, op == R::Sum ? sum_tol(t, n) : Tol{0, 0},
                     "reduce op " + std::to_string(int(op)) + " " + mt::dtype_name(t) + " [" + std::to_string(rows) +
                         ", " + std::to_string(n) + "]");
      }
    }
}

TEST(CudaReduce, ProdAndNanAndBool) {
  REQUIRE_GPU();
  using R = mt::ReduceOp;
  mt::Tensor x = host_randn({6, 40}, mt::kFloat32) * 0.1 + 1.0;
  mt::Tensor want = mt::empty({6}), got = mt::empty({6}, {.device = kGpu});
  cpu().reduce(R::Prod, x, want);
  gpu().reduce(R::Prod, x.to(kGpu), got);
  expect_close(got, want, {1e-5, 1e-6}, "prod");

  // NaN wins max/min; arg* return the first NaN.
  std::vector<float> v(2 * 3000, 1.0f);
  v[1234] = std::numeric_limits<float>::quiet_NaN();
  v[2000] = std::numeric_limits<float>::quiet_NaN();
  v[3000 + 17] = 5.0f;
  mt::Tensor xn = mt::from_vector(v, {2, 3000});
  for (R op : {R::Max, R::Min, R::ArgMax, R::ArgMin}) {
    const mt::DType out_t = (op == R::ArgMax || op == R::ArgMin) ? mt::kInt64 : mt::kFloat32;
    mt::Tensor w = mt::empty({2}, {.dtype = out_t}), g = mt::empty({2}, {.dtype = out_t, .device = kGpu});
    cpu().reduce(op, xn, w);
    gpu().reduce(op, xn.to(kGpu), g);
    expect_close(g, w, {0, 0}, "NaN reduce op " + std::to_string(int(op)));
  }

  // bool sums count in int64
  mt::Tensor b = host_ints({4, 700}, mt::kBool, 2);
  mt::Tensor wb = mt::empty({4}, {.dtype = mt::kInt64}), gb = mt::empty({4}, {.dtype = mt::kInt64, .device = kGpu});
  cpu().reduce(R::Sum, b, wb);
  gpu().reduce(R::Sum, b.to(kGpu), gb);
  expect_close(gb, wb, {0, 0}, "bool sum");
}

TEST(CudaReduce, VarMeanMatchesCpu) {
  REQUIRE_GPU();
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{6, 10}, {4, 3000}, {3, 1}})
    for (mt::DType t : kFloatTypes)
      for (int64_t correction : {0, 1}) {
        mt::Tensor x = host_randn({rows, n}, t) + 3.0;
        x = x.to(t);
        mt::Tensor wv = mt::empty({rows}, {.dtype = t}), wm = mt::empty({rows}, {.dtype = t});
        mt::Tensor gv = mt::empty({rows}, {.dtype = t, .device = kGpu}),
                   gm = mt::empty({rows}, {.dtype = t, .device = kGpu});
        cpu().var_mean(x, wv, wm, correction);
        gpu().var_mean(x.to(kGpu), gv, gm, correction);
        const std::string what = std::string(mt::dtype_name(t)) + " n=" + std::to_string(n);
        expect_close(gm, wm, sum_tol(t, 1), "mean " + what);
        expect_close(gv, wv, sum_tol(t, 10), "var " + what);  // NaN for n - correction <= 0
      }
}

TEST(CudaSoftmax, RowsMatchCpu) {
  REQUIRE_GPU();
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{8, 10}, {3, 2000}, {2, 70000}})
    for (mt::DType t : kFloatTypes)
      for (mt::DType out_t : {t, mt::kFloat32})
        for (bool log : {false, true}) {
          mt::Tensor x = host_randn({rows, n}, mt::kFloat64) * 3.0;
          x.select(1, 0).fill_(-INFINITY);                // masked entries
          if (rows > 2) x.select(0, 1).fill_(-INFINITY);  // a fully masked row
          x = x.to(t);
          mt::Tensor want = mt::empty({rows, n}, {.dtype = out_t});
          mt::Tensor got = mt::empty({rows, n}, {.dtype = out_t, .device = kGpu});
          cpu().softmax(x, want, log);
          gpu().softmax(x.to(kGpu), got, log);
          Tol tol = tol_for(out_t);
          tol.atol = std::max(tol.atol, 1e-6);
          expect_close(got, want, tol,
                       std::string(log ? "log_softmax " : "softmax ") + mt::dtype_name(t) + "->" +
                           mt::dtype_name(out_t) + " n=" + std::to_string(n));
        }
}

// ---------------------------------------------------------------- matmul

namespace {
Tol matmul_tol(mt::DType t, int64_t k) {
  const double s = std::sqrt(double(std::max<int64_t>(k, 1)));  // |result| ~ sqrt(K) for randn inputs
  switch (t) {
    case mt::DType::Float32:
      return {1e-5, 2e-6 * s};
    case mt::DType::Float64:
      return {1e-12, 1e-13 * s};
    case mt::DType::Float16:
      return {2e-3, 2e-3 * s};
    default:
      return {1.6e-2, 1.6e-2 * s};
  }
}
}  // namespace

TEST(CudaMatmul, LayoutsAndDtypesMatchCpu) {
  REQUIRE_GPU();
  struct Case {
    int64_t B, M, K, N;
  };
  for (Case c : {Case{1, 17, 33, 9}, Case{3, 64, 128, 32}, Case{2, 1, 7, 5}, Case{2, 6, 7, 1}, Case{2, 5, 0, 4}})
    for (mt::DType t : kFloatTypes)
      for (int layout = 0; layout < 4; ++layout) {
        // layout bit 0: a is a transposed view; bit 1: b is a transposed view.
        mt::Tensor a = (layout & 1) ? host_randn({c.B, c.K, c.M}, t).transpose(1, 2) : host_randn({c.B, c.M, c.K}, t);
        mt::Tensor b = (layout & 2) ? host_randn({c.B, c.N, c.K}, t).transpose(1, 2) : host_randn({c.B, c.K, c.N}, t);
        mt::Tensor ag = (layout & 1) ? a.transpose(1, 2).to(kGpu).transpose(1, 2) : a.to(kGpu);
        mt::Tensor bg = (layout & 2) ? b.transpose(1, 2).to(kGpu).transpose(1, 2) : b.to(kGpu);
        mt::Tensor want = mt::empty({c.B, c.M, c.N}, {.dtype = t});
        mt::Tensor got = mt::empty({c.B, c.M, c.N}, {.dtype = t, .device = kGpu});
        cpu().matmul(a, b, want);
        gpu().matmul(ag, bg, got);
        expect_close(got, want, matmul_tol(t, c.K),
                     std::string("matmul ") + mt::dtype_name(t) + " B" + std::to_string(c.B) + " M" +
                         std::to_string(c.M) + " K" + std::to_string(c.K) + " N" + std::to_string(c.N) + " layout " +
                         std::to_string(layout));
      }
}

TEST(CudaMatmul, BroadcastBatchAndTf32Switch) {
  REQUIRE_GPU();
  // a shared across the batch (batch stride 0), as a Linear layer's weight is.
  mt::Tensor a = host_randn({1, 24, 40}, mt::kFloat32).expand({4, 24, 40});
  mt::Tensor b = host_randn({4, 40, 16}, mt::kFloat32);
  mt::Tensor ag = a.select(0, 0).to(kGpu).unsqueeze(0).expand({4, 24, 40});
  mt::Tensor want = mt::empty({4, 24, 16}), got = mt::empty({4, 24, 16}, {.device = kGpu});
  cpu().matmul(a, b, want);
  gpu().matmul(ag, b.to(kGpu), got);
  expect_close(got, want, matmul_tol(mt::kFloat32, 40), "broadcast batch");

  EXPECT_FALSE(mt::cuda::allow_tf32());
  mt::cuda::set_allow_tf32(true);
  gpu().matmul(ag, b.to(kGpu), got);
  mt::cuda::set_allow_tf32(false);
  expect_close(got, want, {5e-3, 5e-3 * std::sqrt(40.0)}, "tf32");  // 10-bit mantissa inputs
}

// ---------------------------------------------------------------- indexing

TEST(CudaIndex, IndexSelectGatherScatterAddMatchCpu) {
  REQUIRE_GPU();
  mt::Tensor idx = mt::from_vector<int64_t>({4, 0, 4, 2});
  for (mt::DType t : kAllTypes) {
    mt::Tensor x = host_ints({5, 6, 3}, t, t == mt::kBool ? 2 : 100);
    for (int64_t dim : {0, 1}) {
      mt::Shape s = x.sizes();
      s[size_t(dim)] = 4;
      mt::Tensor want = mt::empty(s, {.dtype = t}), got = mt::empty(s, {.dtype = t, .device = kGpu});
      cpu().index_select(x, dim, idx, want);
      gpu().index_select(x.to(kGpu), dim, idx.to(kGpu), got);
      expect_close(got, want, {0, 0}, std::string("index_select ") + mt::dtype_name(t) + " dim " + std::to_string(dim));
    }
    mt::Tensor gidx = mt::randint(0, 6, {5, 4, 3});
    mt::Tensor want = mt::empty({5, 4, 3}, {.dtype = t}), got = mt::empty({5, 4, 3}, {.dtype = t, .device = kGpu});
    cpu().gather(x, 1, gidx, want);
    gpu().gather(x.to(kGpu), 1, gidx.to(kGpu), got);
    expect_close(got, want, {0, 0}, std::string("gather ") + mt::dtype_name(t));

    // scatter_add with many collisions: atomics in any order
    mt::Tensor sidx = mt::randint(0, 3, {5, 8, 3});
    mt::Tensor src = host_ints({5, 8, 3}, t, t == mt::kBool ? 2 : 10);
    mt::Tensor wout = host_ints({5, 3, 3}, t, t == mt::kBool ? 2 : 10);
    mt::Tensor gout = wout.to(kGpu);
    cpu().scatter_add(wout, 1, sidx, src);
    gpu().scatter_add(gout, 1, sidx.to(kGpu), src.to(kGpu));
    expect_close(gout, wout, tol_for(t), std::string("scatter_add ") + mt::dtype_name(t));
  }
}

// ---------------------------------------------------------------- through the public API

TEST(CudaAutograd, MlpForwardBackwardMatchesCpu) {
  REQUIRE_GPU();
  mt::Tensor x = host_randn({16, 32}, mt::kFloat32);
  mt::Tensor w1 = host_randn({32, 64}, mt::kFloat32) * 0.2, w2 = host_randn({64, 10}, mt::kFloat32) * 0.2;
  auto run = [&](mt::Device d, mt::Tensor& g1, mt::Tensor& g2) {
    mt::Tensor a = w1.clone().to(d).requires_grad_(), b = w2.clone().to(d).requires_grad_();
    mt::Tensor h = mt::gelu(mt::matmul(x.to(d), a));
    mt::Tensor loss = mt::log_softmax(mt::matmul(h, b), 1).mean();
    loss.backward();
    g1 = a.grad().to(kCpu);
    g2 = b.grad().to(kCpu);
    return loss.to(kCpu);
  };
  mt::Tensor c1, c2, d1, d2;
  mt::Tensor lc = run(kCpu, c1, c2), lg = run(kGpu, d1, d2);
  expect_close(lg, lc, {1e-5, 1e-6}, "loss");
  expect_close(d1, c1, {1e-4, 1e-6}, "grad w1");
  expect_close(d2, c2, {1e-4, 1e-6}, "grad w2");
}
