#include "core/backend.h"

#include "core/backend_registry.h"
#include "core/cpu/kernels.h"
#include "core/error.h"
#include "core/profiler.h"

namespace mantissa {

#define MT_NAME_CASE(Enum, name, ...) \
  case Op::Enum:                      \
    return name;
const char* op_name(UnaryOp op) {
  using Op = UnaryOp;
  switch (op) { MT_UNARY_OPS(MT_NAME_CASE) }
  return "unary";
}
const char* op_name(BinaryOp op) {
  using Op = BinaryOp;
  switch (op) { MT_BINARY_OPS(MT_NAME_CASE) }
  return "binary";
}
const char* op_name(ReduceOp op) {
  using Op = ReduceOp;
  switch (op) { MT_REDUCE_OPS(MT_NAME_CASE) }
  return "reduce";
}
#undef MT_NAME_CASE

const Backend& cpu_backend() {
  static const Backend table{
      .copy = cpu::copy,
      .fill = cpu::fill,
      .unary = cpu::unary,
      .binary = cpu::binary,
      .where = cpu::where,
      .reduce = cpu::reduce,
      .var_mean = cpu::var_mean,
      .softmax = cpu::softmax,
      .matmul = cpu::matmul,
      .index_select = cpu::index_select,
      .gather = cpu::gather,
      .scatter_add = cpu::scatter_add,
      .accumulate_grad = cpu::accumulate_grad,
      .fused_optimizer_step = cpu::fused_optimizer_step,
      .update_scale = cpu::update_scale,
      .dropout_mask = cpu::dropout_mask,
  };
  return table;
}

namespace {

// ---------------------------------------------------------------- profiled dispatch
// backend_for() is the one place every op passes on its way to a kernel, so the op ranges
// are recorded here: while profiling is on it hands out a twin of the table whose entries
// open a range named after the op, then call the real kernel. Off, the cost is the branch
// in backend_for().

// Inner() returns the real table; every entry forwards to it inside a range.
template <const Backend& (*Inner)()>
struct Profiled {
  static void copy(const Tensor& src, const Tensor& dst) {
    profiler::Range r("copy");
    Inner().copy(src, dst);
  }
  static void fill(const Tensor& dst, const Scalar& value) {
    profiler::Range r("fill");
    Inner().fill(dst, value);
  }
  static void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
    profiler::Range r(op_name(op));
    Inner().unary(op, in, out, a, b);
  }
  static void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
    profiler::Range r(op_name(op));
    Inner().binary(op, a, b, out);
  }
  static void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
    profiler::Range r("where");
    Inner().where(cond, a, b, out);
  }
  static void reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
    profiler::Range r(op_name(op));
    Inner().reduce(op, in, out);
  }
  static void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
    profiler::Range r("var_mean");
    Inner().var_mean(in, var, mean, correction);
  }
  static void softmax(const Tensor& in, const Tensor& out, bool log) {
    profiler::Range r(log ? "log_softmax" : "softmax");
    Inner().softmax(in, out, log);
  }
  static void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
    profiler::Range r("matmul");
    Inner().matmul(a, b, bias, out);
  }
  static void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
    profiler::Range r("index_select");
    Inner().index_select(in, dim, index, out);
  }
  static void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
    profiler::Range r("gather");
    Inner().gather(in, dim, index, out);
  }
  static void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
    profiler::Range r("scatter_add");
    Inner().scatter_add(out, dim, index, src);
  }
  static void accumulate_grad(const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf) {
    profiler::Range r("accumulate_grad");
    Inner().accumulate_grad(src, dst, init, found_inf);
  }
  static void fused_optimizer_step(const FusedStepArgs& args) {
    profiler::Range r("fused_optimizer_step");
    Inner().fused_optimizer_step(args);
  }
  static void update_scale(const Tensor& scale, const Tensor& counters, const Tensor& found_inf,
                           const math::ScaleUpdate& rule) {
    profiler::Range r("update_scale");
    Inner().update_scale(scale, counters, found_inf, rule);
  }

  static void dropout_mask(const Tensor& out, double p, uint64_t seed) {
    profiler::Range r("dropout_mask");
    Inner().dropout_mask(out, p, seed);
  }

  static const Backend& table() {
    static const Backend t{
        .copy = copy,
        .fill = fill,
        .unary = unary,
        .binary = binary,
        .where = where,
        .reduce = reduce,
        .var_mean = var_mean,
        .softmax = softmax,
        .matmul = matmul,
        .index_select = index_select,
        .gather = gather,
        .scatter_add = scatter_add,
        .accumulate_grad = accumulate_grad,
        .fused_optimizer_step = fused_optimizer_step,
        .update_scale = update_scale,
        .dropout_mask = dropout_mask,
    };
    return t;
  }
};

const Backend& cuda_table() { return *find_backend(DeviceType::CUDA)->kernels; }

}  // namespace

const Backend& backend_for(Device d) {
  if (d.is_cpu()) return profiler::enabled() ? Profiled<cpu_backend>::table() : cpu_backend();
  const DeviceBackend* b = find_backend(d.type);
  MT_CHECK(b != nullptr, "dispatch", "device ", d.str(), " is not available: mantissa was built without it");
  MT_CHECK(d.index < b->device_count(), "dispatch", "device ", d.str(), " is not available (", b->device_count(),
           " devices found)");
  return profiler::enabled() ? Profiled<cuda_table>::table() : *b->kernels;
}

}  // namespace mantissa
