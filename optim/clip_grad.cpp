#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace mantissa::optim {

namespace {

// The p-norm of x (already in the accumulation dtype) as a 0-dim tensor.
Tensor norm_of(const Tensor& x, double p) {
  if (std::isinf(p)) return x.numel() == 0 ? zeros({}, {x.dtype(), x.device()}) : amax(abs(x));
  if (p == 0) return sum(ne(x, zeros({}, {x.dtype(), x.device()})).to(x.dtype()));
  if (p == 1) return sum(abs(x));
  if (p == 2) return sqrt(sum(x * x));
  return pow(sum(pow(abs(x), p)), 1.0 / p);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const char* op = "clip_grad_norm_";
  MT_CHECK(!std::isnan(norm_type) && norm_type >= 0, op, "norm_type must be >= 0 or inf, got ", norm_type);
  // A negative (or NaN) bound would flip or poison every gradient.
  MT_CHECK(max_norm >= 0, op, "max_norm must be non-negative, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  bool any_double = false;
  for (const Tensor& p : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (!g.defined()) continue;
    MT_CHECK(g.is_floating_point(), op, "gradient of dtype ", dtype_name(g.dtype()), " is not floating-point");
    if (!grads.empty())
      MT_CHECK(g.device() == grads[0].device(), op, "gradients on different devices: ", grads[0].device(), " and ",
               g.device());
    any_double = any_double || g.dtype() == DType::Float64;
    grads.push_back(g);
  }
  if (grads.empty()) return zeros({});
  const DType acc = any_double ? DType::Float64 : DType::Float32;

  // Per-gradient norms, then the norm of those norms (torch's order of operations).
  std::vector<Tensor> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(norm_of(g.dtype() == acc ? g : g.to(acc), norm_type));
  const Tensor total = norms.size() == 1 ? norms[0] : norm_of(stack(norms), norm_type);

  if (error_if_nonfinite) {
    const double t = total.item<double>();
    MT_CHECK(std::isfinite(t), op, "the total norm of order ", norm_type,
             " for gradients from `params` is non-finite (", t,
             "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite "
             "norm anyway, set error_if_nonfinite=false");
  }
  // Multiplying by a clamped coefficient (never above 1) avoids a host-side branch.
  const Tensor coef = clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  for (Tensor& g : grads) g.mul_(coef.dtype() == g.dtype() ? coef : coef.to(g.dtype()));
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  MT_CHECK(clip_value >= 0, "clip_grad_value_", "clip_value must be non-negative, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace mantissa::optim
