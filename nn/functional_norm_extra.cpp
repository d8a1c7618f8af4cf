// group_norm, rms_norm and instance_norm, composed of differentiable ops (so they run on every
// device and double backward works), and channel dropout (dropout1d/2d: one draw per
// (sample, channel), broadcast over the positions). The norms run in fp32 under autocast, as in
// PyTorch's CUDA list (group_norm; the others are composed of ops it keeps in fp32).
#include "nn/functional_detail.h"

MT_DECLARE_CAST_POLICY(group_norm, Fp32);
MT_DECLARE_CAST_POLICY(rms_norm, Fp32);
MT_DECLARE_CAST_POLICY(instance_norm, Fp32);

namespace mantissa::nn {

using namespace detail;

namespace {

// [1, C, 1, ...] of rank r: a per-channel tensor broadcast over a [N, C, ...] input.
Tensor per_channel(const Tensor& t, int64_t rank) {
  Shape s(size_t(rank), 1);
  s[1] = t.numel();
  return t.reshape(s);
}

void check_channels(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  MT_CHECK(t.dim() == 1 && t.size(0) == x.size(1), op, what, " must have shape [", x.size(1), "] (the channels of ",
           x.shape_str(), "), got ", t.shape_str());
}

// (x - mean) / sqrt(var + eps) over the dims from `first` on (biased variance), in x's dtype: the
// layer_norm kernel without weight or bias over rows of their elements (one pass each way, where
// the composed mean, var and products took a dozen).
Tensor standardize(const Tensor& x, int64_t first, double eps) {
  int64_t n = 1;
  for (int64_t d = first; d < x.dim(); ++d) n *= x.size(d);
  return functional::layer_norm(x.reshape({x.numel() / n, n}), {n}, {}, {}, eps).reshape(x.sizes());
}

Tensor channel_dropout(const Tensor& x, double p, bool training, int64_t rank, const char* op) {
  MT_CHECK(p >= 0 && p <= 1, op, "probability must be in [0, 1], got ", p);
  MT_CHECK(x.dim() == rank || x.dim() == rank - 1, op, "expected an input of ", rank - 1, " or ", rank,
           " dims (unbatched or batched), got ", describe({x}));
  if (!training || p == 0) return x;
  MT_CHECK(is_floating(x.dtype()), op, "expected a floating-point input, got ", describe({x}));
  if (p == 1) return x * 0.0;
  // One kept-and-scaled draw per (sample, channel), broadcast over the positions.
  const int64_t lead = x.dim() == rank ? 2 : 1;
  Shape s = x.sizes();
  for (size_t d = size_t(lead); d < s.size(); ++d) s[d] = 1;
  return x * dropout_mask(s, p, {.dtype = x.dtype(), .device = x.device()});
}

}  // namespace

namespace functional {

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight0, const Tensor& bias0, double eps) {
  const char* op = "group_norm";
  MT_CHECK(input.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_group_norm, {input, weight0, bias0});
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  MT_CHECK(x.dim() >= 2, op, "expected an input [N, C, ...], got ", describe({x}));
  MT_CHECK(is_floating(x.dtype()), op, "expected a floating-point input, got ", describe({x}));
  MT_CHECK(num_groups > 0 && x.size(1) % num_groups == 0, op, "num_groups (", num_groups,
           ") must divide the channels (", x.size(1), ") of ", x.shape_str());
  check_channels(op, x, w, "weight");
  check_channels(op, x, b, "bias");
  const int64_t n = x.size(0);
  Tensor y = x;
  if (x.numel() > 0) {
    // [N, G, C / G * rest]: each group's statistics over its channels and positions.
    y = standardize(x.reshape({n, num_groups, -1}), 2, eps).reshape(x.sizes());
  }
  if (w.defined()) y = y * per_channel(w, x.dim());
  if (b.defined()) y = y + per_channel(b, x.dim());
  return y;
}

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight0, std::optional<double> eps) {
  const char* op = "rms_norm";
  MT_CHECK(input.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_rms_norm, {input, weight0});
  const Tensor &x = in[0], &w = in[1];
  MT_CHECK(is_floating(x.dtype()), op, "expected a floating-point input, got ", describe({x}));
  const int64_t k = int64_t(normalized_shape.size());
  MT_CHECK(k <= x.dim() && Shape(x.sizes().end() - k, x.sizes().end()) == normalized_shape, op, "normalized_shape ",
           shape_str(normalized_shape), " must be the trailing dims of ", x.shape_str());
  if (w.defined())
    MT_CHECK(w.sizes() == normalized_shape, op, "weight must have shape ", shape_str(normalized_shape), ", got ",
             w.shape_str());
  // PyTorch's default eps: the machine epsilon of the input's dtype.
  const double e = eps ? *eps : (x.dtype() == DType::Float64 ? 2.220446049250313e-16 : 1.1920928955078125e-07);
  Shape dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = k == 0 ? x * rsqrt(x * x + e) : x * rsqrt(mean(x * x, dims, true) + e);
  return w.defined() ? y * w : y;
}

Tensor instance_norm(const Tensor& input, const Tensor& weight0, const Tensor& bias0, double eps) {
  const char* op = "instance_norm";
  MT_CHECK(input.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_instance_norm, {input, weight0, bias0});
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  MT_CHECK(x.dim() >= 3, op, "expected an input [N, C, L] or [N, C, H, W, ...], got ", describe({x}));
  MT_CHECK(is_floating(x.dtype()), op, "expected a floating-point input, got ", describe({x}));
  check_channels(op, x, w, "weight");
  check_channels(op, x, b, "bias");
  Tensor y = x.numel() > 0 ? standardize(x, 2, eps) : x;
  if (w.defined()) y = y * per_channel(w, x.dim());
  if (b.defined()) y = y + per_channel(b, x.dim());
  return y;
}

Tensor dropout1d(const Tensor& x, double p, bool training) { return channel_dropout(x, p, training, 3, "dropout1d"); }
Tensor dropout2d(const Tensor& x, double p, bool training) { return channel_dropout(x, p, training, 4, "dropout2d"); }

}  // namespace functional
}  // namespace mantissa::nn
