// nn::functional (alias nn::F): the differentiable ops behind the layers, usable on
// their own. Each op is defined once (nn/functional*.cpp): autocast per its policy
// name, shape/dtype checks that throw mantissa::Error, the kernel, and its backward.
//
//   namespace F = mt::nn::functional;
//   mt::Tensor h = F::conv2d(x, w, b, {.stride = 2, .padding = 1});
//   h = F::max_pool2d(F::relu(h), 2);
//   mt::Tensor loss = F::cross_entropy(F::linear(h.flatten(1), w2, b2), labels, {.label_smoothing = 0.1});
//
// Under mt::amp::Autocast, linear and conv2d run in fp16/bf16 (fp32 accumulation),
// while the norms and the losses run in fp32 and return fp32.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/tensor.h"

namespace mantissa::nn {

// A (height, width) pair for 2-D window parameters; a single number means both.
//   F::conv2d(x, w, {}, {.stride = 2, .padding = {1, 0}});
struct Size2 {
  int64_t h = 0, w = 0;
  Size2() = default;
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit on purpose, `.stride = 2`
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Size2& s);  // "(3, 3)"

// How a loss combines per-element values.
enum class Reduction { None, Mean, Sum };
const char* reduction_name(Reduction r);

namespace functional {

// --- activations and shape (the ops themselves live in autograd/ops.h) ---
using mantissa::gelu;
using mantissa::log_softmax;
using mantissa::relu;
using mantissa::scaled_dot_product_attention;
using mantissa::sigmoid;
using mantissa::silu;
using mantissa::softmax;
using mantissa::tanh;
// x.flatten(start_dim, end_dim)
Tensor flatten(const Tensor& x, int64_t start_dim = 1, int64_t end_dim = -1);

// --- linear and embedding ---
// y = x W^T + b; x [..., in], weight [out, in], bias [out] or undefined -> [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// Rows of weight [num, dim] picked by integer `indices` of any shape -> [..., dim]. The row
// padding_idx (negative counts from the end) gets no gradient. The one embedding op, in
// PyTorch's argument order (F.embedding(input, weight, padding_idx)).
Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) (training only;
// the identity otherwise). Draws from the default generator (mt::manual_seed).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// Channel dropout: whole channels zeroed with probability p (the rest scaled by 1 / (1 - p)),
// one draw per (sample, channel). dropout1d: x [N, C, L] or [C, L]; dropout2d: x [N, C, H, W]
// or [C, H, W] (a 3-D input is one unbatched image, PyTorch's documented meaning).
Tensor dropout1d(const Tensor& x, double p = 0.5, bool training = true);
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

// --- convolution ---
struct Conv2dFuncOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
};
// x [N, C, H, W] (or unbatched [C, H, W]), weight [Cout, C / groups, KH, KW], bias [Cout] or
// undefined -> [N, Cout, OH, OW]. im2col + GEMM on the CPU.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Conv2dFuncOptions& opts = {});

struct Conv1dFuncOptions {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
};
// x [N, C, L] (or [C, L]), weight [Cout, C / groups, K] -> [N, Cout, OL]: conv2d with height 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Conv1dFuncOptions& opts = {});

struct ConvTranspose2dFuncOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;  // added to one side of the output; < stride or < dilation
  Size2 dilation = 1;
  int64_t groups = 1;
};
// The adjoint of conv2d (a "deconvolution"): x [N, C, H, W] (or [C, H, W]), weight
// [C, Cout / groups, KH, KW], bias [Cout] -> [N, Cout, OH, OW] with
// OH = (H - 1) * stride - 2 * padding + dilation * (KH - 1) + output_padding + 1. Computed as
// PyTorch does: columns through the weight's transpose, summed back by fold. Lower precision
// under autocast, as conv2d.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const ConvTranspose2dFuncOptions& opts = {});
struct ConvTranspose1dFuncOptions {
  int64_t stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
};
// x [N, C, L] (or [C, L]), weight [C, Cout / groups, K]: conv_transpose2d with height 1.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const ConvTranspose1dFuncOptions& opts = {});

struct UnfoldOptions {
  Size2 dilation = 1;
  Size2 padding = 0;
  Size2 stride = 1;
};
// Sliding patches: x [N, C, H, W] -> [N, C * KH * KW, L] (torch.nn.functional.unfold).
Tensor unfold(const Tensor& x, Size2 kernel_size, const UnfoldOptions& opts = {});
// The adjoint of unfold, summing overlapping patches: [N, C * KH * KW, L] -> [N, C, H, W].
Tensor fold(const Tensor& cols, Size2 output_size, Size2 kernel_size, const UnfoldOptions& opts = {});

// --- pooling (x [N, C, H, W] or [C, H, W]) ---
struct MaxPool2dFuncOptions {
  Size2 stride = 0;  // 0: the kernel size
  Size2 padding = 0;
  Size2 dilation = 1;
  bool ceil_mode = false;
};
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, const MaxPool2dFuncOptions& opts = {});
// The maxima and their flat positions h * W + w within each input plane.
ValuesIndices max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, const MaxPool2dFuncOptions& opts = {});

struct AvgPool2dFuncOptions {
  Size2 stride = 0;  // 0: the kernel size
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  int64_t divisor_override = 0;  // > 0: divide every window sum by this
};
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, const AvgPool2dFuncOptions& opts = {});
// Mean over adaptive windows giving exactly `output_size`.
Tensor adaptive_avg_pool2d(const Tensor& x, Size2 output_size);

// 1-D pools over x [N, C, L] or [C, L], through the 2-D ones with height 1.
struct MaxPool1dFuncOptions {
  int64_t stride = 0;  // 0: the kernel size
  int64_t padding = 0, dilation = 1;
  bool ceil_mode = false;
};
Tensor max_pool1d(const Tensor& x, int64_t kernel_size, const MaxPool1dFuncOptions& opts = {});
struct AvgPool1dFuncOptions {
  int64_t stride = 0;  // 0: the kernel size
  int64_t padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, const AvgPool1dFuncOptions& opts = {});
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);

// --- normalization ---
// x [N, C, ...]. Training: normalizes with the batch statistics and, when the running
// tensors are given, updates them in place (running = (1 - momentum) * running + momentum
// * batch, with the unbiased batch variance). Eval: normalizes with the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);
// Normalizes over the trailing dims `normalized_shape`; weight and bias have that shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// x [N, C, ...]: each sample's channels in num_groups groups (C % num_groups == 0), each group
// normalized over its channels and positions (biased variance); weight, bias [C].
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// x / sqrt(mean(x^2 over the trailing dims normalized_shape) + eps) * weight (normalized_shape);
// eps defaults to the machine epsilon of x's dtype, as PyTorch's.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
// x [N, C, ...]: each (sample, channel) normalized over its positions; weight, bias [C]. No
// running statistics (PyTorch's default, track_running_stats = false).
Tensor instance_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

// --- losses (fp32 under autocast) ---
struct CrossEntropyOptions {
  Tensor weight{};  // [C] class weights, or undefined
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;
};
// input: logits [N, C] (or [C], or [N, C, d1, ...]); target: class indices [N] (or [], or
// [N, d1, ...]). Fused log-softmax + NLL. Mean divides by the summed weight of the
// non-ignored targets, as PyTorch.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& opts = {});

struct NllLossOptions {
  Tensor weight{};
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
// input: log-probabilities [N, C] (or [C], or [N, C, d1, ...]); target as in cross_entropy.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& opts = {});

// Squared error; input and target must have the same shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

struct BceWithLogitsOptions {
  Tensor weight{};      // broadcast to the input
  Tensor pos_weight{};  // weight of positive examples, broadcast along the last dim
  Reduction reduction = Reduction::Mean;
};
// Sigmoid + binary cross-entropy in one numerically stable op; target has the input's shape.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BceWithLogitsOptions& opts = {});

// ==== more losses (nn/functional_loss_extra.cpp; fp32 under autocast, as PyTorch's CUDA list) ====
// Input and target of the same floating shape, as mse_loss.
// |input - target|.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target; beta >= 0, 0 is l1).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta); delta > 0.
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean, double delta = 1.0);

struct BceOptions {
  Tensor weight{};  // broadcast to the input
  Reduction reduction = Reduction::Mean;
};
// -w (t log p + (1 - t) log(1 - p)) on probabilities p in [0, 1], each log clamped at -100 as
// PyTorch's. Unsafe under fp16 autocast (and under any autocast on a GPU, as PyTorch): it
// throws and names binary_cross_entropy_with_logits, which is safe; bf16 CPU autocast runs it in fp32.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BceOptions& opts = {});

enum class KlDivReduction { None, Mean, Sum, BatchMean };
struct KlDivOptions {
  KlDivReduction reduction = KlDivReduction::Mean;  // PyTorch's default; BatchMean divides by input.size(0)
  bool log_target = false;                          // target given as log-probabilities
};
// target (log target - input) pointwise, 0 where target is 0; input holds log-probabilities.
Tensor kl_div(const Tensor& input, const Tensor& target, const KlDivOptions& opts = {});

// max(0, -y (x1 - x2) + margin), y = +-1; the three broadcast together.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                           Reduction reduction = Reduction::Mean);
// 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1; x1, x2 [N, D] with
// y [N], or [D] with a 0-dim y.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin = 0.0,
                             Reduction reduction = Reduction::Mean);
// ==== end of more losses ====

// Resizes x (torch 1.13's F.interpolate, recompute_scale_factor = None): mode "nearest" on
// [N, C, L] or [N, C, H, W], "linear" on [N, C, L], "bilinear" on [N, C, H, W]. Exactly one of
// `size` (output spatial sizes) and `scale_factor` (output = floor(input * scale)) is given, one
// value for every spatial dim or one per dim. The source of output index d along a dim uses
// scale = 1 / scale_factor when one was given, else in / out: nearest reads floor(d * scale);
// linear blends the two neighbours of (d + 0.5) * scale - 0.5 (clamped at 0), or d * (in - 1) /
// (out - 1) with align_corners. A linear dim whose size does not change is copied. Computed in
// fp32 for fp16/bf16 inputs; autocast passes the input's dtype through (as torch's CUDA lists).
//   F::interpolate(x, {.size = {64, 64}, .mode = "bilinear", .align_corners = false});
//   F::interpolate(x, {.scale_factor = {2.0}});   // nearest, x2 in every spatial dim
struct InterpolateOptions {
  std::vector<int64_t> size = {};
  std::vector<double> scale_factor = {};
  std::string mode = "nearest";
  std::optional<bool> align_corners = std::nullopt;  // linear modes only (unset: false)
};
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace functional

namespace F = functional;

}  // namespace mantissa::nn
