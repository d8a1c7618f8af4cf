// Vector norms (torch.norm with p = 1, 2 / "fro", +-inf, other p > 0, 0) and the logical
// reductions all / any, composed of differentiable reductions. The 2-norm is one node whose
// gradient x / ||x|| is 0 where the norm is 0, as PyTorch's.
#include <cmath>
#include <limits>

#include "amp/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/op_helpers.h"

// PyTorch's CUDA autocast runs norm in fp32.
MT_DECLARE_CAST_POLICY(norm, Fp32);

namespace mantissa {

using namespace detail;

namespace {

Tensor unsqueeze_dims(const Tensor& g, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return g;
  Tensor r = g;
  for (int64_t d : dims) r = r.unsqueeze(d);  // ascending
  return r;
}

Tensor two_norm(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape d(dims.begin(), dims.end());
  Tensor y;
  {
    NoGradGuard guard;
    y = sqrt(sum(x * x, d, keepdim));
  }
  if (needs_grad({x})) {
    record("norm", {x}, y, [sx = SavedTensor(x), sy = SavedTensor(y, true), dims, keepdim](const Tensor& g, auto&) {
      Tensor x = sx.unpack();
      Tensor n = unsqueeze_dims(sy.unpack(), dims, keepdim);
      Tensor zero = n == 0.0;
      Tensor safe = where(zero, ones_like(n), n);
      Tensor gn = where(zero, zeros_like(n), unsqueeze_dims(g, dims, keepdim) / safe);
      return Grads{x * gn};
    });
  }
  return y;
}

// (sum |x|^p)^(1/p) for p other than 0, 1, 2 and inf, with PyTorch's gradient, which is 0 where
// the norm is 0 (and where x is 0 for p < 1), not the NaN of 0^negative.
Tensor p_norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape d(dims.begin(), dims.end());
  Tensor y;
  {
    NoGradGuard guard;
    y = pow(sum(pow(abs(x), p), d, keepdim), 1.0 / p);
  }
  if (needs_grad({x})) {
    record("norm", {x}, y, [sx = SavedTensor(x), sy = SavedTensor(y, true), dims, keepdim, p](const Tensor& g, auto&) {
      Tensor x = sx.unpack();
      Tensor n = unsqueeze_dims(sy.unpack(), dims, keepdim);
      Tensor gk = unsqueeze_dims(g, dims, keepdim);
      Tensor zero_x = x == 0.0;
      Tensor ax = where(zero_x, ones_like(x), abs(x));  // |x|, with 1 where x is 0 (masked below)
      Tensor scaled = where(zero_x, zeros_like(x), sign(x) * pow(ax, p - 1));
      Tensor zero_n = n == 0.0;
      Tensor scale = where(zero_n, zeros_like(n), gk / pow(where(zero_n, ones_like(n), n), p - 1));
      return Grads{scaled * scale};
    });
  }
  return y;
}

// The count of nonzeros; its gradient is 0 (PyTorch's).
Tensor zero_norm(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor y;
  {
    NoGradGuard guard;
    y = sum((x != 0.0).to(x.dtype()), Shape(dims.begin(), dims.end()), keepdim);
  }
  if (needs_grad({x}))
    record("norm", {x}, y, [shape = x.sizes(), dt = x.dtype(), dev = x.device()](const Tensor&, auto&) {
      return Grads{zeros(shape, {.dtype = dt, .device = dev})};
    });
  return y;
}

}  // namespace

Tensor norm(const Tensor& x0, double p, const Shape& dims_in, bool keepdim) {
  MT_CHECK(x0.defined(), "norm", "got an undefined tensor");
  Tensor x = amp::autocast_one(autocast_norm, x0);
  MT_CHECK(is_floating(x.dtype()), "norm", "expected a floating-point input, got ", describe({x}),
           " (convert with .to(mt::kFloat32))");
  MT_CHECK(!std::isnan(p) && p >= 0, "norm", "p must be >= 0 (or +-inf), got ", p);
  const auto dims = reduction_dims(dims_in, x.dim(), "norm");
  const Shape d(dims.begin(), dims.end());
  if (p == 2) return two_norm(x, dims, keepdim);
  if (p == 1) return sum(abs(x), d, keepdim);
  if (std::isinf(p)) {
    MT_CHECK(x.numel() > 0 || x.dim() == 0, "norm", "the infinity norm of an empty tensor is undefined (",
             describe({x}), ")");
    return amax(abs(x), d, keepdim);
  }
  if (p == 0) return zero_norm(x, dims, keepdim);
  return p_norm(x, p, dims, keepdim);
}

Tensor norm(const Tensor& x, const std::string& p, const Shape& dims, bool keepdim) {
  MT_CHECK(p == "fro", "norm", "unknown norm \"", p, "\" (supported: \"fro\" or a number p)");
  return norm(x, 2.0, dims, keepdim);
}

namespace {
// The count of elements along dims for which `pred(x)` holds (int64), without history.
Tensor count_where(const Tensor& mask, const Shape& dims, bool keepdim) {
  return sum(mask.to(DType::Int64), dims, keepdim);
}
// torch.all / torch.any return bool, except for uint8 inputs (uint8 0/1).
Tensor logical_result(const Tensor& b, const Tensor& x) { return x.dtype() == DType::UInt8 ? b.to(DType::UInt8) : b; }
}  // namespace

Tensor all(const Tensor& x, const Shape& dims, bool keepdim) {
  MT_CHECK(x.defined(), "all", "got an undefined tensor");
  NoGradGuard guard;
  Tensor zero = x.dtype() == DType::Bool ? logical_not(x) : (x.detach() == 0.0);
  reduction_dims(dims, x.dim(), "all");
  return logical_result(count_where(zero, dims, keepdim) == 0.0, x);
}

Tensor any(const Tensor& x, const Shape& dims, bool keepdim) {
  MT_CHECK(x.defined(), "any", "got an undefined tensor");
  NoGradGuard guard;
  Tensor nonzero = x.dtype() == DType::Bool ? x.detach() : (x.detach() != 0.0);
  reduction_dims(dims, x.dim(), "any");
  return logical_result(count_where(nonzero, dims, keepdim) != 0.0, x);
}

}  // namespace mantissa
