#include "core/backend.h"

#include "core/cpu/kernels.h"
#include "core/error.h"
#include "core/profile_op.h"

namespace mantissa {

#ifdef MANTISSA_WITH_CUDA
const Backend* cuda_backend();  // cuda/backend.cpp
#endif

const Backend& cpu_backend() {
  static const Backend table{cpu::copy,
                             cpu::fill,
                             cpu::unary,
                             cpu::binary,
                             cpu::where,
                             cpu::reduce,
                             cpu::var_mean,
                             cpu::softmax,
                             cpu::matmul,
                             cpu::index_select,
                             cpu::gather,
                             cpu::scatter_add,
                             cpu::accumulate_grad,
                             cpu::fused_optimizer_step,
                             cpu::update_scale,
                             cpu::dropout_mask};
  return table;
}

namespace {

// ---------------------------------------------------------------- profiled dispatch
// backend_for() is the one place every op passes on its way to a kernel, so the op ranges
// are recorded here: while profiling is on it hands out a twin of the table whose entries
// open a range named after the op, then call the real kernel. Off, the cost is the branch
// in backend_for().

const char* unary_name(UnaryOp op) {
  static const char* const kNames[] = {"neg",   "abs",     "sign",       "exp",       "log",        "log1p",
                                       "sqrt",  "rsqrt",   "sin",        "cos",       "tanh",       "sigmoid",
                                       "relu",  "gelu",    "gelu_tanh",  "silu",      "erf",        "reciprocal",
                                       "square", "logical_not", "pow",   "clamp",     "isfinite"};
  const size_t i = size_t(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unary";
}

const char* binary_name(BinaryOp op) {
  static const char* const kNames[] = {"add",
                                       "sub",
                                       "mul",
                                       "div",
                                       "maximum",
                                       "minimum",
                                       "pow",
                                       "eq",
                                       "ne",
                                       "lt",
                                       "le",
                                       "gt",
                                       "ge",
                                       "logical_and",
                                       "logical_or",
                                       "relu_backward",
                                       "gelu_backward",
                                       "gelu_tanh_backward",
                                       "silu_backward",
                                       "sigmoid_backward",
                                       "tanh_backward"};
  const size_t i = size_t(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "binary";
}

const char* reduce_name(ReduceOp op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "argmax", "argmin"};
  const size_t i = size_t(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "reduce";
}

// Inner() returns the real table; every entry forwards to it inside a range.
template <const Backend& (*Inner)()>
struct Profiled {
  static void copy(const Tensor& src, const Tensor& dst) {
    profiler::OpRange r("copy", src, dst);
    Inner().copy(src, dst);
  }
  static void fill(const Tensor& dst, const Scalar& value) {
    profiler::OpRange r("fill", dst, value);
    Inner().fill(dst, value);
  }
  static void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
    profiler::OpRange r(unary_name(op), op, in, out, a, b);
    Inner().unary(op, in, out, a, b);
  }
  static void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
    profiler::OpRange r(binary_name(op), op, a, b, out);
    Inner().binary(op, a, b, out);
  }
  static void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
    profiler::OpRange r("where", cond, a, b, out);
    Inner().where(cond, a, b, out);
  }
  static void reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
    profiler::OpRange r(reduce_name(op), op, in, out);
    Inner().reduce(op, in, out);
  }
  static void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
    profiler::OpRange r("var_mean", in, var, mean, correction);
    Inner().var_mean(in, var, mean, correction);
  }
  static void softmax(const Tensor& in, const Tensor& out, bool log) {
    profiler::OpRange r(log ? "log_softmax" : "softmax", in, out, log);
    Inner().softmax(in, out, log);
  }
  static void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
    profiler::OpRange r("matmul", a, b, bias, out);
    Inner().matmul(a, b, bias, out);
  }
  static void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
    profiler::OpRange r("index_select", in, dim, index, out);
    Inner().index_select(in, dim, index, out);
  }
  static void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
    profiler::OpRange r("gather", in, dim, index, out);
    Inner().gather(in, dim, index, out);
  }
  static void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
    profiler::OpRange r("scatter_add", out, dim, index, src);
    Inner().scatter_add(out, dim, index, src);
  }
  static void accumulate_grad(const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf) {
    profiler::OpRange r("accumulate_grad", src, dst, init, found_inf);
    Inner().accumulate_grad(src, dst, init, found_inf);
  }
  static void fused_optimizer_step(const FusedStepArgs& args) {
    profiler::OpRange r("fused_optimizer_step", args);
    Inner().fused_optimizer_step(args);
  }
  static void update_scale(const Tensor& scale, const Tensor& counters, const Tensor& found_inf,
                           const math::ScaleUpdate& rule) {
    profiler::OpRange r("update_scale", scale, counters, found_inf, rule);
    Inner().update_scale(scale, counters, found_inf, rule);
  }

  static void dropout_mask(const Tensor& out, double p, uint64_t seed) {
    profiler::OpRange r("dropout_mask", out, p, seed);
    Inner().dropout_mask(out, p, seed);
  }

  static const Backend& table() {
    static const Backend t{copy,         fill,   unary,       binary,          where,
                           reduce,       var_mean, softmax,   matmul,          index_select,
                           gather,       scatter_add, accumulate_grad, fused_optimizer_step, update_scale,
                           dropout_mask};
    return t;
  }
};

#ifdef MANTISSA_WITH_CUDA
const Backend& cuda_table() {
  const Backend* b = cuda_backend();
  MT_CHECK(b != nullptr, "dispatch", "no CUDA kernels are registered");
  return *b;
}
#endif

}  // namespace

const Backend& backend_for(Device d) {
  if (d.is_cpu()) return profiler::enabled() ? Profiled<cpu_backend>::table() : cpu_backend();
#ifdef MANTISSA_WITH_CUDA
  MT_CHECK(d.index < cuda_device_count(), "dispatch", "device ", d.str(), " is not available (",
           cuda_device_count(), " CUDA devices found)");
  return profiler::enabled() ? Profiled<cuda_table>::table() : cuda_table();
#else
  MT_FAIL("dispatch", "device ", d.str(), " is not available: mantissa was built without CUDA");
#endif
}

}  // namespace mantissa
