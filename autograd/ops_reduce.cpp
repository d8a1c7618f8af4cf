// Reductions, softmax and log_softmax, with their backward formulas.
#include <cmath>

#include "amp/autocast.h"
#include "autograd/op_helpers.h"
#include "core/nn_kernels.h"
#include "core/profiler.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(softmax, Fp32);
MT_DECLARE_CAST_POLICY(log_softmax, Fp32);
MT_DECLARE_CAST_POLICY(mean, Fp32);
MT_DECLARE_CAST_POLICY(var, Fp32);
MT_DECLARE_CAST_POLICY(std, Fp32);
MT_DECLARE_CAST_POLICY(logsumexp, Fp32);

namespace mantissa {

using namespace detail;

namespace {

// Re-inserts reduced dims (as size 1) so a reduced gradient broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& g, const std::vector<int64_t>& dims, bool keepdim) {
  if (keepdim) return g;
  Tensor r = g;
  for (int64_t d : dims) r = r.unsqueeze(d);  // dims are sorted ascending
  return r;
}

int64_t count_of(const Shape& sizes, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  return n;
}

}  // namespace

Tensor sum(const Tensor& x0, const Shape& dims_in, bool keepdim) {
  Tensor x = amp::autocast_one(amp::list_policy(ReduceOp::Sum), x0);
  auto dims = reduction_dims(dims_in, x.dim(), "sum");
  DType out_t = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  Tensor y = launch::reduce(ReduceOp::Sum, x, dims, keepdim, out_t);
  if (needs_grad({x})) {
    record("sum", {x}, y, [shape = x.sizes(), dims, keepdim](const Tensor& g, auto&) {
      return Grads{unsqueeze_reduced(g, dims, keepdim).expand(shape)};
    });
  }
  return y;
}

Tensor mean(const Tensor& x0, const Shape& dims_in, bool keepdim) {
  Tensor x = amp::autocast_one(autocast_mean, x0);
  MT_CHECK(is_floating(x.dtype()), "mean", "expected a floating-point input, got ", dtype_name(x.dtype()),
           " (convert with .to(mt::kFloat32))");
  auto dims = reduction_dims(dims_in, x.dim(), "mean");
  return sum(x, Shape(dims.begin(), dims.end()), keepdim) / double(count_of(x.sizes(), dims));
}

Tensor prod(const Tensor& x0, int64_t dim_in, bool keepdim) {
  Tensor x = amp::autocast_one(amp::list_policy(ReduceOp::Prod), x0);
  int64_t dim = wrap_dim(dim_in, x.dim(), "prod");
  // Integers and bools multiply in int64 (torch.prod); a 0-dim input is reduced as [1].
  if (!is_floating(x.dtype())) x = launch::cast(x, DType::Int64);
  const bool scalar = x.dim() == 0;
  Tensor xr = scalar ? x.reshape({1}) : x;
  Tensor y = launch::reduce(ReduceOp::Prod, xr, {dim}, keepdim && !scalar, x.dtype());
  if (needs_grad({x})) {
    record("prod", {x}, y, [sx = SavedTensor(x), sy = SavedTensor(y, true), dim, keepdim](const Tensor& g, auto&) {
      // d prod / d x_i = the product of the others, exact with zeros (as PyTorch): with no
      // zero in the row it is prod / x_i; with one zero only the zero's position gets the
      // product of the nonzeros; with two or more every position gets 0.
      Tensor x = sx.unpack();
      if (x.dim() == 0) return Grads{g};
      Tensor gk = unsqueeze_reduced(g, {dim}, keepdim);
      // Without a zero anywhere (as PyTorch decides, one host read): g (y / x) with the saved
      // output y, as PyTorch, where the case analysis below takes nine ops (1.5x PyTorch's).
      Tensor zero = x == 0.0;
      if (!any(zero).item<bool>()) return Grads{gk * (unsqueeze_reduced(sy.unpack(), {dim}, keepdim) / x)};
      Tensor zeros_in_row = sum(zero, {dim}, true);
      Tensor ones_for_zeros = where(zero, ones_like(x), x);
      Tensor others = prod(ones_for_zeros, dim, true) / ones_for_zeros;
      Tensor keep = logical_or(zeros_in_row == int64_t(0), logical_and(zero, zeros_in_row == int64_t(1)));
      return Grads{where(keep, gk * others, zeros_like(x))};
    });
  }
  return y;
}

namespace {
// nan_routes: a NaN extreme sends the gradient to the NaN inputs (max()/min() in PyTorch);
// otherwise a NaN extreme matches nothing and the gradient is NaN (torch.amax/amin).
Tensor extreme_all(const char* name, ReduceOp op, const Tensor& x, const Shape& dims_in, bool keepdim,
                   bool nan_routes = false) {
  auto dims = reduction_dims(dims_in, x.dim(), name);
  Tensor y = launch::reduce(op, x, dims, keepdim, x.dtype());
  if (needs_grad({x})) {
    record(name, {x}, y,
           [sx = SavedTensor(x), sy = SavedTensor(y, true), dims, keepdim, nan_routes](const Tensor& g, auto&) {
             // Evenly split between all elements equal to the extreme (as torch.amax).
             Tensor x = sx.unpack();
             Tensor yk = unsqueeze_reduced(sy.unpack(), dims, keepdim);
             Tensor hit = x == yk;
             if (nan_routes) hit = logical_or(hit, logical_and(x != x, yk != yk));
             Tensor mask = hit.to(g.dtype());
             Tensor count = sum(mask, Shape(dims.begin(), dims.end()), true);
             return Grads{unsqueeze_reduced(g, dims, keepdim) * mask / count};
           });
  }
  return y;
}

// A 0-dim input is reduced as [1] and its results are 0-dim whatever keepdim (PyTorch).
ValuesIndices extreme_dim(const char* name, bool is_max, const Tensor& x0, int64_t dim_in, bool keepdim) {
  int64_t dim = wrap_dim(dim_in, x0.dim(), name);
  const bool scalar = x0.dim() == 0;
  Tensor x = scalar ? x0.reshape({1}) : x0;
  Tensor idx = launch::reduce(is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin, x, {dim}, true, DType::Int64);
  Tensor vals = gather(x, dim, idx);  // differentiable: backward scatters into the winners
  if (!keepdim || scalar) {
    vals = vals.squeeze(dim);
    idx = idx.squeeze(dim);
  }
  return {vals, idx};
}

Tensor arg_extreme(const char* name, ReduceOp op, const Tensor& x, int64_t dim, bool keepdim) {
  MT_CHECK(x.dtype() != DType::Bool, name, "not implemented for bool tensors (as PyTorch), got ", x.shape_str(),
           " (bool)");
  dim = wrap_dim(dim, x.dim(), name);
  if (x.dim() == 0) return launch::reduce(op, x.reshape({1}), {0}, false, DType::Int64);
  return launch::reduce(op, x, {dim}, keepdim, DType::Int64);
}
}  // namespace

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme_all("amax", ReduceOp::Max, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme_all("amin", ReduceOp::Min, x, dims, keepdim);
}
Tensor max(const Tensor& x) { return extreme_all("max", ReduceOp::Max, x, {}, false, true); }
Tensor min(const Tensor& x) { return extreme_all("min", ReduceOp::Min, x, {}, false, true); }
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_dim("max", true, x, dim, keepdim); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_dim("min", false, x, dim, keepdim); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme("argmax", ReduceOp::ArgMax, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme("argmin", ReduceOp::ArgMin, x, dim, keepdim);
}

Tensor var(const Tensor& x0, const Shape& dims_in, int64_t correction, bool keepdim) {
  Tensor x = amp::autocast_one(autocast_var, x0);
  MT_CHECK(is_floating(x.dtype()), "var", "expected a floating-point input, got ", dtype_name(x.dtype()));
  auto dims = reduction_dims(dims_in, x.dim(), "var");
  Tensor rows = launch::reduction_rows(x, dims);
  Shape out_shape = launch::reduced_shape(x.sizes(), dims, keepdim);
  Tensor v = make_tensor(out_shape, x.dtype(), x.device());
  Tensor m = make_tensor(out_shape, x.dtype(), x.device());
  backend_for(x.device()).var_mean(rows, v, m, correction);
  if (needs_grad({x})) {
    int64_t dof = count_of(x.sizes(), dims) - correction;
    record("var", {x}, v, [sx = SavedTensor(x), dims, keepdim, dof](const Tensor& g, auto&) {
      Tensor x = sx.unpack();
      Tensor centered = x - mean(x, Shape(dims.begin(), dims.end()), true);
      return Grads{unsqueeze_reduced(g, dims, keepdim) * centered * (2.0 / double(dof))};
    });
  }
  return v;
}

Tensor std(const Tensor& x0, const Shape& dims_in, int64_t correction, bool keepdim) {
  Tensor x = amp::autocast_one(autocast_std, x0);
  Tensor y;
  {
    NoGradGuard guard;
    y = sqrt(var(x, dims_in, correction, keepdim));
  }
  if (needs_grad({x})) {
    auto dims = reduction_dims(dims_in, x.dim(), "std");
    int64_t dof = count_of(x.sizes(), dims) - correction;
    record("std", {x}, y, [sx = SavedTensor(x), sy = SavedTensor(y, true), dims, keepdim, dof](const Tensor& g, auto&) {
      // d std / d x = (x - mean) / (dof std), and 0 where std is 0 (PyTorch masks result == 0).
      // A constant row counts as std 0 even when the two-pass variance leaves a rounding residue
      // (which would otherwise give an O(1) gradient of residue / residue).
      Tensor x = sx.unpack();
      if (x.numel() == 0) return Grads{zeros_like(x)};
      Shape d(dims.begin(), dims.end());
      Tensor s = unsqueeze_reduced(sy.unpack(), dims, keepdim);
      Tensor flat, mx;
      {
        NoGradGuard guard;
        mx = amax(x, d, true);
        flat = logical_or(s == 0.0, mx == amin(x, d, true));
      }
      Tensor safe = where(flat, ones_like(s), s);
      // A flat row is centered on its own value: x - x is +0 (and inf - inf NaN, as PyTorch's
      // gradient there), so its gradient is +0 as PyTorch's masked one, not a rounding residue's
      // signed 0.
      Tensor centered = x - where(flat, mx, mean(x, d, true));
      Tensor gs = where(flat, zeros_like(s), unsqueeze_reduced(g, dims, keepdim) / (safe * double(dof)));
      return Grads{gs * centered};
    });
  }
  return y;
}

Tensor logsumexp(const Tensor& x0, const Shape& dims_in, bool keepdim) {
  Tensor x = amp::autocast_one(autocast_logsumexp, x0);
  auto dims = reduction_dims(dims_in, x.dim(), "logsumexp");
  Shape d(dims.begin(), dims.end());
  // Over an empty dim: log(0) = -inf (PyTorch), still differentiable (the gradient is empty).
  if (count_of(x.sizes(), dims) == 0) return sum(x, d, keepdim) + (-INFINITY);
  Tensor y;
  {
    NoGradGuard guard;
    Tensor m = amax(x, d, true);
    m = where(isfinite(m), m, zeros_like(m));  // all -inf rows: avoid inf - inf
    y = log(sum(exp(x - m), d, true)) + m;
    if (!keepdim) y = y.reshape(launch::reduced_shape(x.sizes(), dims, false));
  }
  if (needs_grad({x})) {
    // g exp(x - lse), as PyTorch: through the composite, an inf in a row gave 0 * inf = NaN
    // (exp(x - m) overflows where m was replaced by 0) for the finite entries of that row.
    record("logsumexp", {x}, y,
           [sx = SavedTensor(x), sy = SavedTensor(y, true), dims, keepdim](const Tensor& g, auto&) {
             Tensor x = sx.unpack();
             return Grads{unsqueeze_reduced(g, dims, keepdim) * exp(x - unsqueeze_reduced(sy.unpack(), dims, keepdim))};
           });
  }
  return y;
}

namespace {
// x viewed as [outer, n, inner] around dim (x contiguous).
Tensor softmax_view(const Tensor& x, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = x.size(dim);
  return make_view(x, {outer, n, inner}, {n * inner, inner, 1}, x.offset());
}

Tensor softmax_impl(const amp::OpPolicy& policy, const Tensor& x0, int64_t dim_in, bool log) {
  const char* name = policy.name();
  MT_CHECK(is_floating(x0.dtype()), name, "expected a floating-point input, got ", dtype_name(x0.dtype()));
  // Autocast's fp32 policy without the cast: the kernel reads a bf16/fp16 input as is and writes
  // fp32, so no fp32 copy of the input is materialised (the backward writes the input's dtype).
  Tensor x = x0;
  DType out_t = x0.dtype();
  if (amp::is_autocast_enabled() && is_reduced_float(x0.dtype()) && amp::autocast_applies(x0.device().type) &&
      policy.policy() == amp::CastPolicy::Fp32) {
    out_t = DType::Float32;
    amp::note_policy_lookup(name);
    if (profiler::enabled()) profiler::note("autocast", name, double(amp::CastPolicy::Fp32));  // the AMP report
  } else {
    x = amp::autocast_one(policy, x0);
  }
  const int64_t dim = wrap_dim(dim_in, x.dim(), name);
  if (x.dim() == 0) x = x.reshape({1});
  Tensor xc = launch::contiguous(x);
  Tensor y = make_tensor(x.sizes(), out_t, x.device());
  backend_for(x.device()).softmax(softmax_view(xc, dim), softmax_view(y, dim), log);
  if (x0.dim() == 0) y = y.reshape({});
  if (needs_grad({x})) {
    autograd::Node& node =
        record(name, {x}, y, [sy = SavedTensor(y, true), dim, log, name, in_t = x.dtype()](const Tensor& g0, auto&) {
          Tensor y = sy.unpack();
          if (y.dim() == 0) y = y.reshape({1});
          Tensor g = g0.reshape(y.sizes());
          if (GradMode::is_enabled()) {  // a graph of the backward: the composite formula
            Tensor gx = log ? g - exp(y) * sum(g, {dim}, true) : y * (g - sum(g * y, {dim}, true));
            return Grads{gx.to(in_t).reshape(g0.sizes())};
          }
          // One pass per row (core/nn_kernels.h): gx in the input's dtype. A bf16 gradient of an
          // fp32 y (a cast's, Node::reads_narrow_grad) is read as it is on the CPU.
          const bool as_is = softmax_backward_takes(y.device(), y.dtype(), g.dtype());
          Tensor gc = launch::contiguous(as_is ? g : g.to(y.dtype()));
          Tensor gx = make_tensor(y.sizes(), in_t, y.device());
          nn_kernels_for(y.device(), name)
              .softmax_backward(softmax_view(y, dim), softmax_view(gc, dim), softmax_view(gx, dim), log);
          return Grads{gx.reshape(g0.sizes())};
        });
    node.reads_narrow_grad = true;
  }
  return y;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(autocast_softmax, x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(autocast_log_softmax, x, dim, true); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  MT_CHECK(lead >= 0, "sum_to", "cannot sum ", x.shape_str(), " to the larger shape ", shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? x : sum(x, dims, true);
  return r.reshape(shape);
}

// ---------------------------------------------------------------- Tensor method sugar

Tensor Tensor::sum(Key) const { return mantissa::sum(*this); }
Tensor Tensor::sum(Key, const Shape& dims, bool keepdim) const { return mantissa::sum(*this, dims, keepdim); }
Tensor Tensor::mean(Key) const { return mantissa::mean(*this); }
Tensor Tensor::mean(Key, const Shape& dims, bool keepdim) const { return mantissa::mean(*this, dims, keepdim); }
Tensor Tensor::max(Key) const { return mantissa::max(*this); }
Tensor Tensor::min(Key) const { return mantissa::min(*this); }
Tensor Tensor::argmax(Key, int64_t dim, bool keepdim) const { return mantissa::argmax(*this, dim, keepdim); }
Tensor Tensor::matmul(Key, const Tensor& o) const { return mantissa::matmul(*this, o); }
Tensor Tensor::pow(Key, const Scalar& e) const { return mantissa::pow(*this, e); }
Tensor Tensor::exp(Key) const { return mantissa::exp(*this); }
Tensor Tensor::log(Key) const { return mantissa::log(*this); }
Tensor Tensor::abs(Key) const { return mantissa::abs(*this); }
Tensor Tensor::sqrt(Key) const { return mantissa::sqrt(*this); }
Tensor Tensor::neg(Key) const { return mantissa::neg(*this); }
Tensor Tensor::relu(Key) const { return mantissa::relu(*this); }

}  // namespace mantissa
