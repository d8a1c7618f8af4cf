#include "core/launch.h"

#include <algorithm>

#include "core/backend_registry.h"
#include "core/error.h"
#include "core/shape.h"

namespace mantissa::launch {

void check_same_device(const char* op, std::initializer_list<Tensor> ts) {
  const Tensor* first = nullptr;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    MT_CHECK(t.device() == first->device(), op, "expected all tensors on one device, got ", first->device().str(),
             " and ", t.device().str());
  }
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  backend_for(x.device()).copy(x, out);
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return contiguous(x);
  Tensor out = make_tensor(x.sizes(), dtype, x.device());
  backend_for(x.device()).copy(x, out);
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  Tensor src = contiguous(x);
  Tensor out = make_tensor(x.sizes(), x.dtype(), device);
  // The device that is not the CPU owns the transfer.
  backend_for(device.is_cpu() ? x.device() : device).copy(src, out);
  // Only an upload from pinned memory is asynchronous (pageable ones are staged or blocking,
  // downloads wait): make it synchronous unless asked not to.
  if (!non_blocking && src.is_pinned() && !device.is_cpu()) {
    const DeviceBackend* b = find_backend(device.type);
    if (b != nullptr && b->sync_stream != nullptr) b->sync_stream(device.index);
  }
  return out;
}

Tensor convert(const Tensor& x, DType dtype, Device device) {
  if (x.device() == device) return x.dtype() == dtype ? x : cast(x, dtype);
  Tensor out = make_tensor(x.sizes(), dtype, device);
  backend_for(device.is_cpu() ? x.device() : device).copy(contiguous(x), out);
  return out;
}

Tensor unary_to(UnaryOp op, const Tensor& x, DType out_dtype, double a, double b) {
  Tensor out = make_tensor(x.sizes(), out_dtype, x.device());
  backend_for(x.device()).unary(op, x, out, a, b);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& x, double a, double b) { return unary_to(op, x, x.dtype(), a, b); }

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, DType compute, DType out_dtype) {
  check_same_device("binary op", {a, b});
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "binary op");
  Tensor ca = a.dtype() == compute ? a : cast(a, compute);
  Tensor cb = b.dtype() == compute ? b : cast(b, compute);
  Tensor out = make_tensor(shape, out_dtype, a.device());
  backend_for(a.device()).binary(op, ca, cb, out);
  return out;
}

Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(in.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced)
      out.push_back(in[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

Tensor move_dims_last(const Tensor& x, const std::vector<int64_t>& dims, Shape& kept_sizes) {
  Shape perm, reduced_sizes;
  kept_sizes.clear();
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      perm.push_back(d);
      kept_sizes.push_back(x.size(d));
    }
  for (int64_t d : dims) {
    perm.push_back(d);
    n *= x.size(d);
  }
  Shape sizes, strides;
  for (int64_t p : perm) {
    sizes.push_back(x.size(p));
    strides.push_back(x.stride(p));
  }
  Tensor moved = contiguous(make_view(x, sizes, strides, x.offset()));
  int64_t outer = shape_numel(kept_sizes);
  return make_view(moved, {outer, n}, {n, 1}, moved.offset());
}

namespace {

// The stride that walks `sizes` (strides `st`) as one flat index, or 0 when they do not
// collapse to one stride. Size-1 dims are skipped; no dims at all walk with stride 1.
int64_t collapsed_stride(const Shape& sizes, const Shape& st) {
  int64_t inner = 0, span = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[size_t(d)] == 1) continue;
    if (inner == 0)
      inner = st[size_t(d)];
    else if (st[size_t(d)] != inner * span)
      return 0;
    span *= sizes[size_t(d)];
  }
  return inner == 0 ? 1 : inner;
}

// A CPU float sum over the leading dims of a contiguous tensor (a bias gradient, the
// backward of a broadcast add): the [outer, n] view with unit-stride columns, no copy (the
// CPU kernel sums columns in place; the transposing copy cost as much as the GEMMs around it).
// An undefined tensor when the layout or the op is not that case.
Tensor column_view(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims) {
  if (op != ReduceOp::Sum || !x.device().is_cpu() || !is_floating(x.dtype()) || dims.empty()) return Tensor();
  Shape kept_sizes, kept_st, red_sizes, red_st;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    (reduced ? red_sizes : kept_sizes).push_back(x.size(d));
    (reduced ? red_st : kept_st).push_back(x.stride(d));
  }
  const int64_t outer = shape_numel(kept_sizes), n = shape_numel(red_sizes);
  if (outer < 2 || n < 2 || collapsed_stride(kept_sizes, kept_st) != 1) return Tensor();
  const int64_t row_stride = collapsed_stride(red_sizes, red_st);
  if (row_stride < outer) return Tensor();
  return make_view(x, {outer, n}, {1, row_stride}, x.offset());
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype) {
  Shape kept;
  Tensor columns = column_view(op, x, dims);
  Tensor rows = columns.defined() ? columns : move_dims_last(x, dims, kept);
  if (rows.size(1) == 0) {
    MT_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod, op_name(op), "cannot reduce over an empty dimension of ",
             x.shape_str(), " (max/min/argmax have no identity)");
  }
  Tensor out = make_tensor(reduced_shape(x.sizes(), dims, keepdim), out_dtype, x.device());
  if (rows.size(1) == 0) {
    backend_for(x.device()).fill(out, op == ReduceOp::Sum ? 0 : 1);
    return out;
  }
  backend_for(x.device()).reduce(op, rows, out);
  return out;
}

}  // namespace mantissa::launch
