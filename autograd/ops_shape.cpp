// Views, copies, casts, concatenation and splitting, with their backward formulas
// (indexing: ops_index.cpp).
// View ops return real views (shared storage); a select / slice's gradient goes into the
// matching window of the input's gradient (autograd/view_window.h).
#include <algorithm>

#include "amp/autocast.h"
#include "autograd/op_helpers.h"
#include "autograd/view_window.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(cat, Promote);
MT_DECLARE_CAST_POLICY(stack, Promote);

namespace mantissa {

using namespace detail;

namespace {

// The view of x that `w` describes; backward hands the view's gradient to the engine, which
// writes it into the window (autograd/view_window.h).
Tensor window_view(const char* name, const Tensor& x, autograd::ViewWindow w) {
  Tensor y = w.in(x);
  if (needs_grad({x})) {
    autograd::meta(y).is_view = true;
    w.layout = autograd::gradient_layout(x);
    record(name, {x}, y, [](const Tensor& g, auto&) { return Grads{g}; }).grad_window =
        std::make_shared<const autograd::ViewWindow>(std::move(w));
  }
  return y;
}

// A view of x with the same elements in another shape; backward reshapes back.
Tensor reshaped_view(const char* name, const Tensor& x, const Shape& sizes, const Shape& strides) {
  Tensor y = make_view(x, sizes, strides, x.offset());
  if (needs_grad({x})) {
    autograd::meta(y).is_view = true;
    record(name, {x}, y, [shape = x.sizes()](const Tensor& g, auto&) { return Grads{g.reshape(shape)}; });
  }
  return y;
}

// Resolves a single -1 in `shape` against numel.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Tensor& x) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MT_CHECK(infer < 0, op, "only one dimension can be inferred in ", shape_str(shape));
      infer = int64_t(i);
    } else {
      MT_CHECK(out[i] >= 0, op, "invalid shape ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    MT_CHECK(known != 0 && numel % known == 0, op, "shape ", shape_str(shape), " is invalid for input of size ", numel,
             " (shape ", x.shape_str(), ")");
    out[size_t(infer)] = numel / known;
  }
  MT_CHECK(shape_numel(out) == numel, op, "shape ", shape_str(shape), " is invalid for input of size ", numel,
           " (shape ", x.shape_str(), ")");
  return out;
}

// Strides for viewing x as `shape` without copying, if possible (torch's computeStride).
bool view_strides(const Tensor& x, const Shape& shape, Shape& out) {
  if (x.is_contiguous()) {
    out = contiguous_strides(shape);
    return true;
  }
  const Shape& os = x.sizes();
  const Shape& ost = x.strides();
  out.assign(shape.size(), 0);
  if (x.numel() == 0) {
    out = contiguous_strides(shape);
    return true;
  }
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace

Tensor view_scatter(const Tensor& g, const Shape& shape, const Shape& sizes, const Shape& strides, int64_t offset) {
  Tensor out = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
  Tensor win = make_view(out, sizes, strides, offset);
  backend_for(g.device()).copy(g, win);
  if (needs_grad({g})) {
    record("view_scatter", {g}, out, [sizes, strides, offset](const Tensor& gg, auto&) {
      Tensor c = gg.contiguous();
      return Grads{make_view(c, sizes, strides, c.offset() + offset).contiguous()};
    });
  }
  return out;
}

Tensor Tensor::view(Key, const Shape& shape_in) const {
  Shape shape = infer_shape(shape_in, numel(), "view", *this);
  Shape st;
  MT_CHECK(view_strides(*this, shape, st), "view", "view shape ", mantissa::shape_str(shape),
           " is not compatible with the size ", this->shape_str(), " and strides ", mantissa::shape_str(strides()),
           " of the input; use reshape");
  return reshaped_view("ViewBackward", *this, shape, st);
}

Tensor Tensor::reshape(Key, const Shape& shape_in) const {
  Shape shape = infer_shape(shape_in, numel(), "reshape", *this);
  Shape st;
  if (view_strides(*this, shape, st)) return reshaped_view("ReshapeBackward", *this, shape, st);
  return contiguous().view(shape);
}

Tensor Tensor::flatten(Key, int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  MT_CHECK(start <= end, "flatten", "start_dim ", start, " is after end_dim ", end);
  Shape s(sizes().begin(), sizes().begin() + start);
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= size(d);
  s.push_back(n);
  s.insert(s.end(), sizes().begin() + end + 1, sizes().end());
  return reshape(s);
}

Tensor Tensor::permute(Key, const Shape& dims) const {
  MT_CHECK(int64_t(dims.size()) == dim(), "permute", "expected ", dim(), " dims for a tensor of shape ", shape_str(),
           ", got ", mantissa::shape_str(dims));
  Shape sz, st, inverse(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    MT_CHECK(!used[d], "permute", "dimension ", d, " repeated in ", mantissa::shape_str(dims));
    used[d] = true;
    sz.push_back(size(d));
    st.push_back(stride(d));
    inverse[d] = int64_t(i);
  }
  Tensor y = make_view(*this, sz, st, offset());
  if (needs_grad({*this})) {
    autograd::meta(y).is_view = true;
    record("permute", {*this}, y, [inverse](const Tensor& g, auto&) { return Grads{g.permute(inverse)}; });
  }
  return y;
}

Tensor Tensor::transpose(Key, int64_t d0, int64_t d1) const {
  if (dim() == 0) return *this;
  Shape p(dim());
  for (int64_t i = 0; i < dim(); ++i) p[i] = i;
  std::swap(p[wrap_dim(d0, dim(), "transpose")], p[wrap_dim(d1, dim(), "transpose")]);
  return permute(p);
}

Tensor Tensor::t(Key) const {
  MT_CHECK(dim() <= 2, "t", "expects a tensor with <= 2 dimensions, got shape ", shape_str());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(Key, int64_t d, int64_t start, int64_t end, int64_t step) const {
  MT_CHECK(dim() > 0, "slice", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "slice");
  MT_CHECK(step > 0, "slice", "step must be positive, got ", step);
  int64_t n = size(d);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return window_view("SliceBackward", *this, {sizes(), d, start, step, (end - start + step - 1) / step, false});
}

Tensor Tensor::narrow(Key, int64_t d, int64_t start, int64_t length) const {
  MT_CHECK(dim() > 0, "narrow", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "narrow");
  int64_t n = size(d);
  if (start < 0) start += n;
  MT_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow", "start ", start, " + length ", length,
           " exceeds dimension ", d, " of size ", n, " (shape ", shape_str(), ")");
  return slice(d, start, start + length);
}

Tensor Tensor::select(Key, int64_t d, int64_t index) const {
  MT_CHECK(dim() > 0, "select", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t n = size(d);
  MT_CHECK(index >= -n && index < n, "select", "index ", index, " is out of range for dimension ", d, " of size ", n,
           " (shape ", shape_str(), ")");
  if (index < 0) index += n;
  return window_view("SelectBackward", *this, {sizes(), d, index, 1, 1, true});
}

Tensor Tensor::expand(Key, const Shape& shape) const {
  MT_CHECK(int64_t(shape.size()) >= dim(), "expand", "cannot expand shape ", shape_str(), " to ",
           mantissa::shape_str(shape), " with fewer dimensions");
  size_t lead = shape.size() - size_t(dim());
  Shape sz(shape.size()), st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      MT_CHECK(shape[i] >= 0, "expand", "invalid target shape ", mantissa::shape_str(shape));
      sz[i] = shape[i];
      continue;
    }
    int64_t cur = size(int64_t(i - lead));
    int64_t want = shape[i] == -1 ? cur : shape[i];
    MT_CHECK(cur == want || cur == 1, "expand", "cannot expand shape ", shape_str(), " to ", mantissa::shape_str(shape),
             " (dimension ", i, ": ", cur, " vs ", want, ")");
    sz[i] = want;
    st[i] = cur == want ? stride(int64_t(i - lead)) : 0;
  }
  if (sz == sizes()) return *this;
  Tensor y = make_view(*this, sz, st, offset());
  if (needs_grad({*this})) {
    autograd::meta(y).is_view = true;
    record("expand", {*this}, y, [shape = sizes()](const Tensor& g, auto&) { return Grads{sum_to(g, shape)}; });
  }
  return y;
}

Tensor Tensor::squeeze(Key) const {
  Shape sz, st;
  for (int64_t d = 0; d < dim(); ++d)
    if (size(d) != 1) {
      sz.push_back(size(d));
      st.push_back(stride(d));
    }
  return reshaped_view("SqueezeBackward", *this, sz, st);
}

Tensor Tensor::squeeze(Key, int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (size(d) != 1) return *this;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return reshaped_view("SqueezeBackward", *this, sz, st);
}

Tensor Tensor::unsqueeze(Key, int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sz = sizes(), st = strides();
  int64_t s = d < dim() ? size(d) * stride(d) : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  return reshaped_view("UnsqueezeBackward", *this, sz, st);
}

Tensor Tensor::clone(Key) const {
  Tensor y = make_tensor(sizes(), dtype(), device());
  backend_for(device()).copy(*this, y);
  if (needs_grad({*this})) record("clone", {*this}, y, [](const Tensor& g, auto&) { return Grads{g}; });
  return y;
}

Tensor Tensor::contiguous(Key) const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(Key, DType t) const {
  if (t == dtype()) return *this;
  Tensor y = launch::cast(*this, t);
  if (is_floating(t) && needs_grad({*this})) {
    // A bf16/fp16 gradient for an fp32 input goes back as it is, outside create_graph: the
    // engine widens it where it lands (the same values), or the node it lands in reads it
    // directly (autocast's fp32 softmax before a bf16 matmul: no fp32 copy of the gradient).
    record("to_copy", {*this}, y, [from = dtype()](const Tensor& g, auto&) {
      if (!GradMode::is_enabled() && from == DType::Float32 && is_reduced_float(g.dtype())) return Grads{g};
      return Grads{g.to(from)};
    }).defers_widening_to = dtype();
  }
  return y;
}

Tensor Tensor::to(Key, Device d, bool non_blocking) const {
  if (d == device()) return *this;
  Tensor y = launch::to_device(*this, d, non_blocking);
  if (needs_grad({*this}))
    record("to_device", {*this}, y, [from = device()](const Tensor& g, auto&) { return Grads{g.to(from)}; });
  return y;
}

Tensor Tensor::detach(Key) const { return make_view(*this, sizes(), strides(), offset()); }

// ---------------------------------------------------------------- joining and splitting

Tensor cat(const std::vector<Tensor>& ts0, int64_t dim_in) {
  MT_CHECK(!ts0.empty(), "cat", "expected a non-empty list of tensors");
  std::vector<Tensor> ts = amp::autocast_many(autocast_cat, ts0);
  const Tensor& ref = ts[0];
  MT_CHECK(ref.dim() > 0, "cat", "zero-dimensional tensors cannot be concatenated");
  int64_t dim = wrap_dim(dim_in, ref.dim(), "cat");
  DType t = ref.dtype();
  Shape shape = ref.sizes();
  shape[dim] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& x = ts[i];
    launch::check_same_device("cat", {ref, x});
    MT_CHECK(x.dim() == ref.dim(), "cat", "tensor ", i, " has ", x.dim(), " dims but tensor 0 has ", ref.dim(),
             " (shapes ", x.shape_str(), " and ", ref.shape_str(), ")");
    for (int64_t d = 0; d < ref.dim(); ++d)
      MT_CHECK(d == dim || x.size(d) == ref.size(d), "cat", "sizes of tensors must match except in dimension ", dim,
               ": tensor 0 has shape ", ref.shape_str(), ", tensor ", i, " has shape ", x.shape_str());
    shape[dim] += x.size(dim);
    t = promote_types(t, x.dtype());
  }
  Tensor y = make_tensor(shape, t, ref.device());
  int64_t off = 0;
  std::vector<int64_t> sizes;
  for (const Tensor& x : ts) {
    Tensor win = make_view(y, x.sizes(), y.strides(), off * y.stride(dim));
    backend_for(y.device()).copy(x, win);
    off += x.size(dim);
    sizes.push_back(x.size(dim));
  }
  if (needs_grad(ts)) {
    std::vector<DType> dtypes;
    dtypes.reserve(ts.size());
    for (auto& x : ts) dtypes.push_back(x.dtype());
    record("cat", ts, y, [sizes, dim, dtypes](const Tensor& g, auto& need) {
      Grads out;
      int64_t o = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        out.push_back(need[i] ? g.narrow(dim, o, sizes[i]).to(dtypes[i]) : Tensor());
        o += sizes[i];
      }
      return out;
    });
  }
  return y;
}

Tensor stack(const std::vector<Tensor>& ts0, int64_t dim) {
  MT_CHECK(!ts0.empty(), "stack", "expected a non-empty list of tensors");
  const std::vector<Tensor> ts = amp::autocast_many(autocast_stack, ts0);
  dim = wrap_dim(dim, ts[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t i = 0; i < ts.size(); ++i) {
    MT_CHECK(ts[i].sizes() == ts[0].sizes(), "stack", "expects each tensor to be equal size, but got ",
             ts[0].shape_str(), " at entry 0 and ", ts[i].shape_str(), " at entry ", i);
    us.push_back(ts[i].unsqueeze(dim));
  }
  return cat(us, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  MT_CHECK(x.dim() > 0, "split", "expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    MT_CHECK(s >= 0, "split", "split sizes must be non-negative, got ", s);
    total += s;
  }
  MT_CHECK(total == x.size(dim), "split", "split sizes sum to ", total, " but dimension ", dim, " has size ",
           x.size(dim), " (shape ", x.shape_str(), ")");
  std::vector<Tensor> out;
  int64_t o = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, o, s));
    o += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  MT_CHECK(split_size > 0, "split", "split_size must be positive, got ", split_size);
  MT_CHECK(x.dim() > 0, "split", "expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t o = 0; o < x.size(dim); o += split_size) sizes.push_back(std::min(split_size, x.size(dim) - o));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  MT_CHECK(chunks > 0, "chunk", "number of chunks must be positive, got ", chunks);
  MT_CHECK(x.dim() > 0, "chunk", "expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, x.dim(), "chunk");
  // An empty dim splits into `chunks` empty chunks (PyTorch).
  if (x.size(dim) == 0) return std::vector<Tensor>(size_t(chunks), x.narrow(dim, 0, 0));
  int64_t size = (x.size(dim) + chunks - 1) / chunks;
  return split(x, std::max<int64_t>(size, 1), dim);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  MT_CHECK(x.dim() > 0, "unbind", "dimension ", dim, " specified but the tensor has no dimensions");
  dim = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(dim); ++i) out.push_back(x.select(dim, i));
  return out;
}

std::vector<Tensor> Tensor::chunk(Key, int64_t chunks, int64_t dim) const {
  return mantissa::chunk(*this, chunks, dim);
}
std::vector<Tensor> Tensor::split(Key, int64_t split_size, int64_t dim) const {
  return mantissa::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(Key, const std::vector<int64_t>& sizes, int64_t dim) const {
  return mantissa::split(*this, sizes, dim);
}
std::vector<Tensor> Tensor::unbind(Key, int64_t dim) const { return mantissa::unbind(*this, dim); }

}  // namespace mantissa
