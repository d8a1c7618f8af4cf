// The op dispatch table: one set of kernels per device type. The ops (autograd/ops_*.cpp,
// nn/functional*.cpp, through core/launch.h) do shape and dtype inference, then call the table
// of their inputs' device. cuda/ registers the CUDA row (core/backend_registry.h); nothing
// above core/ sees a device kernel directly.
//
// Kernel contracts: every operand is already of the op's compute dtype and on one
// device; `out` is contiguous unless stated; inputs may be arbitrarily strided and
// broadcast (stride 0) to out's shape.
#pragma once
#include <array>
#include <vector>

#include "core/elementwise_math.h"
#include "core/step_math.h"
#include "core/tensor.h"

namespace mantissa {

// The op enums, generated from the lists in core/elementwise_math.h.
#define MT_ENUMERATOR(Enum, ...) Enum,
enum class UnaryOp : uint8_t { MT_UNARY_OPS(MT_ENUMERATOR) };
enum class BinaryOp : uint8_t { MT_BINARY_OPS(MT_ENUMERATOR) };
enum class ReduceOp : uint8_t { MT_REDUCE_OPS(MT_ENUMERATOR) };
#undef MT_ENUMERATOR

// The op's name in errors, profiler ranges and the autocast table.
const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(ReduceOp op);

// One parameter of a fused optimizer step. Every tensor is contiguous and on the
// launch's device; param, grad and state share the master's dtype (float32 or float64).
struct FusedStepTensor {
  Tensor param;                 // the master weight, updated in place
  Tensor grad;                  // its gradient (still multiplied by the loss scale)
  std::array<Tensor, 3> state;  // the first FusedStepArgs::num_state entries: momentum / exp_avg, exp_avg_sq, max
  Tensor working_copy;          // the AMP fp16/bf16 copy to rewrite from the new master, or undefined
  Tensor step;                  // int64 [1]: updates applied so far; incremented unless the step is skipped
  // SGD: the momentum buffer starts as the gradient when the new step count equals this (0: never).
  int64_t first_at_step = 0;
};

// A multi-tensor optimizer step: one group's hyper-parameters over its parameters on one device.
// Per parameter, unless *found_inf != 0 (then nothing at all changes, steps included):
//   t = ++step;  g = grad * inv_scale / scale;  f_t(param, g, state...);  working_copy = round(param)
struct FusedStepArgs {
  math::OptimizerHyper hyper;
  int num_state = 0;
  std::vector<FusedStepTensor> tensors;
  float inv_scale = 1;  // a host factor (plain optimizer use: 1)
  Tensor scale;         // float32 [1] on the device, or undefined (1): the GradScaler's loss scale
  Tensor found_inf;     // float32 [1] on the device, or undefined: read by the kernel, never by the host
};

// The kernel list: X(name, (parameters), range), one line per kernel, from which the Backend
// fields, each device's declarations (MT_BACKEND_DECLARATION inside its namespace), both tables
// (MT_BACKEND_TABLE_ENTRY: a kernel missing on a device does not link, a swapped one does not
// compile) and the profiled twin (core/backend.cpp) are generated. `range` names the profiler
// range: Named (after the entry), ByOp (op_name() of the first argument: the elementwise and
// reduction enums), Softmax (softmax or log_softmax by the `log` flag).
#define MT_BACKEND_KERNELS(X)                                                                                     \
  /* dst[i] = convert(src[i]); src is broadcast/strided to dst's shape; dst may be strided. */                    \
  X(copy, (const Tensor& src, const Tensor& dst), Named)                                                          \
  X(fill, (const Tensor& dst, const Scalar& value), Named) /* dst may be strided */                               \
  X(unary, (UnaryOp op, const Tensor& in, const Tensor& out, double a, double b), ByOp)                           \
  X(binary, (BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double s0, double s1), ByOp)       \
  X(where, (const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out), Named)                      \
  /* in: contiguous [outer, n], or launch::reduce's [outer, cols, n] column view (strides {so, 1, ld}, */         \
  /* every device); out: contiguous, one value per row. Accumulates in fp32 (fp64 for fp64). */                   \
  X(reduce, (ReduceOp op, const Tensor& in, const Tensor& out), ByOp)                                             \
  /* in: [outer, n], or on the CPU the column view; out: the rows' mean and (unbiased by `correction`) */         \
  /* variance. */                                                                                                 \
  X(var_mean, (const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction), Named)               \
  /* in, out: contiguous [outer, n] or [outer, n, inner] (any floating dtypes); softmax or log_softmax */         \
  /* along n, computed in fp32 (fp64 when either is fp64). The backward is NnKernels::softmax_backward. */        \
  X(softmax, (const Tensor& in, const Tensor& out, bool log), Softmax)                                            \
  /* in, out: contiguous [outer, n, inner], one dtype (floating or int64): the inclusive scan along n, */         \
  /* out_i = in_0 + .. + in_i (in_0 * .. * in_i for `product`; from the end, in_i + .. + in_{n-1}, when */        \
  /* `reverse`), accumulated in order in fp64 on the CPU (fp32 on CUDA below fp64), int64 wrapping. */            \
  X(scan, (const Tensor& in, const Tensor& out, bool product, bool reverse), Named)                               \
  /* x, g, gx: contiguous [outer, n, inner], one floating dtype: cumprod's gradient along n, as */                \
  /* PyTorch's: with z a line's first zero (n if none) and y the forward's output, */                             \
  /* gx_i = (sum_{i <= k < z} g_k y_k) / x_i for i < z, y_{z-1} sum_{k >= z} g_k x_{z+1} .. x_k at z, */          \
  /* 0 after z. Accumulated in fp64 on the CPU, the acc type on CUDA. */                                          \
  X(cumprod_backward, (const Tensor& x, const Tensor& g, const Tensor& gx), Named)                                \
  /* a: [B, M, K], b: [B, K, N] (any strides with unit stride in one of the last two dims or */                   \
  /* contiguous); bias: undefined or contiguous [N] of out's dtype, added to every row in the */                  \
  /* accumulator before the single rounding to out's dtype (linear's epilogue); out: contiguous */                \
  /* [B, M, N]. Reduced floats accumulate in fp32. K == 0 gives bias (or zeros). */                               \
  X(matmul, (const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out), Named)                     \
  /* out[.., i, ..] = in[.., index[i], ..] along dim; index int64 contiguous. */                                  \
  X(index_select, (const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out), Named)                 \
  /* out[i][j] = in[i][index[i][j]] along dim (index same rank as in). */                                         \
  X(gather, (const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out), Named)                       \
  /* out[..index[i][j]..] += src[i][j] along dim; out contiguous, accumulated in place. */                        \
  X(scatter_add, (const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src), Named)                 \
  /* dst (contiguous, floating) = (init ? 0 : dst) + convert(src); src has dst's shape, any */                    \
  /* floating dtype and strides. When found_inf (float32 [1], same device) is defined, it is */                   \
  /* set to 1 if any src value is inf or NaN; it is never cleared here. With dst undefined it */                  \
  /* only checks src (any floating dtype and strides) into found_inf (GradScaler::step). */                       \
  X(accumulate_grad, (const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf), Named)           \
  /* The fused optimizer step above (CPU: one parallel loop per parameter; CUDA: one */                           \
  /* multi-tensor kernel launch per up to 24 parameters, no host synchronisation). */                             \
  X(fused_optimizer_step, (const FusedStepArgs& args), Named)                                                     \
  /* GradScaler::update on the device: scale (float32 [1]) and counters (int32 [3]: */                            \
  /* growth_tracker, overflows_in_a_row, skipped_steps) advance by math::ScaleUpdate given */                     \
  /* found_inf (float32 [1] or undefined: no overflow), which is then cleared to 0. */                            \
  X(update_scale,                                                                                                 \
    (const Tensor& scale, const Tensor& counters, const Tensor& found_inf, const math::ScaleUpdate& rule), Named) \
  /* out (contiguous, floating)[i] = x[i] * m[i], m[i] = math::DropoutKeep{seed, 1 - p}(i) ? 1 / (1 - p) : 0 */   \
  /* (the scale rounded to out's dtype), the product as the binary mul computes it; x undefined: m itself, */     \
  /* else contiguous like out. Element i depends only on (seed, i) (core/philox.h), so every device draws */      \
  /* the same mask. keep_bits (optional, uint8 of ceil(n / 64) * 8 bytes): bit i % 8 of byte i / 8 is 1 */        \
  /* where m[i] != 0 (bits past n unspecified): backward reads them instead of a mask of x's size. */             \
  X(dropout, (const Tensor& x, const Tensor& out, const Tensor& keep_bits, double p, uint64_t seed), Named)       \
  /* out[i] = g[i] * m[i] for the m whose keep_bits dropout wrote (g, out contiguous, one dtype). */              \
  X(dropout_backward, (const Tensor& g, const Tensor& keep_bits, const Tensor& out, double p), Named)

#define MT_BACKEND_FIELD(name, params, range) void(*name) params;
#define MT_BACKEND_DECLARATION(name, params, range) void name params;
// `.name = name,`: inside a device's namespace, the table entry pointing at that device's kernel.
#define MT_BACKEND_TABLE_ENTRY(name, params, range) .name = name,

struct Backend {
  MT_BACKEND_KERNELS(MT_BACKEND_FIELD)
};

// The kernels for a device; throws mantissa::Error when the device is not available.
const Backend& backend_for(Device d);
const Backend& cpu_backend();

}  // namespace mantissa
