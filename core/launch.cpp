#include "core/launch.h"

#include <algorithm>
#include <numeric>

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

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, DType compute, DType out_dtype, double s0, double s1) {
  check_same_device("binary op", {a, b});
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "binary op");
  Tensor ca = a.dtype() == compute ? a : cast(a, compute);
  Tensor cb = b.dtype() == compute ? b : cast(b, compute);
  Tensor out = make_tensor(shape, out_dtype, a.device());
  backend_for(a.device()).binary(op, ca, cb, out, s0, s1);
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

// A reduction over a run of dims followed by kept dims of unit stride (a bias gradient, the
// backward of a broadcast add, a max or var over dim 0 or over the sequence of [B, T, C]):
// the [outer, cols, n] view with unit-stride columns, no copy (the kernels reduce columns in
// place; the transposing copy cost more than the reduction). An undefined tensor when the
// layout is not that case, or on a GPU unless `any_device` (the CUDA reduce kernel reads
// columns; its var_mean does not).
Tensor column_view(const Tensor& x, const std::vector<int64_t>& dims, bool any_device) {
  if (!(any_device || x.device().is_cpu()) || dims.empty()) return Tensor();
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return Tensor();  // not one run of dims
  const int64_t first = dims.front(), last = dims.back();
  auto part = [&](int64_t b, int64_t e, Shape& sizes, Shape& st) {
    for (int64_t d = b; d < e; ++d) {
      sizes.push_back(x.size(d));
      st.push_back(x.stride(d));
    }
  };
  Shape lead_sizes, lead_st, red_sizes, red_st, col_sizes, col_st;
  part(0, first, lead_sizes, lead_st);
  part(first, last + 1, red_sizes, red_st);
  part(last + 1, x.dim(), col_sizes, col_st);
  const int64_t outer = shape_numel(lead_sizes), n = shape_numel(red_sizes), cols = shape_numel(col_sizes);
  if (cols < 2 || n < 2 || collapsed_stride(col_sizes, col_st) != 1) return Tensor();
  const int64_t ld = collapsed_stride(red_sizes, red_st);
  if (ld < cols) return Tensor();
  const int64_t so = outer == 1 ? ld * n : collapsed_stride(lead_sizes, lead_st);
  if (so < ld * n) return Tensor();
  return make_view(x, {outer, cols, n}, {so, 1, ld}, x.offset());
}

// A transposed or permuted dense x as the view of its memory order (outermost dim first), with
// `dims` renumbered to match, where its kept dims stay in their order (so the result's layout is
// the same): a reduction over x.t()'s rows is then one over the columns of a contiguous tensor,
// where the transposing copy of move_dims_last cost 6x the reduction (sum fp32 at 1M: 14 against
// 81 GB/s). False otherwise. The reduced dims' order changes, so the arg ops (one dim) only.
bool in_memory_order(const Tensor& x, const std::vector<int64_t>& dims, Tensor& view, std::vector<int64_t>& mapped) {
  if (x.is_contiguous() || !is_permuted_dense(x.sizes(), x.strides())) return false;
  std::vector<int64_t> perm(size_t(x.dim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });
  auto reduced = [&](int64_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  int64_t last_kept = -1;
  for (int64_t d : perm) {
    if (reduced(d)) continue;
    if (d < last_kept) return false;
    last_kept = d;
  }
  Shape sizes, strides;
  mapped.clear();
  for (size_t i = 0; i < perm.size(); ++i) {
    sizes.push_back(x.size(perm[i]));
    strides.push_back(x.stride(perm[i]));
    if (reduced(perm[i])) mapped.push_back(int64_t(i));
  }
  view = make_view(x, sizes, strides, x.offset());
  return true;
}

// The column view where it applies (on a GPU only when `any_device`), else the rows; for a
// transposed or permuted input, of its memory order.
Tensor columns_or_rows(const Tensor& x, const std::vector<int64_t>& dims, bool any_device) {
  Tensor columns = column_view(x, dims, any_device);
  if (columns.defined()) return columns;
  Tensor view;
  std::vector<int64_t> mapped;
  if (in_memory_order(x, dims, view, mapped)) return columns_or_rows(view, mapped, any_device);
  Shape kept;
  return move_dims_last(x, dims, kept);
}

// The runs of consecutive dims in sorted `dims`: {0, 2, 3} -> {{0}, {2, 3}}.
std::vector<std::vector<int64_t>> runs_of(const std::vector<int64_t>& dims) {
  std::vector<std::vector<int64_t>> runs;
  for (int64_t d : dims) {
    if (runs.empty() || runs.back().back() != d - 1) runs.emplace_back();
    runs.back().push_back(d);
  }
  return runs;
}

// A reduction over several runs of dims of a dense x (sum(x, {0, 2, 3}) of [N, C, H, W]: a
// per-channel weight or bias gradient) as one reduction per run, the last run first, each one
// rows or columns of the previous stage's contiguous result with its dims kept: no transposing
// copy (move_dims_last's copy cost 2.6x the sum itself: 147 against 57 us for [16, 16, 64, 64]
// fp32 on one thread). Only where a stage loses nothing: max / min of any dtype (exact) and sums
// that stage in the output dtype at full width (fp32, fp64, integers in int64); a bf16 / fp16
// sum would round each stage's partial sums to the narrow type and keeps the copy. Returns the
// result with every reduced dim kept as 1, in x's dims order, or an undefined tensor where this
// does not apply.
Tensor reduce_in_stages(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, DType out_dtype) {
  const bool exact = op == ReduceOp::Max || op == ReduceOp::Min;
  if (!(exact || (op == ReduceOp::Sum && !is_reduced_float(x.dtype()))) || x.numel() == 0) return Tensor();
  Tensor cur = x;
  std::vector<int64_t> order = dims;  // dims of cur (x's memory order where x is permuted)
  if (!x.is_contiguous() && !in_memory_order(x, dims, cur, order)) return Tensor();
  std::vector<int64_t> real;  // a size-1 dim reduces to itself: no stage of its own
  for (int64_t d : order)
    if (cur.size(d) > 1) real.push_back(d);
  const auto runs = runs_of(real);
  if (runs.size() < 2) return Tensor();
  for (auto run = runs.rbegin(); run != runs.rend(); ++run) {
    Tensor stage = make_tensor(reduced_shape(cur.sizes(), *run, true), out_dtype, x.device());
    backend_for(x.device()).reduce(op, columns_or_rows(cur, *run, true), stage);
    cur = stage;
  }
  return cur;
}

}  // namespace

Tensor reduction_rows(const Tensor& x, const std::vector<int64_t>& dims) { return columns_or_rows(x, dims, false); }

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype) {
  Tensor staged = reduce_in_stages(op, x, dims, out_dtype);
  if (staged.defined()) {
    const Shape shape = reduced_shape(x.sizes(), dims, keepdim);
    return make_view(staged, shape, contiguous_strides(shape), staged.offset());
  }
  Tensor rows = columns_or_rows(x, dims, true);
  if (rows.size(-1) == 0) {
    MT_CHECK(op == ReduceOp::Sum || op == ReduceOp::Prod, op_name(op), "cannot reduce over an empty dimension of ",
             x.shape_str(), " (max/min/argmax have no identity)");
  }
  Tensor out = make_tensor(reduced_shape(x.sizes(), dims, keepdim), out_dtype, x.device());
  if (rows.size(-1) == 0) {
    backend_for(x.device()).fill(out, op == ReduceOp::Sum ? 0 : 1);
    return out;
  }
  backend_for(x.device()).reduce(op, rows, out);
  return out;
}

}  // namespace mantissa::launch
