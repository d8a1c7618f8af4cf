// The device kernels behind the nn ops (convolution, pooling, normalization,
// cross-entropy): a second dispatch table beside core/backend.h, so nn/ never calls
// a device kernel directly. The CPU row lives in core/cpu/nn_*.cpp; a device backend
// (cuda/) registers its row with its DeviceBackend (core/backend_registry.h).
//
// Contracts common to every entry: all tensors are contiguous and on one device;
// `x`, `w`, `y` and gradients of them share one floating dtype T; "acc" tensors
// (statistics, per-row losses, normalization parameters) are float32 for
// T in {fp16, bf16, fp32} and float64 for T = fp64. Reduced floats are computed in
// fp32 and rounded once. Entries that take optional outputs skip undefined ones.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/nn_math.h"
#include "core/tensor.h"

namespace mantissa {

// A 2-D convolution or unfold: input [N, C, H, W], weight [Cout, C / groups, KH, KW],
// output [N, Cout, OH, OW] (unfold: columns [N, C * KH * KW, OH * OW]).
struct Conv2dGeometry {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t Cout = 0, groups = 1;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, PH = 0, PW = 0, DH = 1, DW = 1;
  int64_t OH = 0, OW = 0;
};

// A 2-D pooling window: input [N, C, H, W], output [N, C, OH, OW].
struct Pool2dGeometry {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, PH = 0, PW = 0, DH = 1, DW = 1;
  bool count_include_pad = true;  // avg: divide by the window size including padding
  int64_t divisor_override = 0;   // avg: when > 0, divide by this instead
};

// An interpolation (nn::functional::interpolate, nn::Upsample): input [N, C, IH, IW], output
// [N, C, OH, OW]; a 1-D input [N, C, L] is IH = OH = 1 with one_d set (only W interpolated).
// Source coordinates per dim are torch 1.13's (upsample_nearest_source, upsample_linear_tap).
struct UpsampleGeometry {
  int64_t N = 0, C = 0, IH = 1, IW = 1, OH = 1, OW = 1;
  bool linear = false;              // false: nearest; true: linear (1-D) / bilinear (2-D)
  bool align_corners = false;       // linear only
  bool one_d = false;               // [N, C, L]
  double scale_h = 0, scale_w = 0;  // the caller's scale_factor per dim; 0: none (sizes give the scale)
};

// Nearest: the source of output index d along a dim of `in` -> `out` elements, as torch's CPU
// kernel: floor(d * scale) in float, scale = 1 / scale_factor when one was given, else in / out.
MT_HOST_DEVICE int64_t upsample_nearest_source(int64_t d, int64_t in, int64_t out, double scale_factor) {
  const float scale = scale_factor > 0 ? float(1.0 / scale_factor) : float(in) / float(out);
  const int64_t s = int64_t(std::floor(float(d) * scale));
  return s < in - 1 ? s : in - 1;
}

// Linear: output index d reads in[i0] * l0 + in[i1] * l1. A dim whose size does not change is
// the identity (torch skips it, even with a scale_factor != 1): i0 = i1 = d, l0 = 1, l1 = 0,
// `identity` set. Coordinates in A (float for float/half inputs, double for double), as torch.
template <typename A>
struct UpsampleTap {
  int64_t i0, i1;
  A l0, l1;
};
template <typename A>
MT_HOST_DEVICE UpsampleTap<A> upsample_linear_tap(int64_t d, int64_t in, int64_t out, bool align_corners,
                                                  double scale_factor) {
  if (in == out) return {d, d, A(1), A(0)};
  A scale;
  if (align_corners)
    scale = out > 1 ? A(in - 1) / A(out - 1) : A(0);
  else
    scale = scale_factor > 0 ? A(1.0 / scale_factor) : A(in) / A(out);
  A src = align_corners ? scale * A(d) : scale * (A(d) + A(0.5)) - A(0.5);
  if (src < A(0)) src = A(0);
  const int64_t i0 = int64_t(src);
  const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
  const A l1 = src - A(i0);
  return {i0, i1, A(1) - l1, l1};
}

// Scaled dot-product attention over B x H independent problems (batch, head), each
//   out[i] = sum_j dropout(P)[i, j] v[j],  P = softmax_j(scale * q[i] . k[j] + mask[i, j]),
// with q [B*H, L, E], k [B*H, S, E], v [B*H, S, Ev] and out [B*H, L, Ev] (all T), and the
// per-row log-sum-exp of the masked, scaled scores in lse (acc [B*H, L]) so that backward
// can recompute P instead of storing it. A row with every key masked gets P = 0 (out 0).
struct AttentionGeometry {
  int64_t B = 0, H = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
  // Key j is visible to query i only when j <= i (the top-left triangle; no mask tensor).
  bool causal = false;
  // Dropout on P: element (g, i, j) is kept when math::DropoutKeep{seed, 1 - p}((g * L + i) * S + j)
  // and then scaled by 1 / (1 - p); the same draw on every device and in backward.
  double dropout_p = 0;
  uint64_t dropout_seed = 0;
  // The additive mask (acc dtype, read through raw_data()) at element strides for (b, h, i, j);
  // 0 strides broadcast. Ignored when the mask tensor is undefined.
  int64_t mask_strides[4] = {0, 0, 0, 0};
};

// The nn kernel list: X(name, (parameters)), one line per kernel, from which the NnKernels
// fields, each device's declarations (MT_NN_DECLARATION inside its namespace) and tables
// (MT_NN_TABLE_ENTRY) and the profiled twin (core/nn_kernels.cpp) are generated. Adding a kernel:
// a line here, its CPU and CUDA kernels, and the op that calls it (docs/adding-an-op.md).
#define MT_NN_KERNELS(X)                                                                                              \
  /* y = conv(x, w) + bias; bias [Cout] or undefined. */                                                              \
  X(conv2d_forward, (const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g)) \
  /* Gradients of conv2d given gy [N, Cout, OH, OW]: gx [N, C, H, W], gw (w's shape), gb [Cout]; each may be */       \
  /* undefined (not wanted). */                                                                                       \
  X(conv2d_backward, (const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,         \
                      const Tensor& gb, const Conv2dGeometry& g))                                                     \
  /* cols [N, C*KH*KW, OH*OW] = the input patch under each output position (0 in the padding). */                     \
  X(im2col, (const Tensor& x, const Tensor& cols, const Conv2dGeometry& g))                                           \
  /* x (overwritten) = the adjoint of im2col: every column value summed into its input pixel. */                      \
  X(col2im, (const Tensor& cols, const Tensor& x, const Conv2dGeometry& g))                                           \
  /* y = max over each window (padding never wins, NaN propagates); indices: int64 [N, C, OH, OW], the flat */        \
  /* position h * W + w of the maximum within its input plane; backward: gx (overwritten) = gy at indices. */         \
  X(max_pool2d, (const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g))                   \
  X(max_pool2d_backward, (const Tensor& gy, const Tensor& indices, const Tensor& gx, const Pool2dGeometry& g))        \
  /* y = A x (window means), and its adjoint gx = A^T gy (gx overwritten). */                                         \
  X(avg_pool2d, (const Tensor& x, const Tensor& y, const Pool2dGeometry& g))                                          \
  X(avg_pool2d_backward, (const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g))                               \
  /* Adaptive windows: rows [floor(i*H/OH), ceil((i+1)*H/OH)), likewise columns. */                                   \
  X(adaptive_avg_pool2d, (const Tensor& x, const Tensor& y, const Pool2dGeometry& g))                                 \
  X(adaptive_avg_pool2d_backward, (const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g))                      \
  /* Layer norm over the rows of x [M, n]: y = (x - mean) * rstd * w + b, with acc mean/rstd [M] written; */          \
  /* w, b: acc [n] or undefined. Backward: gx [M, n] (T), gw and gb (acc [n]); each optional. */                      \
  X(layer_norm, (const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y, const Tensor& mean,  \
                 const Tensor& rstd))                                                                                 \
  X(layer_norm_backward, (const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w, \
                          const Tensor& gx, const Tensor& gw, const Tensor& gb))                                      \
  /* Group norm of x [N, C, S] in G groups of C / G channels (each a run of C / G * S elements): */                   \
  /* y = (x - mean) * rstd * w[c] + b[c], with acc mean/rstd [N, G] written; w, b: acc [C] or undefined. */           \
  /* Backward: gx [N, C, S] (T), gw and gb (acc [C]); each optional. */                                               \
  X(group_norm, (const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, double eps, const Tensor& y,      \
                 const Tensor& mean, const Tensor& rstd))                                                             \
  X(group_norm_backward, (const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w, \
                          int64_t groups, const Tensor& gx, const Tensor& gw, const Tensor& gb))                      \
  /* Batch norm on x viewed as [N, C, S]: per-channel mean and biased variance (acc [C]). */                          \
  X(batch_norm_stats, (const Tensor& x, const Tensor& mean, const Tensor& var))                                       \
  /* y = x * scale[c] + shift[c] (scale, shift: acc [C]). */                                                          \
  X(batch_norm_apply, (const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y))                   \
  /* With w (acc [C], ones when not affine): gb = sum gy, gw = sum gy * xhat, and */                                  \
  /* gx = w * invstd * (gy - [training] (mean(gy) + xhat * mean(gy * xhat))); each output optional. */                \
  X(batch_norm_backward, (const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd,                \
                          const Tensor& w, bool training, const Tensor& gx, const Tensor& gw, const Tensor& gb))      \
  /* Fused log-softmax + negative log-likelihood on logits [M, C] with int64 targets [M]: */                          \
  /* (logits: contiguous rows, or an [N, C, d...] input as the class-strided view [N, S, C], M = N S) */              \
  /* loss[r] (acc) = (1 - s) * w[t] * -logp[t] + s / C * sum_c w[c] * -logp[c], 0 where t == ignore_index; */         \
  /* lse[r] (acc) = logsumexp of the row; weight: acc [C] or undefined (all ones). Targets are range-checked by */    \
  /* the op (launch::check_index_range); one outside [0, C) gets loss 0 and gradient 0, nothing read outside. */      \
  X(cross_entropy, (const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,           \
                    double label_smoothing, const Tensor& loss, const Tensor& lse))                                   \
  /* glogits (the logits' shape and layout) = grad[r] * d loss[r] / d logits[r, :], grad: acc [M]. */                 \
  X(cross_entropy_backward, (const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& weight,    \
                             const Tensor& lse, int64_t ignore_index, double label_smoothing, const Tensor& glogits)) \
  /* Attention (see AttentionGeometry); mask: acc or undefined. Backward: gq, gk, gv (q's, k's, v's shapes, T) */     \
  /* given gout [B*H, L, Ev] and the forward's out and lse; each optional; P recomputed tile by tile from lse. */     \
  X(attention_forward, (const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,     \
                        const Tensor& lse, const AttentionGeometry& g))                                               \
  X(attention_backward,                                                                                               \
    (const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,    \
     const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv, const AttentionGeometry& g))            \
  /* Softmax backward along n of y, gy, gx [outer, n, inner] (y, gy: the forward's output and its gradient, one */    \
  /* dtype, or the pairs of softmax_backward_takes; gx: the input's floating dtype): gx = y * (gy - sum_n gy * y), */ \
  /* log: gx = gy - exp(y) * sum_n gy. */                                                                             \
  X(softmax_backward, (const Tensor& y, const Tensor& gy, const Tensor& gx, bool log))                                \
  /* out [G, R, C] = in with the elements outside a triangle zeroed: upper keeps column - row >= diagonal */          \
  /* (triu), lower keeps column - row <= diagonal (tril). Any dtype. */                                               \
  X(triangle, (const Tensor& in, const Tensor& out, int64_t diagonal, bool upper))                                    \
  /* Embedding backward: gweight [num, D] (T, overwritten) row r = the sum of the rows n of grad [N, D] (T) with */   \
  /* index[n] == r (index int64 [N]), in acc in increasing n, rounded once (deterministic); 0 for rows without */     \
  /* tokens, for row padding_idx (when >= 0) and for out-of-range index values (skipped). */                          \
  X(embedding_backward, (const Tensor& grad, const Tensor& index, const Tensor& gweight, int64_t padding_idx))        \
  /* Fused LSTM cell (core/rnn_cell_math.h), gate order i, f, g, o: gates_x, gates_h [N, 4H] the input and */         \
  /* hidden GEMMs' pre-activations (summed here), c [N, H]; writes h_out, c_out [N, H] and act [N, 4H] (the */        \
  /* activated gates, for backward). All contiguous, one floating dtype T, math in acc. */                            \
  X(lstm_cell, (const Tensor& gates_x, const Tensor& gates_h, const Tensor& c, const Tensor& h_out,                   \
                const Tensor& c_out, const Tensor& act))                                                              \
  /* gh, gc [N, H] the gradients of h_out and c_out; writes ggates [N, 4H] (of both pre-activation halves) and */     \
  /* gc_prev [N, H] (of c). */                                                                                        \
  X(lstm_cell_backward, (const Tensor& gh, const Tensor& gc, const Tensor& c, const Tensor& c_out, const Tensor& act, \
                         const Tensor& ggates, const Tensor& gc_prev))                                                \
  /* Fused GRU cell, gate order r, z, n: gates_x, gates_h [N, 3H] (gates_h with b_hh: n = tanh(x_n + r h_n)), */      \
  /* h [N, H]; writes h_out [N, H] and ws [N, 4H] (r, z, n, h_n for backward). Contiguous, one dtype T. */            \
  X(gru_cell, (const Tensor& gates_x, const Tensor& gates_h, const Tensor& h, const Tensor& h_out, const Tensor& ws)) \
  /* gh [N, H] the gradient of h_out; writes ggates_x, ggates_h [N, 3H] and gh_prev [N, H] (h's direct part). */      \
  X(gru_cell_backward, (const Tensor& gh, const Tensor& h, const Tensor& ws, const Tensor& ggates_x,                  \
                        const Tensor& ggates_h, const Tensor& gh_prev))                                               \
  /* Interpolation (UpsampleGeometry): y [N, C, OH, OW] from x [N, C, IH, IW] (both T), computed in acc; nearest */   \
  /* copies x at the source indices, linear blends the two taps per dim (rows first, then between rows). */           \
  /* Backward: gx [N, C, IH, IW] (overwritten) = the adjoint: every gy element times its weights accumulated */       \
  /* into its source pixels (in acc, rounded once). */                                                                \
  X(upsample, (const Tensor& x, const Tensor& y, const UpsampleGeometry& g))                                          \
  X(upsample_backward, (const Tensor& gy, const Tensor& gx, const UpsampleGeometry& g))

#define MT_NN_FIELD(name, params) void(*name) params;
#define MT_NN_DECLARATION(name, params) void name params;
// `.name = name,`: inside a device's namespace, the table entry pointing at that device's kernel.
#define MT_NN_TABLE_ENTRY(name, params) .name = name,

struct NnKernels {
  MT_NN_KERNELS(MT_NN_FIELD)
};

// The CPU row (core/cpu/nn_*.cpp).
namespace cpu {
MT_NN_KERNELS(MT_NN_DECLARATION)
}  // namespace cpu

// The window scan of a max pool (core/nn_math.h) with g's geometry, for every device's kernel.
MT_HOST_DEVICE math::MaxPoolWindow max_pool_window(const Pool2dGeometry& g) {
  return {g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.DH, g.DW};
}

// The [N, C, S] view of a batch-norm input (S: the product of the spatial dims), shared by
// every device's batch-norm kernels.
inline void batch_norm_dims(const Tensor& x, int64_t& N, int64_t& C, int64_t& S) {
  N = x.size(0);
  C = x.size(1);
  S = N * C != 0 ? x.numel() / (N * C) : 0;
}

// The nn kernels for `device`; throws mantissa::Error naming `op` when none are registered.
const NnKernels& nn_kernels_for(Device device, const char* op);

// Whether softmax_backward on `device` takes a gradient of dtype gy with an output y as they are:
// the same dtype, or on the CPU fp32 y with a bf16 gradient (autocast's cast, read in registers).
inline bool softmax_backward_takes(Device device, DType y, DType gy) {
  return gy == y || (device.is_cpu() && y == DType::Float32 && gy == DType::BFloat16);
}

// Output length of a convolution or pooling window along one dim (floor, or ceil as
// PyTorch's ceil_mode: a last window must start inside the input or left padding).
int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                           bool ceil_mode = false);

}  // namespace mantissa
