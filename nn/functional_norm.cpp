// batch_norm and layer_norm: fused device kernels forward and backward, with the
// statistics kept in fp32 (fp64 for fp64 inputs). Under create_graph the backward is
// written with differentiable ops instead (recomputing the statistics from x), so
// second derivatives are exact.
#include "nn/functional_detail.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h). batch_norm passes through:
// it runs in its input's dtype (fp16/bf16 activations stay so, as in PyTorch), with fp32
// parameters, statistics and running estimates, which saves a cast on each side of it.
MT_DECLARE_CAST_POLICY(batch_norm, PassThrough);
MT_DECLARE_CAST_POLICY(layer_norm, Fp32);

namespace mantissa::nn {

using namespace detail;

namespace {

// A fresh contiguous copy of `t` in `dtype` (never an alias: saved state must not change).
Tensor fresh(const Tensor& t, DType dtype) {
  Tensor out = make_tensor(t.sizes(), dtype, t.device());
  backend_for(t.device()).copy(t, out);
  return out;
}

// All dims of an n-dim tensor except `keep`.
Shape dims_except(int64_t n, int64_t keep) {
  Shape d;
  for (int64_t i = 0; i < n; ++i)
    if (i != keep) d.push_back(i);
  return d;
}

// Normalization backward with differentiable ops: xhat and rstd are recomputed from x
// (training) or taken from the constant statistics (batch norm in eval mode).
Grads norm_backward_composite(const Tensor& gy, const Tensor& xhat, const Tensor& rstd, const Tensor& w_b,
                              const Shape& norm_dims, const Shape& param_dims, const Shape& param_shape, bool centred,
                              const std::vector<bool>& need) {
  Tensor g = w_b.defined() ? gy * w_b : gy;
  Tensor gx, gw, gb;
  if (need[0]) {
    gx = centred ? rstd * (g - mean(g, norm_dims, true) - xhat * mean(g * xhat, norm_dims, true)) : g * rstd;
  }
  if (need[1]) gw = sum(gy * xhat, param_dims).reshape(param_shape);
  if (need[2]) gb = sum(gy, param_dims).reshape(param_shape);
  return Grads{gx, gw, gb};
}

}  // namespace

namespace functional {

Tensor batch_norm(const Tensor& x0, const Tensor& running_mean, const Tensor& running_var, const Tensor& w0,
                  const Tensor& b0, bool training, double momentum, double eps) {
  auto in = amp::autocast_many(autocast_batch_norm, {x0, w0, b0});
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  MT_CHECK(x.defined() && x.dim() >= 2, "batch_norm", "expected an input [N, C, ...] of at least 2 dims, got ",
           describe({x}));
  MT_CHECK(is_floating(x.dtype()), "batch_norm", "expected a floating-point input, got ", describe({x}));
  const int64_t C = x.size(1);
  for (auto [t, what] :
       {std::pair{w, "weight"}, {b, "bias"}, {running_mean, "running_mean"}, {running_var, "running_var"}})
    MT_CHECK(!t.defined() || (t.dim() == 1 && t.size(0) == C && is_floating(t.dtype())), "batch_norm", what,
             " must be a floating [", C, "] tensor for input ", describe({x}), ", got ", describe({t}));
  MT_CHECK(running_mean.defined() == running_var.defined(), "batch_norm",
           "running_mean and running_var must be given together");
  MT_CHECK(training || running_mean.defined(), "batch_norm",
           "running_mean and running_var are required when not training");
  launch::check_same_device("batch_norm", {x, w, b, running_mean, running_var});
  const DType A = acc_type(x.dtype());
  const Device dev = x.device();
  // Running estimates stay as they are, as PyTorch's.
  if (x.numel() == 0) return empty_norm_output(x, w, b, true);
  const int64_t count = x.numel() / C;  // values per channel
  Tensor xc = launch::contiguous(x);
  Tensor bmean, invstd;  // per-channel statistics used to normalize (acc dtype)
  {
    NoGradGuard guard;
    if (training) {
      MT_CHECK(count > 1, "batch_norm", "expected more than 1 value per channel when training, got input ",
               describe({x}));
      bmean = make_tensor({C}, A, dev);
      Tensor var = make_tensor({C}, A, dev);
      kernel(x, "batch_norm", &NnKernels::batch_norm_stats)(xc, bmean, var);
      invstd = rsqrt(var + eps);
      if (running_mean.defined()) {
        // PyTorch's update: the unbiased batch variance goes into the running estimate.
        // Computed in the statistics' dtype and rounded once into the estimate's (fp16/bf16
        // running estimates would otherwise round the product, the batch term and the sum).
        Tensor unbiased = var * (double(count) / double(count - 1));
        Tensor rm = running_mean, rv = running_var;
        rm.copy_(bmean * momentum + rm.to(A) * (1 - momentum));
        rv.copy_(unbiased * momentum + rv.to(A) * (1 - momentum));
      }
    } else {
      bmean = fresh(running_mean, A);
      invstd = rsqrt(fresh(running_var, A) + eps);
    }
  }
  Tensor y = make_tensor(x.sizes(), x.dtype(), dev);
  {
    NoGradGuard guard;
    Tensor wA = w.defined() ? plain(w, A) : ones({C}, {.dtype = A, .device = dev});
    Tensor scale = wA * invstd;
    Tensor shift = b.defined() ? plain(b, A) - bmean * scale : -(bmean * scale);
    kernel(x, "batch_norm", &NnKernels::batch_norm_apply)(xc, launch::contiguous(scale), launch::contiguous(shift), y);
  }
  if (needs_grad({x, w, b})) {
    record(
        "batch_norm", {x, w, b}, y,
        [sx = SavedTensor(x), sw = SavedTensor(w), bmean, invstd, training, eps, C, A](const Tensor& gy, auto& need) {
          Tensor x = sx.unpack(), w = sw.unpack();
          if (GradMode::is_enabled()) {
            Shape bshape(size_t(x.dim()), 1);
            bshape[1] = C;
            Shape dims = dims_except(x.dim(), 1);
            Tensor xhat, rstd;
            if (training) {
              Tensor xm = x - mean(x, dims, true).to(x.dtype());
              rstd = rsqrt(mean(xm * xm, dims, true) + eps).to(x.dtype());
              xhat = xm * rstd;
            } else {
              rstd = invstd.to(x.dtype()).reshape(bshape);
              xhat = (x - bmean.to(x.dtype()).reshape(bshape)) * rstd;
            }
            Tensor wb = w.defined() ? w.to(x.dtype()).reshape(bshape) : Tensor();
            Grads gr = norm_backward_composite(gy, xhat, rstd, wb, dims, dims, {C}, training, need);
            if (w.defined()) {
              if (gr[1].defined()) gr[1] = gr[1].to(w.dtype());
              if (gr[2].defined()) gr[2] = gr[2].to(w.dtype());
            }
            return gr;
          }
          // In eval mode gx = gy * w * invstd does not depend on x: computed apart from the
          // kernel (whose xhat terms, multiplied by 0, would turn a NaN/inf input into NaN).
          const bool gx_by_kernel = need[0] && training;
          Tensor gx = gx_by_kernel ? make_tensor(x.sizes(), x.dtype(), x.device()) : Tensor();
          Tensor gw = need[1] ? make_tensor({C}, A, x.device()) : Tensor();
          Tensor gb = need[2] ? make_tensor({C}, A, x.device()) : Tensor();
          Tensor wA = w.defined() ? plain(w, A) : ones({C}, {.dtype = A, .device = x.device()});
          if (gx_by_kernel || gw.defined() || gb.defined())
            kernel(x, "batch_norm", &NnKernels::batch_norm_backward)(launch::cast(gy, x.dtype()), launch::contiguous(x),
                                                                     bmean, invstd, wA, training, gx, gw, gb);
          if (need[0] && !training) {
            Shape bshape(size_t(x.dim()), 1);
            bshape[1] = C;
            gx = (gy * (wA * invstd).reshape(bshape)).to(x.dtype());
          }
          if (gw.defined()) gw = gw.to(w.dtype());
          if (gb.defined()) gb = gb.to(w.dtype());
          return Grads{gx, gw, gb};
        });
  }
  return y;
}

Tensor layer_norm(const Tensor& x0, const Shape& normalized_shape, const Tensor& w0, const Tensor& b0, double eps) {
  auto in = amp::autocast_many(autocast_layer_norm, {x0, w0, b0});
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  const int64_t k = int64_t(normalized_shape.size());
  MT_CHECK(x.defined() && k >= 1 && x.dim() >= k && Shape(x.sizes().end() - k, x.sizes().end()) == normalized_shape,
           "layer_norm", "input ", describe({x}), " does not end in normalized_shape ", shape_str(normalized_shape));
  MT_CHECK(is_floating(x.dtype()), "layer_norm", "expected a floating-point input, got ", describe({x}));
  for (auto [t, what] : {std::pair{w, "weight"}, {b, "bias"}})
    MT_CHECK(!t.defined() || (t.sizes() == normalized_shape && is_floating(t.dtype())), "layer_norm", what,
             " must be a floating tensor of shape ", shape_str(normalized_shape), ", got ", describe({t}));
  launch::check_same_device("layer_norm", {x, w, b});
  const DType A = acc_type(x.dtype());
  const int64_t n = shape_numel(normalized_shape), M = n ? x.numel() / n : 0;
  if (n == 0 || M == 0) return empty_norm_output(x, w, b, false);
  Tensor xc = launch::contiguous(x);
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mu = make_tensor({M}, A, x.device()), rstd = make_tensor({M}, A, x.device());
  kernel(x, "layer_norm", &NnKernels::layer_norm)(make_view(xc, {M, n}, {n, 1}, xc.offset()), plain(w, A), plain(b, A),
                                                  eps, make_view(y, {M, n}, {n, 1}, 0), mu, rstd);
  if (needs_grad({x, w, b})) {
    record("layer_norm", {x, w, b}, y,
           [sx = SavedTensor(x), sw = SavedTensor(w), mu, rstd, normalized_shape, eps, M, n, A, k](const Tensor& gy,
                                                                                                   auto& need) {
             Tensor x = sx.unpack(), w = sw.unpack();
             const DType wt = w.defined() ? w.dtype() : A;
             if (GradMode::is_enabled()) {
               Shape norm_dims, lead_dims;
               for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? lead_dims : norm_dims).push_back(d);
               Tensor xm = x - mean(x, norm_dims, true).to(x.dtype());
               Tensor r = rsqrt(mean(xm * xm, norm_dims, true) + eps).to(x.dtype());
               Tensor wb = w.defined() ? w.to(x.dtype()) : Tensor();
               Grads gr =
                   norm_backward_composite(gy, xm * r, r, wb, norm_dims, lead_dims, normalized_shape, true, need);
               for (size_t i = 1; i < 3; ++i)
                 if (gr[i].defined()) gr[i] = gr[i].to(wt);
               return gr;
             }
             Tensor xc = launch::contiguous(x);
             Tensor gx = need[0] ? make_tensor(x.sizes(), x.dtype(), x.device()) : Tensor();
             Tensor gw = need[1] ? make_tensor({n}, A, x.device()) : Tensor();
             Tensor gb = need[2] ? make_tensor({n}, A, x.device()) : Tensor();
             Tensor gyc = launch::cast(gy, x.dtype());
             kernel(x, "layer_norm", &NnKernels::layer_norm_backward)(
                 make_view(gyc, {M, n}, {n, 1}, gyc.offset()), make_view(xc, {M, n}, {n, 1}, xc.offset()), mu, rstd,
                 plain(w, A), gx.defined() ? make_view(gx, {M, n}, {n, 1}, 0) : gx, gw, gb);
             if (gw.defined()) gw = gw.reshape(normalized_shape).to(wt);
             if (gb.defined()) gb = gb.reshape(normalized_shape).to(wt);
             return Grads{gx, gw, gb};
           });
  }
  return y;
}

}  // namespace functional
}  // namespace mantissa::nn
