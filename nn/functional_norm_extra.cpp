// group_norm and instance_norm (the group_norm kernels; their backward composed of
// differentiable ops under create_graph), rms_norm, composed of differentiable ops (so double
// backward works), and channel dropout (dropout1d/2d: one draw per (sample, channel), broadcast
// over the positions). The norms run in fp32 under autocast, as in
// PyTorch's CUDA list (group_norm; the others are composed of ops it keeps in fp32).
#include "nn/functional_detail.h"

MT_DECLARE_CAST_POLICY(group_norm, Fp32);
MT_DECLARE_CAST_POLICY(rms_norm, Fp32);
MT_DECLARE_CAST_POLICY(instance_norm, Fp32);

namespace mantissa::nn {

using namespace detail;

namespace {

void check_channels(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  MT_CHECK(t.dim() == 1 && t.size(0) == x.size(1), op, what, " must have shape [", x.size(1), "] (the channels of ",
           x.shape_str(), "), got ", t.shape_str());
}

// Group norm of x [N, C, ...] in G groups with the per-channel affine, through the group_norm
// kernels (statistics, normalization and affine in one pass each way; as a layer norm over
// [N G, C / G * S] followed by the affine's multiply and add it took 1.6x PyTorch's time).
// Under create_graph the backward is composed of differentiable ops, recomputing the statistics.
Tensor grouped_norm(const char* op, const Tensor& x, int64_t G, const Tensor& w, const Tensor& b, double eps) {
  if (x.numel() == 0) return empty_norm_output(x, w, b, true);
  launch::check_same_device(op, {x, w, b});
  const DType A = acc_type(x.dtype());
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
  const Shape ncs{N, C, S};
  Tensor xc = launch::contiguous(x);
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mu = make_tensor({N, G}, A, x.device()), rstd = make_tensor({N, G}, A, x.device());
  kernel(x, op, &NnKernels::group_norm)(make_view(xc, ncs, {C * S, S, 1}, xc.offset()), plain(w, A), plain(b, A), G,
                                        eps, make_view(y, ncs, {C * S, S, 1}, 0), mu, rstd);
  if (needs_grad({x, w, b})) {
    record(op, {x, w, b}, y,
           [sx = SavedTensor(x), sw = SavedTensor(w),
            wt = w.defined()   ? w.dtype()
                 : b.defined() ? b.dtype()
                               : A,
            mu, rstd, G, eps, N, C, S, A, op](const Tensor& gy, auto& need) {
             Tensor x = sx.unpack(), w = sw.unpack();
             if (GradMode::is_enabled()) {
               // rstd (g - mean(g) - xhat mean(g xhat)) over each group, g = gy w.
               Tensor x3 = x.reshape({N, G, -1});
               Tensor xm = x3 - mean(x3, {2}, true);
               Tensor r = rsqrt(mean(xm * xm, {2}, true) + eps);
               Tensor xhat = (xm * r).reshape({N, C, S});
               Tensor g3 = gy.to(x.dtype()).reshape({N, C, S});
               Tensor g = w.defined() ? g3 * w.to(x.dtype()).reshape({1, C, 1}) : g3;
               Tensor gg = g.reshape({N, G, -1}), xg = xhat.reshape({N, G, -1});
               Grads gr{need[0] ? (r * (gg - mean(gg, {2}, true) - xg * mean(gg * xg, {2}, true))).reshape(x.sizes())
                                : Tensor(),
                        need[1] ? sum(g3 * xhat, {0, 2}).to(wt) : Tensor(),
                        need[2] ? sum(g3, {0, 2}).to(wt) : Tensor()};
               return gr;
             }
             Tensor xc = launch::contiguous(x);
             const Shape ncs{N, C, S};
             Tensor gx = need[0] ? make_tensor(x.sizes(), x.dtype(), x.device()) : Tensor();
             Tensor gw = need[1] ? make_tensor({C}, A, x.device()) : Tensor();
             Tensor gb = need[2] ? make_tensor({C}, A, x.device()) : Tensor();
             Tensor gyc = launch::cast(gy, x.dtype());  // contiguous
             kernel(x, op, &NnKernels::group_norm_backward)(
                 make_view(gyc, ncs, {C * S, S, 1}, gyc.offset()), make_view(xc, ncs, {C * S, S, 1}, xc.offset()), mu,
                 rstd, plain(w, A), G, gx.defined() ? make_view(gx, ncs, {C * S, S, 1}, 0) : gx, gw, gb);
             if (gw.defined()) gw = gw.to(wt);
             if (gb.defined()) gb = gb.to(wt);
             return Grads{gx, gw, gb};
           });
  }
  return y;
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
  return grouped_norm(op, x, num_groups, w, b, eps);
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
  return grouped_norm(op, x, x.size(1), w, b, eps);  // a group per channel
}

Tensor dropout1d(const Tensor& x, double p, bool training) { return channel_dropout(x, p, training, 3, "dropout1d"); }
Tensor dropout2d(const Tensor& x, double p, bool training) { return channel_dropout(x, p, training, 4, "dropout2d"); }

}  // namespace functional
}  // namespace mantissa::nn
