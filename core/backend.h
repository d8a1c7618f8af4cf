// The op dispatch table: one set of kernels per device type. Ops in core/ops.cpp do
// shape and dtype inference, then call the table of their inputs' device. cuda/
// fills the CUDA row; nothing above core/ sees a device kernel directly.
//
// Kernel contracts: every operand is already of the op's compute dtype and on one
// device; `out` is contiguous unless stated; inputs may be arbitrarily strided and
// broadcast (stride 0) to out's shape.
#pragma once
#include "core/tensor.h"

namespace mantissa {

enum class UnaryOp : uint8_t {
  Neg, Abs, Sign, Exp, Log, Log1p, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu,
  GeluErf, GeluTanh, Silu, Erf, Reciprocal, Square, LogicalNot,
  PowScalar,    // x ^ a
  Clamp,        // min(max(x, a), b)
  IsFinite,     // out is bool
};

enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Maximum, Minimum, Pow,
  Eq, Ne, Lt, Le, Gt, Ge,  // out is bool
  LogicalAnd, LogicalOr,
  // Fused backward formulas: (grad, x) -> grad * f'(x)
  ReluBackward, GeluErfBackward, GeluTanhBackward, SiluBackward, SigmoidBackwardFromOutput,
  TanhBackwardFromOutput,
};

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin };

struct Backend {
  // dst[i] = convert(src[i]); src is broadcast/strided to dst's shape; dst may be strided.
  void (*copy)(const Tensor& src, const Tensor& dst);
  void (*fill)(const Tensor& dst, const Scalar& value);  // dst may be strided
  void (*unary)(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b);
  void (*binary)(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
  void (*where)(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
  // in: contiguous [outer, n]; out: contiguous [outer]. Accumulates in fp32 (fp64 for fp64).
  void (*reduce)(ReduceOp op, const Tensor& in, const Tensor& out);
  // in: contiguous [outer, n]; out: [outer] mean and (unbiased by `correction`) variance.
  void (*var_mean)(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction);
  // in, out: contiguous [outer, n]; softmax or log_softmax along n, computed in fp32.
  void (*softmax)(const Tensor& in, const Tensor& out, bool log);
  // a: [B, M, K], b: [B, K, N] (any strides with unit stride in one of the last two dims or
  // contiguous); out: contiguous [B, M, N]. Reduced floats accumulate in fp32.
  void (*matmul)(const Tensor& a, const Tensor& b, const Tensor& out);
  // out[.., i, ..] = in[.., index[i], ..] along dim; index int64 contiguous.
  void (*index_select)(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out);
  // out[i][j] = in[i][index[i][j]] along dim (index same rank as in).
  void (*gather)(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out);
  // out[..index[i][j]..] += src[i][j] along dim; out contiguous, accumulated in place.
  void (*scatter_add)(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
  // dst (contiguous, floating) = (init ? 0 : dst) + convert(src); src has dst's shape, any
  // floating dtype and strides. When found_inf (float32 [1], same device) is defined, it is
  // set to 1 if any src value is inf or NaN; it is never cleared here.
  void (*accumulate_grad)(const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf);
};

// The kernels for a device; throws mantissa::Error when the device is not available.
const Backend& backend_for(Device d);
const Backend& cpu_backend();

}  // namespace mantissa
