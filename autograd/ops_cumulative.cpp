// cumsum and cumprod along one dim: the backend's scan kernel (core/backend.h: each line
// accumulated in order, fp16/bf16 in fp32 with one rounding, as PyTorch accumulates them;
// integer and bool inputs give int64, as torch does). cumsum's backward is the opposite scan;
// cumprod's a kernel, or differentiable ops when a graph of the backward is built.
#include "amp/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/op_helpers.h"
#include "core/backend.h"

// Autocast categories (PyTorch's CUDA autocast runs both in fp32).
MT_DECLARE_CAST_POLICY(cumsum, Fp32);
MT_DECLARE_CAST_POLICY(cumprod, Fp32);

namespace mantissa {

using namespace detail;

namespace {

// x's shape as the kernels' lines along dim: [outer, n, inner].
Shape lines_along(const Tensor& x, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  return {outer, x.size(dim), inner};
}

// The backend's inclusive scan of x (floating or int64, any layout) along dim, from the end
// when `reverse`: a new contiguous tensor, no graph.
Tensor scan_kernel(const Tensor& x, int64_t dim, bool product, bool reverse) {
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return y;
  const Shape lines = lines_along(x, dim);
  backend_for(x.device()).scan(launch::contiguous(x).view(lines), y.view(lines), product, reverse);
  return y;
}

// y [.., n, ..] moved by `off` along dim, towards higher indices (or lower when `reverse`),
// the vacated positions filled with `fill`. Requires 0 < off < n.
Tensor shifted(const Tensor& y, int64_t dim, int64_t off, double fill, bool reverse) {
  const int64_t n = y.size(dim);
  Shape pad_shape = y.sizes();
  pad_shape[dim] = off;
  Tensor pad = full(pad_shape, fill, {.dtype = y.dtype(), .device = y.device()});
  if (reverse) return cat({y.narrow(dim, off, n - off), pad}, dim);
  return cat({pad, y.narrow(dim, 0, n - off)}, dim);
}

// Differentiable cumsum along dim (from the end when `reverse`); its gradient is the opposite
// scan of g.
Tensor sum_scan(const Tensor& x, int64_t dim, bool reverse) {
  Tensor y = scan_kernel(x, dim, false, reverse);
  if (needs_grad({x}))
    record("cumsum", {x}, y, [dim, reverse](const Tensor& g, auto&) { return Grads{sum_scan(g, dim, !reverse)}; });
  return y;
}

Tensor product_scan(const Tensor& x, int64_t dim);

// The gradient of cumprod without dividing by x (exact where x has zeros):
// gx_i = sum_{k >= i} g_k prod_{j <= k, j != i} x_j = E_i r_i, with E_i = x_0 .. x_{i-1}
// (exclusive cumprod) and r_i = g_i + x_{i+1} r_{i+1}, a reverse affine recurrence scanned
// in log2(n) steps as pairs (a, b) with r_i = b_i + a_i r_{i + span}.
Tensor cumprod_grad(const Tensor& x, const Tensor& g, int64_t dim) {
  const int64_t n = x.size(dim);
  if (x.numel() == 0 || n == 1) return g.clone();
  Tensor excl = product_scan(shifted(x, dim, 1, 1.0, false), dim);
  Tensor a = shifted(x, dim, 1, 0.0, true), b = g;
  for (int64_t off = 1; off < n; off *= 2) {
    Tensor b_next = b + a * shifted(b, dim, off, 0.0, true);
    a = a * shifted(a, dim, off, 0.0, true);
    b = b_next;
  }
  // After a slice's first zero the gradient is 0, as PyTorch defines it (not 0 * inf = NaN
  // where another factor is infinite).
  Tensor zeros_before = scan_kernel(shifted((x == 0.0).to(x.dtype()), dim, 1, 0.0, false), dim, false, false) > 0.0;
  Tensor gx = excl * b;
  return where(zeros_before, zeros_like(gx), gx);
}

// cumprod_grad's values by the backend's kernel (two passes over each line; no graph).
Tensor cumprod_grad_kernel(const Tensor& x, const Tensor& g, int64_t dim) {
  Tensor gx = make_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return gx;
  const Shape lines = lines_along(x, dim);
  backend_for(x.device())
      .cumprod_backward(launch::contiguous(x).view(lines), launch::contiguous(g).view(lines), gx.view(lines));
  return gx;
}

// Differentiable cumprod along dim; the gradient goes through fp32 for fp16 / bf16: the kernel's,
// or the composed one when a graph of the backward is built (log2(n) steps of differentiable
// ops: 3x PyTorch's fwd + bwd on [1024, 1024] when it was the only one).
Tensor product_scan(const Tensor& x, int64_t dim) {
  Tensor y = scan_kernel(x, dim, true, false);
  if (needs_grad({x})) {
    record("cumprod", {x}, y, [sx = SavedTensor(x), dim](const Tensor& g, auto&) {
      Tensor x = sx.unpack();
      const DType compute = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16 ? DType::Float32 : x.dtype();
      const Tensor xc = x.to(compute), gc = g.to(compute);
      Tensor gx = GradMode::is_enabled() ? cumprod_grad(xc, gc, dim) : cumprod_grad_kernel(xc, gc, dim);
      return Grads{gx.to(x.dtype())};
    });
  }
  return y;
}

Tensor cumulative(const amp::OpPolicy& policy, const Tensor& x0, int64_t dim_in, bool product) {
  const char* name = policy.name();
  MT_CHECK(x0.defined(), name, "got an undefined tensor");
  Tensor x = amp::autocast_one(policy, x0);
  const bool scalar = x.dim() == 0;
  const int64_t dim = wrap_dim(dim_in, scalar ? 1 : x.dim(), name);
  Tensor xr = scalar ? x.reshape({1}) : x;
  // Integers and bool scan in int64 (no gradient flows through them).
  if (!is_floating(xr.dtype())) xr = launch::cast(xr, DType::Int64);
  Tensor y = product ? product_scan(xr, dim) : sum_scan(xr, dim, false);
  return scalar ? y.reshape({}) : y;
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) { return cumulative(autocast_cumsum, x, dim, false); }
Tensor cumprod(const Tensor& x, int64_t dim) { return cumulative(autocast_cumprod, x, dim, true); }

}  // namespace mantissa
