// cumsum and cumprod along one dim, composed of differentiable ops (so they run on every
// device and double backward works): an inclusive scan in ceil(log2 n) steps of
// "combine with the copy shifted by 1, 2, 4, ..." (Hillis-Steele). fp16/bf16 scan in fp32 and
// round once, as PyTorch accumulates them; integer and bool inputs give int64, as torch does.
#include "amp/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/op_helpers.h"

// Autocast categories (PyTorch's CUDA autocast runs both in fp32).
MT_DECLARE_CAST_POLICY(cumsum, Fp32);
MT_DECLARE_CAST_POLICY(cumprod, Fp32);

namespace mantissa {

using namespace detail;

namespace {

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

// Inclusive scan of x along dim: y_i = x_0 + .. + x_i (x_0 * .. * x_i for `product`), or from
// the end (y_i = x_i + .. + x_{n-1}) when `reverse`.
Tensor scan(const Tensor& x, int64_t dim, bool product, bool reverse) {
  const int64_t n = x.size(dim);
  Tensor y = x;
  if (x.numel() == 0) return y.clone();
  for (int64_t off = 1; off < n; off *= 2) {
    Tensor s = shifted(y, dim, off, product ? 1.0 : 0.0, reverse);
    y = product ? y * s : y + s;
  }
  return y.is_same(x) ? x.clone() : y;
}

// The gradient of cumprod without dividing by x (exact where x has zeros):
// gx_i = sum_{k >= i} g_k prod_{j <= k, j != i} x_j = E_i r_i, with E_i = x_0 .. x_{i-1}
// (exclusive cumprod) and r_i = g_i + x_{i+1} r_{i+1}, a reverse affine recurrence scanned
// as pairs (a, b) with r_i = b_i + a_i r_{i + span}.
Tensor cumprod_grad(const Tensor& x, const Tensor& g, int64_t dim) {
  const int64_t n = x.size(dim);
  if (x.numel() == 0 || n == 1) return g.clone();
  Tensor excl = scan(shifted(x, dim, 1, 1.0, false), dim, true, false);
  Tensor a = shifted(x, dim, 1, 0.0, true), b = g;
  for (int64_t off = 1; off < n; off *= 2) {
    Tensor b_next = b + a * shifted(b, dim, off, 0.0, true);
    a = a * shifted(a, dim, off, 0.0, true);
    b = b_next;
  }
  // After a slice's first zero the gradient is 0, as PyTorch defines it (not 0 * inf = NaN
  // where another factor is infinite).
  Tensor zeros_before = scan(shifted((x == 0.0).to(x.dtype()), dim, 1, 0.0, false), dim, false, false) > 0.0;
  Tensor gx = excl * b;
  return where(zeros_before, zeros_like(gx), gx);
}

Tensor cumulative(const amp::OpPolicy& policy, const Tensor& x0, int64_t dim_in, bool product) {
  const char* name = policy.name();
  MT_CHECK(x0.defined(), name, "got an undefined tensor");
  Tensor x = amp::autocast_one(policy, x0);
  const bool scalar = x.dim() == 0;
  const int64_t dim = wrap_dim(dim_in, scalar ? 1 : x.dim(), name);
  const DType out_t = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  // fp16/bf16 accumulate in fp32 (one rounding at the end); integers and bool in int64.
  const DType compute = out_t == DType::Float16 || out_t == DType::BFloat16 ? DType::Float32 : out_t;
  Tensor xr = scalar ? x.reshape({1}) : x;
  Tensor y;
  {
    NoGradGuard guard;
    Tensor xc = xr.dtype() == compute ? xr : launch::cast(xr, compute);
    y = scan(xc, dim, product, false);
    if (y.dtype() != out_t) y = launch::cast(y, out_t);
  }
  if (needs_grad({xr})) {
    if (product) {
      record("cumprod", {xr}, y, [sx = SavedTensor(xr), dim, compute](const Tensor& g, auto&) {
        Tensor x = sx.unpack();
        return Grads{cumprod_grad(x.to(compute), g.to(compute), dim).to(x.dtype())};
      });
    } else {
      record("cumsum", {xr}, y, [dim, compute, dt = xr.dtype()](const Tensor& g, auto&) {
        return Grads{scan(g.to(compute), dim, false, true).to(dt)};
      });
    }
  }
  return scalar ? y.reshape({}) : y;
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) { return cumulative(autocast_cumsum, x, dim, false); }
Tensor cumprod(const Tensor& x, int64_t dim) { return cumulative(autocast_cumprod, x, dim, true); }

}  // namespace mantissa
