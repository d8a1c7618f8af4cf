// Indexing: index_select, gather, scatter_add and one_hot, with their backward formulas.
// Indices are checked to be in range before a kernel reads them (core/index_check.h: on a GPU
// without a host synchronisation).
#include <algorithm>
#include <string>

#include "amp/autocast.h"
#include "autograd/op_helpers.h"
#include "core/index_check.h"
#include "core/nn_kernels.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(scatter_add, Promote);

namespace mantissa {

using namespace detail;

namespace {
// An int64, contiguous copy of `index` whose values are checked to be in [0, n)
// (core/index_check.h: on a GPU without a host synchronisation).
Tensor checked_index(const char* op, const Tensor& index, int64_t n, const Tensor& x, int64_t dim) {
  MT_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, op,
           "index must be an int64 or int32 tensor, got ", dtype_name(index.dtype()));
  Tensor idx = launch::contiguous(launch::cast(index, DType::Int64));
  launch::check_index_range(op, "index", idx, n, nullptr,
                            "dimension " + std::to_string(dim) + " of input shape " + x.shape_str());
  return idx;
}

// g: x's shape with k = idx.numel() along dim; returns `shape` (x's) with g's slices summed
// into their index's slice. dim moves to the front ([k, rest], one transposing copy of g when
// dim != 0) and the embedding-backward kernel sums the rows per index: deterministic, in the
// accumulation type, and the index is never expanded to g's shape (that was a [k, rest] int64
// tensor and, on a GPU, a host copy of it). Its own gradient is index_select again.
Tensor index_select_backward(const Tensor& g, const Shape& shape, int64_t dim, const Tensor& idx) {
  Shape moved = shape;
  if (!moved.empty()) std::swap(moved[0], moved[size_t(dim)]);
  const int64_t n = moved.empty() ? 1 : moved[0];
  int64_t rest = 1;
  for (size_t d = 1; d < moved.size(); ++d) rest *= moved[d];
  Tensor gx;
  {
    NoGradGuard guard;
    Tensor g2 = launch::contiguous(g.dim() ? g.transpose(0, dim) : g).reshape({idx.numel(), rest});
    Tensor rows = make_tensor({n, rest}, g.dtype(), g.device());
    nn_kernels_for(g.device(), "index_select").embedding_backward(g2, idx, rows, -1);
    gx = rows.reshape(moved);
    if (gx.dim()) gx = gx.transpose(0, dim);
  }
  if (needs_grad({g}))
    record("index_select_backward", {g}, gx,
           [dim, idx](const Tensor& gg, auto&) { return Grads{index_select(gg, dim, idx)}; });
  return gx;
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim_in, const Tensor& index) {
  MT_CHECK(index.dim() <= 1, "index_select", "index must be 0-D or 1-D, got shape ", index.shape_str());
  launch::check_same_device("index_select", {x, index});
  int64_t dim = wrap_dim(dim_in, x.dim(), "index_select");
  Tensor idx = checked_index("index_select", index, x.dim() ? x.size(dim) : 1, x, dim).reshape({-1});
  Shape shape = x.sizes();
  if (x.dim()) shape[dim] = idx.numel();
  Tensor y = make_tensor(shape, x.dtype(), x.device());
  backend_for(x.device()).index_select(launch::contiguous(x), dim, idx, y);
  if (needs_grad({x})) {
    record("index_select", {x}, y, [shape = x.sizes(), dim, idx](const Tensor& g, auto&) {
      return Grads{index_select_backward(g, shape, dim, idx)};
    });
  }
  return y;
}

namespace {
// The view of t's leading corner with index's sizes in every dim but `dim` (-1: in every dim),
// for the gather/scatter kernels, which walk their data with the index's sizes.
Tensor index_corner(const Tensor& t, const Tensor& index, int64_t dim) {
  Shape sizes = t.sizes();
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != dim) sizes[size_t(d)] = index.size(d);
  return sizes == t.sizes() ? t : make_view(t, sizes, t.strides(), t.offset());
}

// y[.., idx[..], ..] += src[..] along dim, in place, with no autograd record (y: a fresh
// tensor). The kernel takes src and the output with the index's sizes (outside dim, for the
// output): a smaller index (PyTorch requires only <=) scatters into the leading corner of y.
void add_at(const Tensor& y, int64_t dim, const Tensor& idx, const Tensor& src) {
  if (idx.numel() == 0) return;
  Tensor src_used = launch::contiguous(index_corner(src, idx, -1));
  Tensor corner = index_corner(y, idx, dim);
  if (corner.sizes() == y.sizes()) {
    backend_for(y.device()).scatter_add(y, dim, idx, src_used);
  } else {
    Tensor part = launch::contiguous(corner);  // an alias of y when the corner is contiguous
    backend_for(y.device()).scatter_add(part, dim, idx, src_used);
    if (!corner.is_contiguous()) backend_for(y.device()).copy(part, corner);
  }
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim_in, const Tensor& index) {
  int64_t dim = wrap_dim(dim_in, x.dim(), "gather");
  // A 0-dim input is one element along dim 0 (PyTorch): gathered as [1].
  if (x.dim() == 0 && index.dim() <= 1) return gather(x.reshape({1}), 0, index.reshape({-1})).reshape(index.sizes());
  launch::check_same_device("gather", {x, index});
  MT_CHECK(index.dim() == x.dim(), "gather", "index must have as many dims as the input: ", describe({x, index}));
  for (int64_t d = 0; d < x.dim(); ++d)
    MT_CHECK(d == dim || index.size(d) <= x.size(d), "gather",
             "index must not be larger than the input except in dimension ", dim, ": ", describe({x, index}));
  Tensor idx = checked_index("gather", index, x.size(dim), x, dim);
  Tensor y = make_tensor(index.sizes(), x.dtype(), x.device());
  // The kernel reads an input with the index's sizes outside dim: the leading corner of x.
  if (y.numel() > 0) backend_for(x.device()).gather(launch::contiguous(index_corner(x, index, dim)), dim, idx, y);
  if (needs_grad({x})) {
    record("gather", {x}, y, [shape = x.sizes(), dim, idx](const Tensor& g, auto&) {
      Tensor gx = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
      if (GradMode::is_enabled()) return Grads{scatter_add(gx, dim, idx, g)};  // differentiable: double backward
      add_at(gx, dim, idx, g);  // in place: scatter_add's copy of its zeros was a third pass
      return Grads{gx};
    });
  }
  return y;
}

Tensor scatter_add(const Tensor& x0, int64_t dim_in, const Tensor& index, const Tensor& src0) {
  auto in = amp::autocast_many(autocast_scatter_add, {x0, src0});
  Tensor x = in[0], src = in[1].dtype() == in[0].dtype() ? in[1] : in[1].to(in[0].dtype());
  int64_t dim = wrap_dim(dim_in, x.dim(), "scatter_add");
  if (x.dim() == 0 && index.dim() <= 1 && src.dim() <= 1)  // one element along dim 0, as gather's
    return scatter_add(x.reshape({1}), 0, index.reshape({-1}), src.reshape({-1})).reshape({});
  launch::check_same_device("scatter_add", {x, index, src});
  MT_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), "scatter_add",
           "index and src must have as many dims as the input: ", describe({x, index, src}));
  for (int64_t d = 0; d < x.dim(); ++d)
    MT_CHECK(index.size(d) <= src.size(d) && (d == dim || index.size(d) <= x.size(d)), "scatter_add",
             "index must not be larger than src, nor than the input except in dimension ", dim, ": ",
             describe({x, index, src}));
  Tensor idx = checked_index("scatter_add", index, x.size(dim), x, dim);
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  backend_for(x.device()).copy(x, y);
  add_at(y, dim, idx, src);
  if (needs_grad({x, src})) {
    record("scatter_add", {x, src}, y, [dim, idx, src_shape = src.sizes()](const Tensor& g, auto& need) {
      Tensor gs;
      if (need[1]) {
        gs = gather(g, dim, idx);
        if (gs.sizes() != src_shape)  // src positions the index does not reach get 0
          gs = view_scatter(gs, src_shape, gs.sizes(), contiguous_strides(src_shape), 0);
      }
      return Grads{need[0] ? g : Tensor(), gs};
    });
  }
  return y;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  MT_CHECK(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32, "one_hot",
           "expects an integer tensor, got ", dtype_name(indices.dtype()));
  // On the indices' device: zeros, then a 1 scattered per index (through a host vector the
  // [4096] -> [4096, 256] case took 3x PyTorch's time, and a GPU's indices went to the host).
  Tensor idx = launch::contiguous(launch::cast(indices, DType::Int64));
  if (num_classes < 0) {
    MT_CHECK(idx.numel() > 0, "one_hot", "cannot infer the number of classes from an empty tensor ",
             indices.shape_str(), " (pass num_classes)");
    num_classes = std::max<int64_t>(0, amax(idx).item<int64_t>() + 1);
  }
  Shape shape = indices.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, {.dtype = DType::Int64, .device = indices.device()});
  if (idx.numel() == 0) return out;
  launch::check_index_range("one_hot", "class value", idx, num_classes, nullptr,
                            "[0, " + std::to_string(num_classes) + ")");
  Shape column = idx.sizes();
  column.push_back(1);
  Tensor ones_at = ones(column, {.dtype = DType::Int64, .device = indices.device()});
  backend_for(indices.device()).scatter_add(out, out.dim() - 1, idx.reshape(column), ones_at);
  return out;
}

}  // namespace mantissa
