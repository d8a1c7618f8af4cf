// scaled_dot_product_attention (one op, fused kernels forward and backward) and tril/triu.
#include <cmath>
#include <limits>

#include "amp/autocast.h"
#include "autograd/op_helpers.h"
#include "core/nn_kernels.h"
#include "core/random.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(scaled_dot_product_attention, LowerPrecision);

namespace mantissa {

using namespace detail;

namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";

template <typename Fn>
Fn nn_kernel(const Tensor& x, const char* op, Fn NnKernels::*entry) {
  Fn fn = nn_kernels_for(x.device(), op).*entry;
  MT_CHECK(fn != nullptr, op, "no kernel for ", x.device().str());
  return fn;
}

Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool upper) {
  MT_CHECK(x.defined() && x.dim() >= 2, op, "expected a tensor of at least 2 dims, got ",
           x.defined() ? x.shape_str() : "an undefined tensor");
  const int64_t R = x.size(-2), C = x.size(-1), G = R * C != 0 ? x.numel() / (R * C) : 0;
  Tensor xc = launch::contiguous(x);
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  if (y.numel() > 0)
    nn_kernel(x, op, &NnKernels::triangle)(make_view(xc, {G, R, C}, {R * C, C, 1}, xc.offset()),
                                           make_view(y, {G, R, C}, {R * C, C, 1}, 0), diagonal, upper);
  if (needs_grad({x})) {
    record(upper ? "triu" : "tril", {x}, y,
           [diagonal, upper](const Tensor& g, auto&) { return Grads{upper ? triu(g, diagonal) : tril(g, diagonal)}; });
  }
  return y;
}

// The attention mask as an additive acc-dtype tensor viewed as [b, h, L, S] strides in `g`.
Tensor additive_mask(const Tensor& mask, const Shape& lead, int64_t L, int64_t S, DType acc, AttentionGeometry& g,
                     const Tensor& q) {
  MT_CHECK(mask.dtype() == DType::Bool || is_floating(mask.dtype()), kSdpa,
           "attn_mask must be bool (true = attend) or floating (added to the scores), got ", describe({mask}));
  MT_CHECK(mask.device() == q.device(), kSdpa, "attn_mask is on ", mask.device().str(), ", the query on ",
           q.device().str());
  Shape full = lead;
  full.push_back(L);
  full.push_back(S);
  MT_CHECK(mask.dim() <= int64_t(full.size()), kSdpa, "attn_mask ", mask.shape_str(),
           " does not broadcast to the scores ", shape_str(full));
  MT_CHECK(broadcast_shapes(mask.sizes(), full, kSdpa) == full, kSdpa, "attn_mask ", mask.shape_str(),
           " does not broadcast to the scores ", shape_str(full));
  Tensor add;
  {
    NoGradGuard guard;
    if (mask.dtype() == DType::Bool) {
      add = zeros(mask.sizes(), {.dtype = acc, .device = mask.device()});
      add.masked_fill_(logical_not(mask), -std::numeric_limits<double>::infinity());
    } else {
      add = launch::cast(mask, acc);
    }
  }
  Tensor e = add.expand(full);
  // Leading dims except the last (the heads) must collapse into one stride; else materialize.
  const int64_t nlead = int64_t(lead.size());
  auto collapsible = [&](const Tensor& t) {
    int64_t prev = -1;  // last non-1 dim seen, walking outwards
    for (int64_t d = nlead - 2; d >= 0; --d) {
      if (t.size(d) == 1) continue;
      if (prev >= 0 && t.stride(d) != t.stride(prev) * t.size(prev)) return false;
      prev = d;
    }
    return true;
  };
  if (!collapsible(e)) e = e.contiguous();
  int64_t b_stride = 0;
  for (int64_t d = nlead - 2; d >= 0; --d)
    if (e.size(d) != 1) {
      b_stride = e.stride(d);
      break;
    }
  g.mask_strides[0] = b_stride;
  g.mask_strides[1] = nlead >= 1 ? e.stride(nlead - 1) : 0;
  g.mask_strides[2] = e.stride(nlead);
  g.mask_strides[3] = e.stride(nlead + 1);
  return e;
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, false); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, true); }

Tensor scaled_dot_product_attention(const Tensor& q0, const Tensor& k0, const Tensor& v0,
                                    const AttentionOptions& opts) {
  MT_CHECK(q0.defined() && k0.defined() && v0.defined(), kSdpa, "query, key and value must all be defined");
  auto in = amp::autocast_many(autocast_scaled_dot_product_attention, {q0, k0, v0});
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  MT_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kSdpa,
           "expected query [..., L, E], key [..., S, E] and value [..., S, Ev] of one rank >= 2, got ",
           describe({q, k, v}));
  MT_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), kSdpa,
           "expected query, key and value of one floating dtype, got ", describe({q, k, v}));
  const int64_t n = q.dim();
  const Shape lead(q.sizes().begin(), q.sizes().end() - 2);
  MT_CHECK(
      Shape(k.sizes().begin(), k.sizes().end() - 2) == lead && Shape(v.sizes().begin(), v.sizes().end() - 2) == lead,
      kSdpa, "query, key and value must share their leading (batch, head) dims, got ", describe({q, k, v}));
  MT_CHECK(k.size(n - 1) == q.size(n - 1), kSdpa, "query and key must have the same last dim E, got ",
           describe({q, k}));
  MT_CHECK(v.size(n - 2) == k.size(n - 2), kSdpa, "key and value must have the same length S, got ", describe({k, v}));
  MT_CHECK(opts.dropout_p >= 0 && opts.dropout_p < 1, kSdpa, "dropout_p must be in [0, 1), got ", opts.dropout_p);
  launch::check_same_device(kSdpa, {q, k, v});

  AttentionGeometry g;
  g.H = lead.empty() ? 1 : lead.back();
  g.B = lead.empty() ? 1 : shape_numel(Shape(lead.begin(), lead.end() - 1));
  g.L = q.size(n - 2);
  g.S = k.size(n - 2);
  g.E = q.size(n - 1);
  g.Ev = v.size(n - 1);
  g.scale = opts.scale ? *opts.scale : 1.0 / std::sqrt(double(std::max<int64_t>(g.E, 1)));
  g.causal = opts.is_causal;
  g.dropout_p = opts.dropout_p;
  if (g.dropout_p > 0) g.dropout_seed = default_generator().next_u64();
  const DType acc = q.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor mask = opts.attn_mask.defined() ? additive_mask(opts.attn_mask, lead, g.L, g.S, acc, g, q) : Tensor();

  const int64_t G = g.B * g.H;
  auto flat = [&](const Tensor& t) {
    Tensor c = launch::contiguous(t);
    return make_view(c, {G, t.size(n - 2), t.size(n - 1)}, {t.size(n - 2) * t.size(n - 1), t.size(n - 1), 1},
                     c.offset());
  };
  Tensor qf = flat(q), kf = flat(k), vf = flat(v);
  Shape out_shape = lead;
  out_shape.push_back(g.L);
  out_shape.push_back(g.Ev);
  Tensor out = make_tensor(out_shape, q.dtype(), q.device());
  Tensor lse = make_tensor({G, g.L}, acc, q.device());
  nn_kernel(q, kSdpa, &NnKernels::attention_forward)(qf, kf, vf, mask,
                                                     make_view(out, {G, g.L, g.Ev}, {g.L * g.Ev, g.Ev, 1}, 0), lse, g);
  if (needs_grad({q, k, v})) {
    record("scaled_dot_product_attention", {q, k, v}, out,
           [sq = SavedTensor(qf), sk = SavedTensor(kf), sv = SavedTensor(vf), mask, lse, g, lead](
               const Tensor& gy, const std::vector<bool>& need) {
             MT_CHECK(!GradMode::is_enabled(), kSdpa,
                      "double backward (create_graph=true) is not supported by the fused attention op");
             Tensor q = sq.unpack(), k = sk.unpack(), v = sv.unpack();
             const int64_t G = g.B * g.H;
             Tensor gyc = launch::cast(gy, q.dtype());
             Tensor gq = need[0] ? make_tensor(q.sizes(), q.dtype(), q.device()) : Tensor();
             Tensor gk = need[1] ? make_tensor(k.sizes(), k.dtype(), k.device()) : Tensor();
             Tensor gv = need[2] ? make_tensor(v.sizes(), v.dtype(), v.device()) : Tensor();
             nn_kernel(q, kSdpa, &NnKernels::attention_backward)(
                 make_view(gyc, {G, g.L, g.Ev}, {g.L * g.Ev, g.Ev, 1}, gyc.offset()), q, k, v, mask, Tensor(), lse, gq,
                 gk, gv, g);
             auto shaped = [&](const Tensor& t, int64_t rows, int64_t cols) {
               if (!t.defined()) return t;
               Shape s = lead;
               s.push_back(rows);
               s.push_back(cols);
               return t.reshape(s);
             };
             return Grads{shaped(gq, g.L, g.E), shaped(gk, g.S, g.E), shaped(gv, g.S, g.Ev)};
           });
  }
  return out;
}

}  // namespace mantissa
