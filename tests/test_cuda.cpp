// CUDA backend tests: every kernel of the CUDA dispatch table and of the nn kernel table is
// run on the same inputs as the CPU kernel and the results compared (the CPU kernels are checked against PyTorch
// elsewhere). Without a GPU each GPU test reports itself skipped; the few tests that need
// no GPU (clean failure, profiler ranges) always run.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"
#include "core/shape.h"
#include "cuda/cuda_api.h"
#include "gpu_test.h"
#ifdef MANTISSA_WITH_CUDA
#include "cuda/nn_kernels.h"  // set_conv_force_gemm
#endif

namespace mt = mantissa;

namespace {

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
  // Every op of the list (core/elementwise_math.h): a new op is checked here without an edit.
#define MT_ENUMERATOR(Enum, ...) U::Enum,
  const std::vector<U> ops = {MT_UNARY_OPS(MT_ENUMERATOR)};
#undef MT_ENUMERATOR
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
                     std::string("unary op ") + mt::op_name(op) + " " + mt::dtype_name(t) + (transposed ? " (T)" : ""));
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
  // Every op of the list (core/elementwise_math.h), split by whether it returns bool.
  std::vector<B> float_ops, compare_ops;
#define MT_SORT_OP(Enum, name, F, domain, policy) \
  (std::string(#domain) == "AnyToBool" ? compare_ops : float_ops).push_back(B::Enum);
  MT_BINARY_OPS(MT_SORT_OP)
#undef MT_SORT_OP
  // (a shape, b shape): same shape, broadcast row/column, scalar, 4-d with a middle broadcast
  const std::vector<std::pair<mt::Shape, mt::Shape>> shapes = {
      {{33, 17}, {33, 17}}, {{4, 5, 6}, {5, 1}}, {{8, 9}, {}}, {{2, 3, 4, 5}, {2, 1, 4, 1}}};
  auto run = [&](B op, mt::DType t, mt::DType out_t, const mt::Tensor& a, const mt::Tensor& b, Tol tol) {
    mt::Shape s = mt::broadcast_shapes(a.sizes(), b.sizes(), "test");
    mt::Tensor want = mt::empty(s, {.dtype = out_t}), got = mt::empty(s, {.dtype = out_t, .device = kGpu});
    cpu().binary(op, a, b, want, 0.5, 1.5);
    gpu().binary(op, a.to(kGpu), b.to(kGpu), got, 0.5, 1.5);
    expect_close(
        got, want, tol,
        std::string("binary op ") + mt::op_name(op) + " " + mt::dtype_name(t) + " " + a.shape_str() + b.shape_str());
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

// Reductions over leading dims read the column view in place (cuda/reduce.cu's column kernel,
// core/column_plan.h): one chunk, n split into chunks with a second pass, several outer
// indices, column counts that are not a multiple of 32, and a strided (transposed) input.
TEST(CudaReduce, ColumnsMatchCpu) {
  REQUIRE_GPU();
  // [n, cols] over dim 0; [outer, n, cols] over dim 1; [a, b, cols] over dims {0, 1}.
  const std::vector<std::pair<mt::Shape, mt::Shape>> cases = {{{40, 70}, {0}},      {{16384, 768}, {0}},
                                                              {{3, 5000, 33}, {1}}, {{4, 512, 96}, {0, 1}},
                                                              {{100000, 2}, {0}},   {{2, 3, 70000, 5}, {2}}};
  for (const auto& [shape, dims] : cases)
    for (mt::DType t : {mt::kFloat32, mt::kFloat16, mt::kBFloat16, mt::kFloat64, mt::kInt64}) {
      const bool fl = mt::is_floating(t);
      const mt::Tensor xs = fl ? host_randn(shape, t) : host_ints(shape, t, 1000);
      const mt::Tensor xi = host_ints(shape, t, 50);  // ties for max and argmax
      const mt::Tensor xg = xs.to(kGpu), xig = xi.to(kGpu);
      const std::string what = mt::dtype_name(t) + std::string(" ") + xs.shape_str();
      int64_t n = 1;
      for (int64_t d : dims) n *= shape[size_t(d)];
      expect_close(mt::sum(xg, dims).to(kCpu), mt::sum(xs, dims), fl ? sum_tol(t, n) : Tol{0, 0}, "sum " + what);
      expect_close(mt::amax(xig, dims).to(kCpu), mt::amax(xi, dims), Tol{0, 0}, "amax " + what);
      if (dims.size() == 1)
        expect_close(mt::argmax(xig, dims[0]).to(kCpu), mt::argmax(xi, dims[0]), Tol{0, 0}, "argmax " + what);
    }
  // A transposed view: the reduced dim has unit stride, so this one goes through the rows.
  const mt::Tensor x = host_randn({300, 70}, mt::kFloat32);
  expect_close(mt::sum(x.to(kGpu).t(), {1}).to(kCpu), mt::sum(x.t(), {1}), sum_tol(mt::kFloat32, 300), "sum of x^T");
  // NaN wins a column's max on both devices.
  mt::Tensor xn = host_randn({5000, 40}, mt::kFloat32);
  xn.narrow(0, 4321, 1).narrow(1, 7, 1).fill_(NAN);
  const std::vector<float> m = mt::amax(xn.to(kGpu), {0}).to(kCpu).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[7]));
  EXPECT_FALSE(std::isnan(m[6]));
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
      for (int layout = 0; layout < 8; ++layout) {
        // layout bit 0: a is a transposed view; bit 1: b is a transposed view; bit 2: with a
        // bias, added before the one rounding on both devices (linear's epilogue).
        mt::Tensor a = (layout & 1) ? host_randn({c.B, c.K, c.M}, t).transpose(1, 2) : host_randn({c.B, c.M, c.K}, t);
        mt::Tensor b = (layout & 2) ? host_randn({c.B, c.N, c.K}, t).transpose(1, 2) : host_randn({c.B, c.K, c.N}, t);
        mt::Tensor ag = (layout & 1) ? a.transpose(1, 2).to(kGpu).transpose(1, 2) : a.to(kGpu);
        mt::Tensor bg = (layout & 2) ? b.transpose(1, 2).to(kGpu).transpose(1, 2) : b.to(kGpu);
        mt::Tensor want = mt::empty({c.B, c.M, c.N}, {.dtype = t});
        mt::Tensor got = mt::empty({c.B, c.M, c.N}, {.dtype = t, .device = kGpu});
        mt::Tensor bias = (layout & 4) ? host_randn({c.N}, t) : mt::Tensor();
        cpu().matmul(a, b, bias, want);
        gpu().matmul(ag, bg, bias.defined() ? bias.to(kGpu) : bias, got);
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
  cpu().matmul(a, b, mt::Tensor(), want);
  gpu().matmul(ag, b.to(kGpu), mt::Tensor(), got);
  expect_close(got, want, matmul_tol(mt::kFloat32, 40), "broadcast batch");

  EXPECT_FALSE(mt::cuda::allow_tf32());
  mt::cuda::set_allow_tf32(true);
  gpu().matmul(ag, b.to(kGpu), mt::Tensor(), got);
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

// ---------------------------------------------------------------- nn kernels (core/nn_kernels.h)

namespace {

const mt::NnKernels& gnn() { return mt::nn_kernels_for(kGpu, "test"); }
const mt::NnKernels& cnn() { return mt::nn_kernels_for(kCpu, "test"); }

// The accumulation dtype of the nn kernels ("acc" tensors).
mt::DType acc_of(mt::DType t) { return t == mt::kFloat64 ? mt::kFloat64 : mt::kFloat32; }

// `t` on the GPU; an undefined tensor stays undefined.
mt::Tensor dev(const mt::Tensor& t) { return t.defined() ? t.to(kGpu) : t; }
// A fresh CPU or GPU tensor shaped like `t`, or undefined when `want` is false.
mt::Tensor cpu_out(const mt::Shape& s, mt::DType t, bool want = true) {
  return want ? mt::empty(s, {.dtype = t}) : mt::Tensor();
}
mt::Tensor gpu_out(const mt::Shape& s, mt::DType t, bool want = true) {
  return want ? mt::empty(s, {.dtype = t, .device = kGpu}) : mt::Tensor();
}

// Selects the im2col + cuBLAS convolution for the guard's lifetime (a no-op without CUDA).
struct ForceGemmConv {
  explicit ForceGemmConv(bool on) { set(on); }
  ~ForceGemmConv() { set(false); }
  static void set([[maybe_unused]] bool on) {
#ifdef MANTISSA_WITH_CUDA
    mt::cuda::set_conv_force_gemm(on);
#endif
  }
};

mt::Conv2dGeometry conv_geometry(std::vector<int64_t> v) {  // N C H W Cout G KH KW SH SW PH PW DH DW
  mt::Conv2dGeometry g;
  g.N = v[0], g.C = v[1], g.H = v[2], g.W = v[3], g.Cout = v[4], g.groups = v[5];
  g.KH = v[6], g.KW = v[7], g.SH = v[8], g.SW = v[9], g.PH = v[10], g.PW = v[11], g.DH = v[12], g.DW = v[13];
  g.OH = mt::window_output_size(g.H, g.KH, g.SH, g.PH, g.DH);
  g.OW = mt::window_output_size(g.W, g.KW, g.SW, g.PW, g.DW);
  return g;
}

std::string conv_name(const mt::Conv2dGeometry& g, mt::DType t) {
  return std::string(mt::dtype_name(t)) + " N" + std::to_string(g.N) + " C" + std::to_string(g.C) + " " +
         std::to_string(g.H) + "x" + std::to_string(g.W) + " Cout" + std::to_string(g.Cout) + " G" +
         std::to_string(g.groups) + " K" + std::to_string(g.KH) + "x" + std::to_string(g.KW) + " S" +
         std::to_string(g.SH) + "," + std::to_string(g.SW) + " P" + std::to_string(g.PH) + "," + std::to_string(g.PW) +
         " D" + std::to_string(g.DH) + "," + std::to_string(g.DW);
}

mt::Pool2dGeometry pool_geometry(std::vector<int64_t> v, bool ceil_mode = false) {  // N C H W KH KW SH SW PH PW DH DW
  mt::Pool2dGeometry g;
  g.N = v[0], g.C = v[1], g.H = v[2], g.W = v[3];
  g.KH = v[4], g.KW = v[5], g.SH = v[6], g.SW = v[7], g.PH = v[8], g.PW = v[9], g.DH = v[10], g.DW = v[11];
  g.OH = mt::window_output_size(g.H, g.KH, g.SH, g.PH, g.DH, ceil_mode);
  g.OW = mt::window_output_size(g.W, g.KW, g.SW, g.PW, g.DW, ceil_mode);
  return g;
}

// Convolutions: as matmul, with room in fp32 for cuDNN's FFT and Winograd algorithms.
Tol conv_tol(mt::DType t, int64_t k) {
  if (t != mt::kFloat32) return matmul_tol(t, k);
  return {3e-5, 1e-5 * std::sqrt(double(std::max<int64_t>(k, 1)))};
}

// Tolerance for acc-typed statistics (fp32, or fp64 for fp64 inputs) of sums over n terms.
Tol acc_tol(mt::DType t, int64_t n) { return sum_tol(acc_of(t), n); }

}  // namespace

// The index math only the GPU kernels use, checked here on the CPU: the gather-style backward
// passes find the outputs covering an input pixel with window_first/last_output and
// adaptive_first/last_output; every output whose window covers the pixel must be in that range.
TEST(CudaNnMath, GatherRangesCoverEveryWindow) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t out = 1; out <= 12; ++out)
      for (int64_t i = 0; i < in; ++i) {
        const int64_t first = mt::math::adaptive_first_output(i, in, out),
                      last = mt::math::adaptive_last_output(i, in, out);
        for (int64_t o = 0; o < out; ++o) {
          const bool covers = mt::math::adaptive_start(o, in, out) <= i && i < mt::math::adaptive_end(o, in, out);
          if (covers) {
            EXPECT_TRUE(first <= o && o <= last) << "adaptive in " << in << " out " << out << " i " << i;
          }
        }
      }
    for (int64_t k = 1; k <= 5; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t p = 0; 2 * p <= k; ++p)
          for (bool ceil_mode : {false, true}) {
            const int64_t out = mt::window_output_size(in, k, s, p, 1, ceil_mode);
            for (int64_t i = 0; i < in; ++i) {
              const int64_t first = mt::math::window_first_output(i, k, s, p),
                            last = mt::math::window_last_output(i, s, p, out);
              for (int64_t o = 0; o < out; ++o) {
                const mt::math::AvgWindow win = mt::math::avg_window(o, 0, in, 1, k, 1, s, 1, p, 0, true, 0);
                if (win.divisor && win.h0 <= i && i < win.h1) {
                  EXPECT_TRUE(first <= o && o <= last)
                      << "window in " << in << " k " << k << " s " << s << " p " << p << " o " << o << " i " << i;
                }
              }
            }
          }
  }
}

TEST(CudaNn, Im2ColAndCol2ImMatchCpu) {
  REQUIRE_GPU();
  for (auto v : std::vector<std::vector<int64_t>>{{2, 3, 7, 6, 1, 1, 3, 2, 2, 1, 1, 0, 1, 2},
                                                  {1, 2, 9, 9, 1, 1, 3, 3, 2, 2, 2, 1, 2, 2},
                                                  {3, 1, 5, 4, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1}})
    for (mt::DType t : kFloatTypes) {
      const mt::Conv2dGeometry g = conv_geometry(v);
      const mt::Shape cs{g.N, g.C * g.KH * g.KW, g.OH * g.OW};
      mt::Tensor x = host_randn({g.N, g.C, g.H, g.W}, t);
      mt::Tensor want = cpu_out(cs, t), got = gpu_out(cs, t);
      cnn().im2col(x, want, g);
      gnn().im2col(dev(x), got, g);
      expect_close(got, want, {0, 0}, "im2col " + conv_name(g, t));
      mt::Tensor cols = host_randn(cs, t);
      mt::Tensor wx = cpu_out(x.sizes(), t), gx = gpu_out(x.sizes(), t);
      cnn().col2im(cols, wx, g);
      gnn().col2im(dev(cols), gx, g);
      expect_close(gx, wx, sum_tol(t, g.KH * g.KW), "col2im " + conv_name(g, t));
    }
}

TEST(CudaNn, Conv2dForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  // N C H W Cout G KH KW SH SW PH PW DH DW
  const std::vector<std::vector<int64_t>> cases = {
      {2, 3, 9, 8, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1},    // 3x3, same padding
      {3, 4, 11, 10, 6, 2, 3, 2, 2, 1, 1, 0, 2, 1},  // groups, stride, padding, dilation
      {2, 6, 7, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1},    // depthwise
      {4, 8, 5, 5, 16, 1, 1, 1, 1, 1, 0, 0, 1, 1},   // pointwise
      {1, 2, 6, 5, 3, 1, 4, 3, 3, 2, 2, 1, 1, 1},    // stride wider than the overlap
  };
  for (bool gemm : {false, true}) {  // cuDNN (when built with it), then im2col + cuBLAS
    ForceGemmConv force(gemm);
    for (const auto& v : cases)
      for (mt::DType t : kFloatTypes)
        for (bool with_bias : {true, false}) {
          const mt::Conv2dGeometry g = conv_geometry(v);
          const int64_t K = g.C / g.groups * g.KH * g.KW, L = g.OH * g.OW;
          const std::string what = std::string(gemm ? "[gemm] " : "") + conv_name(g, t) + (with_bias ? " +b" : "");
          mt::Tensor x = host_randn({g.N, g.C, g.H, g.W}, t);
          mt::Tensor w = host_randn({g.Cout, g.C / g.groups, g.KH, g.KW}, t);
          mt::Tensor b = with_bias ? host_randn({g.Cout}, t) : mt::Tensor();
          const mt::Shape ys{g.N, g.Cout, g.OH, g.OW};
          mt::Tensor wy = cpu_out(ys, t), gy_out = gpu_out(ys, t);
          cnn().conv2d_forward(x, w, b, wy, g);
          gnn().conv2d_forward(dev(x), dev(w), dev(b), gy_out, g);
          expect_close(gy_out, wy, conv_tol(t, K), "conv2d forward " + what);

          mt::Tensor gy = host_randn(ys, t);
          mt::Tensor cgx = cpu_out(x.sizes(), t), cgw = cpu_out(w.sizes(), t), cgb = cpu_out({g.Cout}, t, with_bias);
          mt::Tensor ggx = gpu_out(x.sizes(), t), ggw = gpu_out(w.sizes(), t), ggb = gpu_out({g.Cout}, t, with_bias);
          cnn().conv2d_backward(gy, x, w, cgx, cgw, cgb, g);
          gnn().conv2d_backward(dev(gy), dev(x), dev(w), ggx, ggw, ggb, g);
          expect_close(ggx, cgx, conv_tol(t, g.Cout / g.groups * g.KH * g.KW), "conv2d grad x " + what);
          expect_close(ggw, cgw, conv_tol(t, g.N * L), "conv2d grad w " + what);
          if (with_bias) expect_close(ggb, cgb, sum_tol(t, g.N * L), "conv2d grad b " + what);

          // Only some gradients wanted.
          mt::Tensor only_w = gpu_out(w.sizes(), t);
          gnn().conv2d_backward(dev(gy), dev(x), dev(w), mt::Tensor(), only_w, mt::Tensor(), g);
          expect_close(only_w, cgw, conv_tol(t, g.N * L), "conv2d grad w alone " + what);
        }
  }
}

TEST(CudaNn, Conv2dTf32SwitchStaysClose) {
  REQUIRE_GPU();
  const mt::Conv2dGeometry g = conv_geometry({4, 16, 12, 12, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1});
  mt::Tensor x = host_randn({g.N, g.C, g.H, g.W}, mt::kFloat32), w = host_randn({g.Cout, g.C, 3, 3}, mt::kFloat32);
  mt::Tensor want = cpu_out({g.N, g.Cout, g.OH, g.OW}, mt::kFloat32), got = gpu_out(want.sizes(), mt::kFloat32);
  cnn().conv2d_forward(x, w, mt::Tensor(), want, g);
  mt::cuda::set_allow_tf32(true);
  gnn().conv2d_forward(dev(x), dev(w), mt::Tensor(), got, g);
  mt::cuda::set_allow_tf32(false);
  const double s = std::sqrt(double(g.C * 9));
  expect_close(got, want, {5e-3, 5e-3 * s}, "conv2d tf32");
  gnn().conv2d_forward(dev(x), dev(w), mt::Tensor(), got, g);  // and back to full fp32
  expect_close(got, want, conv_tol(mt::kFloat32, g.C * 9), "conv2d fp32 after tf32");
}

TEST(CudaNn, MaxPoolMatchesCpu) {
  REQUIRE_GPU();
  // N C H W KH KW SH SW PH PW DH DW, ceil_mode
  const std::vector<std::pair<std::vector<int64_t>, bool>> cases = {
      {{2, 3, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1}, false},
      {{1, 2, 7, 7, 3, 2, 2, 1, 1, 0, 2, 1}, true},
      {{2, 2, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1}, false},
      {{1, 1, 10, 9, 4, 3, 3, 2, 2, 1, 1, 2}, true},
  };
  for (const auto& [v, ceil_mode] : cases)
    for (mt::DType t : kFloatTypes) {
      const mt::Pool2dGeometry g = pool_geometry(v, ceil_mode);
      mt::Tensor x = host_ints({g.N, g.C, g.H, g.W}, t, 20);  // ties: the first maximum wins
      x.view({-1}).narrow(0, 3, 1).fill_(NAN);                // NaN propagates
      const mt::Shape ys{g.N, g.C, g.OH, g.OW};
      mt::Tensor wy = cpu_out(ys, t), gy = gpu_out(ys, t);
      mt::Tensor wi = cpu_out(ys, mt::kInt64), gi = gpu_out(ys, mt::kInt64);
      cnn().max_pool2d(x, wy, wi, g);
      gnn().max_pool2d(dev(x), gy, gi, g);
      const std::string what =
          std::string(mt::dtype_name(t)) + " case " + std::to_string(g.H) + "x" + std::to_string(g.W);
      expect_close(gy, wy, {0, 0}, "max_pool2d values " + what);
      expect_close(gi, wi, {0, 0}, "max_pool2d indices " + what);
    }
}

TEST(CudaNn, AvgPoolForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  for (bool ceil_mode : {false, true})
    for (bool include_pad : {true, false})
      for (int64_t divisor : {0, 5})
        for (mt::DType t : kFloatTypes) {
          mt::Pool2dGeometry g = pool_geometry({2, 3, 9, 8, 3, 2, 2, 2, 1, 1, 1, 1}, ceil_mode);
          g.count_include_pad = include_pad;
          g.divisor_override = divisor;
          const std::string what = std::string(mt::dtype_name(t)) + (ceil_mode ? " ceil" : "") +
                                   (include_pad ? " include_pad" : "") + " divisor " + std::to_string(divisor);
          mt::Tensor x = host_randn({g.N, g.C, g.H, g.W}, t);
          const mt::Shape ys{g.N, g.C, g.OH, g.OW};
          mt::Tensor wy = cpu_out(ys, t), gy = gpu_out(ys, t);
          cnn().avg_pool2d(x, wy, g);
          gnn().avg_pool2d(dev(x), gy, g);
          expect_close(gy, wy, sum_tol(t, 6), "avg_pool2d " + what);
          mt::Tensor go = host_randn(ys, t);
          mt::Tensor wx = cpu_out(x.sizes(), t), gx = gpu_out(x.sizes(), t);
          cnn().avg_pool2d_backward(go, wx, g);
          gnn().avg_pool2d_backward(dev(go), gx, g);
          expect_close(gx, wx, sum_tol(t, 6), "avg_pool2d backward " + what);
        }
}

TEST(CudaNn, AdaptiveAvgPoolForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  // (H, W) -> (OH, OW): uneven windows, identity, global, and more outputs than inputs.
  for (auto [h, w, oh, ow] :
       std::vector<std::array<int64_t, 4>>{{7, 9, 3, 4}, {6, 6, 6, 6}, {5, 7, 1, 1}, {4, 4, 7, 5}})
    for (mt::DType t : kFloatTypes) {
      mt::Pool2dGeometry g;
      g.N = 2, g.C = 3, g.H = h, g.W = w, g.OH = oh, g.OW = ow;
      const std::string what = std::string(mt::dtype_name(t)) + " " + std::to_string(h) + "x" + std::to_string(w) +
                               "->" + std::to_string(oh) + "x" + std::to_string(ow);
      mt::Tensor x = host_randn({g.N, g.C, h, w}, t);
      mt::Tensor wy = cpu_out({g.N, g.C, oh, ow}, t), gy = gpu_out({g.N, g.C, oh, ow}, t);
      cnn().adaptive_avg_pool2d(x, wy, g);
      gnn().adaptive_avg_pool2d(dev(x), gy, g);
      expect_close(gy, wy, sum_tol(t, h * w), "adaptive_avg_pool2d " + what);
      mt::Tensor go = host_randn({g.N, g.C, oh, ow}, t);
      mt::Tensor wx = cpu_out(x.sizes(), t), gx = gpu_out(x.sizes(), t);
      cnn().adaptive_avg_pool2d_backward(go, wx, g);
      gnn().adaptive_avg_pool2d_backward(dev(go), gx, g);
      expect_close(gx, wx, sum_tol(t, 4), "adaptive_avg_pool2d backward " + what);
    }
}

TEST(CudaNn, LayerNormForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  // (rows, n): a warp per row, a block per row, one long row
  for (auto [M, n] : std::vector<std::pair<int64_t, int64_t>>{{7, 33}, {3, 1000}, {1, 5000}, {300, 64}})
    for (mt::DType t : kFloatTypes)
      for (bool affine : {true, false}) {
        const mt::DType A = acc_of(t);
        const std::string what = std::string(mt::dtype_name(t)) + " [" + std::to_string(M) + ", " + std::to_string(n) +
                                 "]" + (affine ? " affine" : "");
        mt::Tensor x = host_randn({M, n}, mt::kFloat64).mul_(2).add_(1).to(t);
        mt::Tensor w = affine ? host_randn({n}, A) : mt::Tensor(), b = affine ? host_randn({n}, A) : mt::Tensor();
        mt::Tensor wy = cpu_out({M, n}, t), wm = cpu_out({M}, A), wr = cpu_out({M}, A);
        mt::Tensor gy = gpu_out({M, n}, t), gm = gpu_out({M}, A), gr = gpu_out({M}, A);
        cnn().layer_norm(x, w, b, 1e-5, wy, wm, wr);
        gnn().layer_norm(dev(x), dev(w), dev(b), 1e-5, gy, gm, gr);
        expect_close(gy, wy, sum_tol(t, 8), "layer_norm y " + what);
        expect_close(gm, wm, acc_tol(t, 4), "layer_norm mean " + what);
        expect_close(gr, wr, acc_tol(t, 4), "layer_norm rstd " + what);

        mt::Tensor go = host_randn({M, n}, t);
        mt::Tensor cgx = cpu_out({M, n}, t), cgw = cpu_out({n}, A), cgb = cpu_out({n}, A);
        mt::Tensor ggx = gpu_out({M, n}, t), ggw = gpu_out({n}, A), ggb = gpu_out({n}, A);
        cnn().layer_norm_backward(go, x, wm, wr, w, cgx, cgw, cgb);
        gnn().layer_norm_backward(dev(go), dev(x), dev(wm), dev(wr), dev(w), ggx, ggw, ggb);
        expect_close(ggx, cgx, sum_tol(t, 8), "layer_norm grad x " + what);
        expect_close(ggw, cgw, acc_tol(t, M), "layer_norm grad w " + what);
        expect_close(ggb, cgb, acc_tol(t, M), "layer_norm grad b " + what);
      }
}

TEST(CudaNn, BatchNormStatsApplyBackwardMatchCpu) {
  REQUIRE_GPU();
  for (const mt::Shape& s : std::vector<mt::Shape>{{4, 3, 5, 6}, {16, 8}, {2, 5, 3000}})
    for (mt::DType t : kFloatTypes) {
      const mt::DType A = acc_of(t);
      const int64_t C = s[1], count = mt::shape_numel(s) / C;
      const std::string what = std::string(mt::dtype_name(t)) + " " + mt::shape_str(s);
      mt::Tensor x = host_randn(s, mt::kFloat64).mul_(3).add_(2).to(t);
      mt::Tensor wm = cpu_out({C}, A), wv = cpu_out({C}, A), gm = gpu_out({C}, A), gv = gpu_out({C}, A);
      cnn().batch_norm_stats(x, wm, wv);
      gnn().batch_norm_stats(dev(x), gm, gv);
      expect_close(gm, wm, acc_tol(t, 8), "batch_norm mean " + what);
      expect_close(gv, wv, acc_tol(t, 16), "batch_norm var " + what);

      mt::Tensor scale = host_randn({C}, A), shift = host_randn({C}, A);
      mt::Tensor wy = cpu_out(s, t), gy = gpu_out(s, t);
      cnn().batch_norm_apply(x, scale, shift, wy);
      gnn().batch_norm_apply(dev(x), dev(scale), dev(shift), gy);
      expect_close(gy, wy, sum_tol(t, 4), "batch_norm apply " + what);

      mt::Tensor invstd = mt::rsqrt(wv + 1e-5), w = host_randn({C}, A), go = host_randn(s, t);
      for (bool training : {true, false}) {
        mt::Tensor cgx = cpu_out(s, t), cgw = cpu_out({C}, A), cgb = cpu_out({C}, A);
        mt::Tensor ggx = gpu_out(s, t), ggw = gpu_out({C}, A), ggb = gpu_out({C}, A);
        cnn().batch_norm_backward(go, x, wm, invstd, w, training, cgx, cgw, cgb);
        gnn().batch_norm_backward(dev(go), dev(x), dev(wm), dev(invstd), dev(w), training, ggx, ggw, ggb);
        const std::string w2 = what + (training ? " training" : " eval");
        expect_close(ggx, cgx, sum_tol(t, 16), "batch_norm grad x " + w2);
        expect_close(ggw, cgw, acc_tol(t, count), "batch_norm grad w " + w2);
        expect_close(ggb, cgb, acc_tol(t, count), "batch_norm grad b " + w2);
      }
    }
}

TEST(CudaNn, CrossEntropyForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  const int64_t ignore = -100;
  for (auto [M, C] : std::vector<std::pair<int64_t, int64_t>>{{8, 10}, {5, 1000}, {3, 3}, {70, 300}})
    for (mt::DType t : kFloatTypes)
      for (bool weighted : {false, true})
        for (double smoothing : {0.0, 0.1}) {
          const mt::DType A = acc_of(t);
          const std::string what = std::string(mt::dtype_name(t)) + " [" + std::to_string(M) + ", " +
                                   std::to_string(C) + "]" + (weighted ? " weighted" : "") + " smoothing " +
                                   std::to_string(smoothing);
          mt::Tensor x = host_randn({M, C}, mt::kFloat64).mul_(3).to(t);
          mt::Tensor target = mt::randint(0, C, {M});
          target.view({-1}).narrow(0, 1, 1).fill_(ignore);
          mt::Tensor w = weighted ? (mt::abs(host_randn({C}, A)) + 0.1).to(A) : mt::Tensor();
          mt::Tensor wl = cpu_out({M}, A), wz = cpu_out({M}, A), gl = gpu_out({M}, A), gz = gpu_out({M}, A);
          cnn().cross_entropy(x, target, w, ignore, smoothing, wl, wz);
          gnn().cross_entropy(dev(x), dev(target), dev(w), ignore, smoothing, gl, gz);
          expect_close(gz, wz, acc_tol(t, 16), "cross_entropy lse " + what);
          expect_close(gl, wl, acc_tol(t, 16), "cross_entropy loss " + what);

          mt::Tensor grad = host_randn({M}, A);
          mt::Tensor wg = cpu_out({M, C}, t), gg = gpu_out({M, C}, t);
          cnn().cross_entropy_backward(grad, x, target, w, wz, ignore, smoothing, wg);
          gnn().cross_entropy_backward(dev(grad), dev(x), dev(target), dev(w), dev(wz), ignore, smoothing, gg);
          Tol tol = tol_for(t);  // p = exp(x - lse): lse's last-bit difference scales every p
          tol.rtol = std::max(tol.rtol, 1e-5);
          tol.atol = std::max(tol.atol, 1e-6);
          expect_close(gg, wg, tol, "cross_entropy grad " + what);
        }
}

TEST(CudaNn, CrossEntropyRejectsBadTargetsAndStaysUsable) {
  REQUIRE_GPU();
  const int64_t M = 6, C = 4;
  mt::Tensor x = host_randn({M, C}, mt::kFloat32);
  mt::Tensor target = mt::from_vector<int64_t>({0, 1, 2, 9, -3, 3});
  mt::Tensor loss = gpu_out({M}, mt::kFloat32), lse = gpu_out({M}, mt::kFloat32);
  // The kernel itself never reads out of bounds: bad rows get loss 0 (the op range-checks).
  gnn().cross_entropy(dev(x), dev(target), mt::Tensor(), -100, 0.0, loss, lse);
  const std::vector<float> l = loss.to(kCpu).to_vector<float>();
  EXPECT_EQ(l[3], 0.0f);
  EXPECT_EQ(l[4], 0.0f);
  // Through the public op the error is raised at the next host read (sticky device error),
  // naming the op and a bad target; the device is still fine afterwards.
  try {
    mt::Tensor bad = mt::nn::functional::cross_entropy(x.to(kGpu), target.to(kGpu));
    (void)bad.to(kCpu);
    ADD_FAILURE() << "an out-of-range target was accepted";
  } catch (const mt::Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("cross_entropy: target 9 at position 3") != std::string::npos ||
                msg.find("cross_entropy: target -3 at position 4") != std::string::npos)
        << msg;
  }
  mt::Tensor ok = mt::from_vector<int64_t>({0, 1, 2, 3, 0, 1});
  mt::Tensor lg = mt::nn::functional::cross_entropy(x.to(kGpu), ok.to(kGpu));
  mt::Tensor lc = mt::nn::functional::cross_entropy(x, ok);
  expect_close(lg.to(kCpu), lc, {1e-5, 1e-6}, "cross_entropy after an error");
}

TEST(CudaNn, EmbeddingNllDropoutOnGpu) {
  REQUIRE_GPU();
  namespace F = mt::nn::functional;
  mt::Tensor weight = host_randn({10, 4}, mt::kFloat32);
  mt::Tensor idx = mt::from_vector<int64_t>({3, 0, 9, 3});
  expect_close(F::embedding(idx.to(kGpu), weight.to(kGpu)).to(kCpu), F::embedding(idx, weight), {0, 0}, "embedding");
  // Out-of-range indices are reported at the next host read (the sticky device error).
  EXPECT_THROW(F::embedding(mt::from_vector<int64_t>({1, 10}).to(kGpu), weight.to(kGpu)).to(kCpu), mt::Error);
  EXPECT_THROW(F::embedding(mt::from_vector<int64_t>({-1}).to(kGpu), weight.to(kGpu)).to(kCpu), mt::Error);

  mt::Tensor logp = mt::log_softmax(host_randn({5, 4}, mt::kFloat32), 1);
  EXPECT_THROW(F::nll_loss(logp.to(kGpu), mt::from_vector<int64_t>({0, 1, 2, 3, 4}).to(kGpu)).to(kCpu), mt::Error);

  // The dropout mask is counter-based (Philox): the same seed gives the same mask on both devices.
  mt::Tensor ones = mt::ones({64, 33});
  mt::manual_seed(11);
  mt::Tensor dc = F::dropout(ones, 0.3, true);
  mt::manual_seed(11);
  mt::Tensor dg = F::dropout(ones.to(kGpu), 0.3, true);
  expect_close(dg.to(kCpu), dc, {1e-7, 0}, "dropout mask");
  // x * mask in one pass, and the backward from the keep bits (a warp ballot per 32 elements on
  // the GPU, 64-bit words on the CPU: one layout); 1073 elements end mid-warp.
  for (mt::DType t : {mt::kFloat32, mt::kBFloat16}) {
    const mt::Tensor x = host_randn({37, 29}, t), g = host_randn({37, 29}, t);
    mt::Tensor xc = x.detach(), xg = x.to(kGpu);
    xc.requires_grad_();
    xg.requires_grad_();
    mt::manual_seed(12);
    const mt::Tensor yc = F::dropout(xc, 0.4, true);
    mt::manual_seed(12);
    const mt::Tensor yg = F::dropout(xg, 0.4, true);
    expect_close(yg.to(kCpu), yc, {0, 0}, "fused dropout");
    const mt::Tensor gc = mt::autograd::grad({yc}, {xc}, {g})[0];
    const mt::Tensor gg = mt::autograd::grad({yg}, {xg}, {g.to(kGpu)})[0];
    expect_close(gg.to(kCpu), gc, {0, 0}, "dropout backward from the keep bits");
  }
}

// A small CNN (conv + batch norm + pools + grouped dilated conv + linear) run forward and
// backward, then updated, on both devices from the same initial weights: the losses,
// every gradient and the updated loss agree.
TEST(CudaTrain, TinyCnnStepMatchesCpu) {
  REQUIRE_GPU();
  namespace nn = mt::nn;
  auto make_net = [] {
    mt::manual_seed(5);
    return std::make_shared<nn::Sequential>(
        nn::Conv2d(1, 4, 3, {.padding = 1}), nn::BatchNorm2d(4), nn::ReLU(), nn::MaxPool2d(2),
        nn::Conv2d(4, 8, 3, {.padding = 2, .dilation = 2, .groups = 2}), nn::ReLU(), nn::AvgPool2d(2),
        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(8, 10));
  };
  mt::Tensor images = host_randn({6, 1, 12, 12}, mt::kFloat32);
  mt::Tensor labels = mt::randint(0, 10, {6});
  for (mt::DType amp : {mt::kFloat32, mt::kFloat16, mt::kBFloat16}) {
    const std::string what = std::string(" (autocast ") + mt::dtype_name(amp) + ")";
    auto cpu_net = make_net(), gpu_net = make_net();
    gpu_net->to(kGpu);
    auto step = [&](nn::Sequential& net, mt::Device d, std::vector<mt::Tensor>& grads) {
      mt::Tensor loss;
      {
        mt::amp::Autocast ac(amp == mt::kFloat32 ? mt::kFloat16 : amp, amp != mt::kFloat32, d.type);
        loss = nn::functional::cross_entropy(net(images.to(d)), labels.to(d));
      }
      loss.backward();
      mt::NoGradGuard no_grad;
      for (mt::Tensor& p : net.parameters()) {
        grads.push_back(p.grad().to(kCpu));
        p.add_(p.grad(), -0.1);
      }
      return loss.to(kCpu).to(mt::kFloat64);
    };
    std::vector<mt::Tensor> cg, gg;
    mt::Tensor lc = step(*cpu_net, kCpu, cg), lg = step(*gpu_net, kGpu, gg);
    const bool reduced = amp != mt::kFloat32;
    const Tol tol = reduced ? Tol{3e-2, 3e-3} : Tol{1e-4, 1e-5};
    expect_close(lg, lc, tol, "loss" + what);
    ASSERT_EQ(cg.size(), gg.size());
    for (size_t i = 0; i < cg.size(); ++i) {
      const double scale = mt::abs(cg[i].to(mt::kFloat64)).max().item<double>();
      expect_close(gg[i], cg[i], {tol.rtol, tol.rtol * scale + tol.atol}, "grad " + std::to_string(i) + what);
    }
    std::vector<mt::Tensor> unused;
    expect_close(step(*gpu_net, kGpu, unused), step(*cpu_net, kCpu, unused), tol, "loss after a step" + what);
  }
}
