// Per-element and per-window math of the nn kernels, written once for the CPU
// kernels (core/cpu/nn_*.cpp) and the CUDA ones (cuda/nn_*.cu, docs/design.md §3): window bounds
// of convolution and pooling, and the element formulas of normalization and cross-entropy.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "core/elementwise_math.h"

namespace mantissa::math {

// exp of a shifted logit (x - max, x - logsumexp, a log-probability): x <= 0 but for rounding,
// so exp_fast's overflow side goes: one clamp, one scale by 2^n (n >= -126 is a normal float),
// one select. Equal to exp_fast wherever exp_fast's result is a normal float; valid for
// x <= 88 and NaN (kept). Softmax and cross-entropy spend most of their time here.
MT_HOST_DEVICE float exp_shifted(float x) {
  const float xc = x < -87.0f ? -87.0f : x;  // NaN stays NaN (the compare is false)
  const ExpParts e = exp_parts(xc);
  return x < -87.0f ? 0.0f : e.y * pow2_float(e.n);
}
MT_HOST_DEVICE float exp_shifted_acc(float x) { return exp_shifted(x); }
MT_HOST_DEVICE double exp_shifted_acc(double x) { return std::exp(x); }

// The input index that output position o reads at kernel tap k (convolution, unfold, pooling).
MT_HOST_DEVICE int64_t window_input_index(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
  return o * stride - pad + k * dilation;
}

// A max-pooling window along one dim: the taps begin, begin + dilation, ... below end that lie
// inside the input (padding never takes part).
struct DilatedRange {
  int64_t begin, end;
};
MT_HOST_DEVICE DilatedRange max_window(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                       int64_t dilation) {
  const int64_t first = o * stride - pad;
  const int64_t begin = first >= 0 ? first : first + (-first + dilation - 1) / dilation * dilation;
  const int64_t last = first + (kernel - 1) * dilation + 1;
  return {begin, last < in ? last : in};
}

// Max pooling's running comparison: a larger value or a NaN takes over (NaN propagates).
template <typename T>
MT_HOST_DEVICE bool max_pool_takes(T v, T best) {
  return v > best || v != v;
}

// The scan of one max-pooling window over an [H, W] plane for output (oh, ow): the maximum (in A)
// and its flat position h * W + w. As PyTorch: the first real element starts, the first maximum
// in window order wins, NaN propagates. load(at) reads the plane's element `at` as A. The CPU's
// general case and the CUDA kernel both scan with it.
struct MaxPoolWindow {
  int64_t H, W, KH, KW, SH, SW, PH, PW, DH, DW;
  template <typename A, typename Load>
  MT_HOST_DEVICE void scan(int64_t oh, int64_t ow, Load load, A& best_value, int64_t& best_at) const {
    const DilatedRange rh = max_window(oh, H, KH, SH, PH, DH);
    const DilatedRange rw = max_window(ow, W, KW, SW, PW, DW);
    best_at = rh.begin * W + rw.begin;
    best_value = -A(INFINITY);
    for (int64_t h = rh.begin; h < rh.end; h += DH)
      for (int64_t w = rw.begin; w < rw.end; w += DW) {
        const A v = load(h * W + w);
        if (max_pool_takes(v, best_value)) {
          best_value = v;
          best_at = h * W + w;
        }
      }
  }
};

// Adaptive pooling: output cell o of `out` covers input [start, end) of `in`.
MT_HOST_DEVICE int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
MT_HOST_DEVICE int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }
// The inverse: the output cells whose windows cover input i are [first, last] (a gather backward).
MT_HOST_DEVICE int64_t adaptive_first_output(int64_t i, int64_t in, int64_t out) { return (i * out) / in; }
MT_HOST_DEVICE int64_t adaptive_last_output(int64_t i, int64_t in, int64_t out) {
  const int64_t last = ((i + 1) * out + in - 1) / in - 1;
  return last < out - 1 ? last : out - 1;
}

// The output positions of an undilated window (kernel, stride, pad) that can cover input i:
// [first, last], clipped to [0, out); callers still check the clipped window itself.
MT_HOST_DEVICE int64_t window_first_output(int64_t i, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t lo = i + pad - kernel + 1;  // the window starting at o * stride - pad must reach i
  return lo <= 0 ? 0 : (lo + stride - 1) / stride;
}
MT_HOST_DEVICE int64_t window_last_output(int64_t i, int64_t stride, int64_t pad, int64_t out) {
  const int64_t last = (i + pad) / stride;
  return last < out - 1 ? last : out - 1;
}

// An average-pooling window along both dims: the clipped input range and the divisor
// (PyTorch's rules: the padded window size, or the number of real elements, or an override).
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // 0 when the window holds no input element
};
MT_HOST_DEVICE AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t SH,
                                    int64_t SW, int64_t PH, int64_t PW, bool count_include_pad,
                                    int64_t divisor_override) {
  int64_t h0 = oh * SH - PH, w0 = ow * SW - PW;
  int64_t h1 = h0 + KH < H + PH ? h0 + KH : H + PH;
  int64_t w1 = w0 + KW < W + PW ? w0 + KW : W + PW;
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < H ? h1 : H;
  w1 = w1 < W ? w1 : W;
  AvgWindow r{h0, h1, w0, w1, 0};
  if (h0 >= h1 || w0 >= w1) return r;
  r.divisor = divisor_override > 0 ? divisor_override : (count_include_pad ? padded : (h1 - h0) * (w1 - w0));
  return r;
}

// The shift that keeps exp(x - shift) finite over a row: its max, or 0 for a row of -inf
// (so that a fully masked row gives exp(-inf) = 0, never inf - inf).
template <typename T>
MT_HOST_DEVICE T softmax_shift(T row_max) {
  return row_max == -T(INFINITY) ? T(0) : row_max;
}

// Cross-entropy of one row from its logsumexp z: (1 - s) * w_t * (z - x_t) + s / C * smooth_sum,
// where smooth_sum = sum_c w_c * (z - x_c) (label smoothing s; only summed when s > 0).
template <typename T>
MT_HOST_DEVICE T cross_entropy_loss(T z, T x_t, T w_t, T s, T num_classes, T smooth_sum) {
  const T l = (T(1) - s) * w_t * (z - x_t);
  return s > T(0) ? l + s / num_classes * smooth_sum : l;
}

// The per-row coefficients of cross_entropy_grad for target weight w_t and class-weight sum wsum.
template <typename T>
struct CrossEntropyGradCoefs {
  T target_term;  // (1 - s) * w_t
  T a;            // target_term + s / C * wsum
  T smooth;       // s / C (times w_c for class c)
};
template <typename T>
MT_HOST_DEVICE CrossEntropyGradCoefs<T> cross_entropy_grad_coefs(T w_t, T s, T num_classes, T wsum) {
  const T target_term = (T(1) - s) * w_t;
  return {target_term, target_term + s / num_classes * wsum, s / num_classes};
}

// d loss / d logit c of label-smoothed, class-weighted cross-entropy, for a row whose
// softmax probability at c is p:  p * a - (1 - s) * w_t * [c == t] - s / C * w_c,
// with a = (1 - s) * w_t + s / C * sum(w).
template <typename T>
MT_HOST_DEVICE T cross_entropy_grad(T p, bool is_target, T a, T target_term, T smooth_wc) {
  return p * a - (is_target ? target_term : T(0)) - smooth_wc;
}

// Normalization: 1 / sqrt(var + eps), and x normalized by its group's statistics.
template <typename T>
MT_HOST_DEVICE T inv_std(T var, T eps) {
  return T(1) / std::sqrt(var + eps);
}
template <typename T>
MT_HOST_DEVICE T normalize(T x, T mean, T rstd) {
  return (x - mean) * rstd;
}

// Normalization backward per element: rstd * (g - mean_g - xhat * mean_gxhat), where the means
// run over the normalized group (training batch norm, layer norm).
template <typename T>
MT_HOST_DEVICE T norm_backward(T g, T xhat, T rstd, T mean_g, T mean_gxhat) {
  return rstd * (g - mean_g - xhat * mean_gxhat);
}

}  // namespace mantissa::math
