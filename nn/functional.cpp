// linear, embedding, dropout and flatten.
#include "nn/functional.h"

#include "core/index_check.h"
#include "core/random.h"
#include "nn/functional_detail.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(linear, LowerPrecision);

namespace mantissa::nn {

using namespace detail;

std::ostream& operator<<(std::ostream& os, const Size2& s) { return os << "(" << s.h << ", " << s.w << ")"; }

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None:
      return "none";
    case Reduction::Mean:
      return "mean";
    case Reduction::Sum:
      return "sum";
  }
  return "?";
}

namespace functional {

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) { return x.flatten(start_dim, end_dim); }

// One node for the whole of x W^T + b: the weight gradient is a single GEMM over all
// leading dims (x [B, T, in] -> [B*T, in]) rather than one per batch entry and a sum.
Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& b0) {
  auto in = amp::autocast_many(autocast_linear, {x0, w0, b0});
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  MT_CHECK(x.defined() && w.defined(), "linear", "input and weight must be defined");
  launch::check_same_device("linear", {x, w, b});
  MT_CHECK(w.dim() == 2, "linear", "weight must be 2-D [out_features, in_features], got ", describe({w}));
  MT_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1), "linear", "input ", describe({x}),
           " does not end in in_features = ", w.size(1), " of weight ", describe({w}));
  MT_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0)), "linear", "bias must be [", w.size(0), "], got ",
           describe({b}));
  MT_CHECK(is_floating(x.dtype()) && x.dtype() == w.dtype() && (!b.defined() || b.dtype() == x.dtype()), "linear",
           "input, weight and bias must share one floating dtype, got ", describe({x, w, b}));
  const int64_t K = w.size(1), N = w.size(0), M = shape_numel(Shape(x.sizes().begin(), x.sizes().end() - 1));
  Shape out_shape = x.sizes();
  out_shape.back() = N;
  Tensor y = make_tensor({1, M, N}, x.dtype(), x.device());
  const Backend& be = backend_for(x.device());
  if (M * N > 0) {
    Tensor xc = launch::contiguous(x);
    Tensor wc = launch::contiguous(w);
    Tensor a = make_view(xc, {1, M, K}, {0, K, 1}, xc.offset());
    Tensor bt = make_view(wc, {1, K, N}, {0, 1, K}, wc.offset());  // W^T without a copy
    // The bias joins the fp32 accumulator, so fp16/bf16 outputs are rounded once, not twice.
    be.matmul(a, bt, b.defined() ? launch::contiguous(b) : Tensor(), y);
  }
  y = make_view(y, out_shape, contiguous_strides(out_shape), 0);
  if (needs_grad({x, w, b})) {
    // Explicit M (not -1): with K or N = 0 the row count cannot be inferred.
    record("linear", {x, w, b}, y, [sx = SavedTensor(x), sw = SavedTensor(w), M, K, N](const Tensor& g, auto& need) {
      Tensor x = sx.unpack(), w = sw.unpack();
      Tensor g2 = g.reshape({M, N});
      Tensor gx, gw, gb;
      if (need[0]) gx = matmul(g2, w).reshape(x.sizes());
      if (need[1]) gw = matmul(g2.t(), x.reshape({M, K}));
      // The bias gradient sums g2's columns in place (the column reduction of every device:
      // no transposing copy; fp32 accumulation, one rounding).
      if (need[2]) gb = sum(g2, {0});
      return Grads{gx, gw, gb};
    });
  }
  return y;
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  MT_CHECK(weight.defined() && weight.dim() == 2, "embedding", "weight must be 2-D [num_embeddings, dim], got ",
           describe({weight}));
  MT_CHECK(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32, "embedding",
           "indices must be int64 or int32, got ", describe({indices}));
  const int64_t num = weight.size(0), dim = weight.size(1);
  if (padding_idx) {
    MT_CHECK(*padding_idx >= -num && *padding_idx < num, "embedding", "padding_idx ", *padding_idx,
             " is out of range for ", num, " embeddings");
    if (*padding_idx < 0) *padding_idx += num;
  }
  launch::check_same_device("embedding", {indices, weight});
  Tensor idx = launch::contiguous(launch::cast(indices, DType::Int64)).reshape({-1});
  launch::check_index_range("embedding", "index", idx, num, nullptr,
                            "an embedding of " + std::to_string(num) + " rows, weight " + weight.shape_str());
  Shape out_shape = indices.sizes();
  out_shape.push_back(dim);
  Tensor y;
  {
    NoGradGuard guard;
    y = index_select(weight, 0, idx).reshape(out_shape);
  }
  if (needs_grad({weight})) {
    record("embedding", {weight}, y, [idx, num, dim, padding_idx](const Tensor& g, auto&) {
      // Rows summed per index by one deterministic kernel: the index is never expanded to
      // [tokens, dim].
      Tensor g2 = launch::contiguous(g.reshape({-1, dim}));
      Tensor gw = make_tensor({num, dim}, g.dtype(), g.device());
      kernel(g, "embedding", &NnKernels::embedding_backward)(g2, idx, gw, padding_idx ? *padding_idx : -1);
      return Grads{gw};
    });
  }
  return y;
}

namespace {
// g * the mask whose keep bits dropout wrote: dropout's backward, and its own.
Tensor dropout_kept(const Tensor& g, const Tensor& keep_bits, double p) {
  Tensor y;
  {
    NoGradGuard guard;
    y = dropout_apply_kept(g, keep_bits, p);
  }
  if (needs_grad({g}))
    record("dropout_backward", {g}, y,
           [keep_bits, p](const Tensor& gg, auto&) { return Grads{dropout_kept(gg, keep_bits, p)}; });
  return y;
}
}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  MT_CHECK(p >= 0 && p <= 1, "dropout", "probability must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  MT_CHECK(is_floating(x.dtype()), "dropout", "expected a floating-point input, got ", describe({x}));
  if (p == 1) return x * 0.0;
  // The mask of one draw from the default generator (dropout_mask(x.sizes(), p) of the same
  // draw), applied as it is drawn; backward keeps its keep bits, 1 bit per element.
  Tensor keep_bits, y;
  {
    NoGradGuard guard;
    y = dropout_with_seed(x, p, default_generator().next_u64(), &keep_bits);
  }
  if (needs_grad({x}))
    record("dropout", {x}, y, [keep_bits, p](const Tensor& g, auto&) { return Grads{dropout_kept(g, keep_bits, p)}; });
  return y;
}

}  // namespace functional
}  // namespace mantissa::nn
