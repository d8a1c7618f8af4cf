// Losses composed of differentiable ops (so they run on every device): l1, smooth-l1, Huber,
// binary cross-entropy on probabilities (one node with PyTorch's backward), KL divergence,
// margin ranking and cosine embedding. All run in fp32 under autocast, as in PyTorch's CUDA list;
// binary_cross_entropy is refused where PyTorch refuses it (see binary_cross_entropy).
#include "nn/functional_detail.h"

MT_DECLARE_CAST_POLICY(l1_loss, Fp32);
MT_DECLARE_CAST_POLICY(smooth_l1_loss, Fp32);
MT_DECLARE_CAST_POLICY(huber_loss, Fp32);
MT_DECLARE_CAST_POLICY(binary_cross_entropy, Fp32);
MT_DECLARE_CAST_POLICY(kl_div, Fp32);
MT_DECLARE_CAST_POLICY(margin_ranking_loss, Fp32);
MT_DECLARE_CAST_POLICY(cosine_embedding_loss, Fp32);

namespace mantissa::nn {

using namespace detail;

namespace {

Tensor reduce(const Tensor& l, Reduction r) {
  if (r == Reduction::Sum) return sum(l);
  if (r == Reduction::Mean) return mean(l);
  return l;
}

// Autocasts input and target and checks that they have one shape and promote to a floating
// dtype (an integer input against a float target computes, as in PyTorch).
std::vector<Tensor> pointwise_pair(const amp::OpPolicy& policy, const Tensor& input, const Tensor& target) {
  const char* op = policy.name();
  MT_CHECK(input.defined() && target.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(policy, {input, target});
  MT_CHECK(in[0].sizes() == in[1].sizes(), op, "input and target must have the same shape, got ",
           describe({in[0], in[1]}));
  MT_CHECK(is_floating(promote_types(in[0].dtype(), in[1].dtype())), op,
           "expected tensors that promote to a floating dtype, got ", describe({in[0], in[1]}));
  launch::check_same_device(op, {in[0], in[1]});
  const DType common = promote_types(in[0].dtype(), in[1].dtype());  // before subtracting (a bool input)
  for (Tensor& t : in)
    if (t.dtype() != common) t = t.to(common);
  return in;
}

// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta > 0): smooth-l1; Huber is beta
// times it. One kernel (the list's smooth_l1) and one node whose backward is the fused
// smooth_l1_backward, g clamp(d / beta, -1, 1) (PyTorch's, NaN at NaN), or that formula composed
// when a graph of the backward is built.
Tensor smooth_l1(const Tensor& d, double beta) {
  Tensor y = launch::unary(UnaryOp::SmoothL1, d, beta, 0);
  if (needs_grad({d})) {
    record("smooth_l1", {d}, y, [sd = SavedTensor(d), beta](const Tensor& g, const std::vector<bool>&) {
      const Tensor d = sd.unpack();
      return Grads{mantissa::detail::fused_backward(
          BinaryOp::SmoothL1Backward, g, d, [&] { return g * clamp(d / beta, -1.0, 1.0); }, beta)};
    });
  }
  return y;
}

}  // namespace

namespace functional {

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  // PyTorch refuses a bool input here (and not in mse or smooth-l1 loss): so does Mantissa.
  MT_CHECK(input.dtype() != DType::Bool && target.dtype() != DType::Bool, "l1_loss",
           "subtraction with a bool tensor is not supported, got ", describe({input, target}));
  auto in = pointwise_pair(autocast_l1_loss, input, target);
  return reduce(abs(in[0] - in[1]), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  MT_CHECK(beta >= 0, "smooth_l1_loss", "beta must be >= 0, got ", beta);
  auto in = pointwise_pair(autocast_smooth_l1_loss, input, target);
  Tensor d = in[0] - in[1];
  // beta = 0 is l1_loss, with its gradient 0 at d = 0 (PyTorch's smooth-l1 kernel gives -1 there,
  // to the input and to the target alike).
  return reduce(beta == 0 ? abs(d) : smooth_l1(d, beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  MT_CHECK(delta > 0, "huber_loss", "delta must be > 0, got ", delta);
  auto in = pointwise_pair(autocast_huber_loss, input, target);
  return reduce(delta * smooth_l1(in[0] - in[1], delta), reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BceOptions& o) {
  const char* op = "binary_cross_entropy";
  MT_CHECK(input.defined() && target.defined(), op, "got an undefined tensor");
  // PyTorch's CUDA autocast refuses this op (fp16 or bf16), and its CPU autocast is bf16 only:
  // probabilities that came out of a low-precision sigmoid lose the tails the logs need.
  const amp::AutocastState& ac = amp::autocast_state();
  MT_CHECK(!amp::autocast_applies(input.device().type) || (ac.dtype != DType::Float16 && input.device().is_cpu()), op,
           "binary_cross_entropy (and nn::BCELoss) is unsafe to autocast (", dtype_name(ac.dtype), " on ",
           input.device().str(),
           "): a sigmoid right before it loses the precision its logs need. Combine the two with "
           "binary_cross_entropy_with_logits (nn::BCEWithLogitsLoss), which is safe to autocast, or compute "
           "this loss outside the autocast region");
  auto in = amp::autocast_many(autocast_binary_cross_entropy, {input, target, o.weight});
  const Tensor &x = in[0], &y = in[1], &w = in[2];
  MT_CHECK(x.sizes() == y.sizes(), op, "target must have the same shape as the input, got ", describe({x, y}));
  MT_CHECK(is_floating(x.dtype()) && is_floating(y.dtype()) && (!w.defined() || is_floating(w.dtype())), op,
           "expected floating-point input, target and weight, got ", describe({x, y, w}));
  launch::check_same_device(op, {x, y, w});
  if (w.defined())
    MT_CHECK(broadcast_shapes(w.sizes(), x.sizes(), op) == x.sizes(), op,
             "weight must broadcast to the input's shape, got ", describe({x, w}));
  {
    NoGradGuard guard;
    // As PyTorch: every probability must lie in [0, 1] (NaN included in the refusal).
    const Tensor outside = logical_not(logical_and(x >= 0.0, x <= 1.0));
    const int64_t bad = x.numel() == 0 ? 0 : sum(outside.to(DType::Int64)).item<int64_t>();
    MT_CHECK(bad == 0, op, "all elements of input should be between 0 and 1 (", bad, " are not, or are NaN) in ",
             describe({x}));
  }
  Tensor loss;
  {
    NoGradGuard guard;
    Tensor lx = maximum(log(x), wrap_scalar(-100.0, x)), l1x = maximum(log1p(-x), wrap_scalar(-100.0, x));
    loss = -(y * lx + (1.0 - y) * l1x);
    if (w.defined()) loss = loss * w;
  }
  // As in PyTorch, the weight receives no gradient.
  if (needs_grad({x, y})) {
    record(op, {x, y}, loss,
           [sx = SavedTensor(x), sy = SavedTensor(y), sw = SavedTensor(w)](const Tensor& g, auto& need) {
             Tensor x0 = sx.unpack(), y0 = sy.unpack(), w = sw.unpack();
             // In fp32 for half inputs: eps (1e-12) is 0 in fp16, and x (1 - x) underflows.
             const bool half = x0.dtype() == DType::Float16 || x0.dtype() == DType::BFloat16;
             Tensor x = half ? x0.to(DType::Float32) : x0, y = half ? y0.to(DType::Float32) : y0;
             Tensor gw = w.defined() ? g.to(x.dtype()) * w : g.to(x.dtype());
             Tensor gx, gy;
             // PyTorch's: (x - y) / max(x (1 - x), eps), finite at p = 0 and 1; its eps is the float
             // nearest 1e-12.
             const double eps = double(1e-12f);
             if (need[0]) gx = grad_for(gw * (x - y) / maximum(x * (1.0 - x), wrap_scalar(eps, x)), x0);
             // PyTorch's target gradient has no clamp: +-inf at p = 0 and 1.
             if (need[1]) gy = grad_for(gw * (log1p(-x) - log(x)), y0);
             return Grads{gx, gy};
           });
  }
  return reduce(loss, o.reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const KlDivOptions& o) {
  const char* op = "kl_div";
  MT_CHECK(input.defined() && target.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_kl_div, {input, target});
  const Tensor &x = in[0], &t = in[1];
  MT_CHECK(is_floating(x.dtype()) && is_floating(t.dtype()), op, "expected floating-point tensors, got ",
           describe({x, t}));
  launch::check_same_device(op, {x, t});
  broadcast_shapes(x.sizes(), t.sizes(), op);
  Tensor l;
  if (o.log_target) {
    l = exp(t) * (t - x);
  } else {
    // xlogy(t, t) - t x: 0 where t is 0 (the log only sees t != 0, so no 0 * -inf anywhere).
    Tensor nz = t != 0.0;
    Tensor tlogt = where(nz, t * log(where(nz, t, ones_like(t))), zeros_like(t));
    l = tlogt - t * x;
  }
  switch (o.reduction) {
    case KlDivReduction::None:
      return l;
    case KlDivReduction::Sum:
      return sum(l);
    case KlDivReduction::Mean:
      return mean(l);
    case KlDivReduction::BatchMean:
      return x.dim() == 0 ? sum(l) : sum(l) / double(x.size(0));
  }
  return l;
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                           Reduction reduction) {
  const char* op = "margin_ranking_loss";
  MT_CHECK(input1.defined() && input2.defined() && target.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_margin_ranking_loss, {input1, input2, target});
  MT_CHECK(is_floating(in[0].dtype()) && is_floating(in[1].dtype()), op, "expected floating-point inputs, got ",
           describe({in[0], in[1], in[2]}));
  launch::check_same_device(op, {in[0], in[1], in[2]});
  broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes(), op), in[2].sizes(), op);
  return reduce(relu(margin - in[2] * (in[0] - in[1])), reduction);
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target, double margin,
                             Reduction reduction) {
  const char* op = "cosine_embedding_loss";
  MT_CHECK(input1.defined() && input2.defined() && target.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_cosine_embedding_loss, {input1, input2, target});
  const Tensor &a = in[0], &b = in[1], &y = in[2];
  MT_CHECK(a.sizes() == b.sizes() && (a.dim() == 1 || a.dim() == 2) && y.dim() == a.dim() - 1 &&
               (a.dim() == 1 || y.size(0) == a.size(0)),
           op, "expected inputs [N, D] with a target [N], or [D] with a 0-dim target, got ", describe({a, b, y}));
  MT_CHECK(is_floating(a.dtype()) && is_floating(b.dtype()), op, "expected floating-point inputs, got ",
           describe({a, b, y}));
  launch::check_same_device(op, {a, b, y});
  // PyTorch's formula: eps = 1e-12 inside each squared magnitude.
  const int64_t d = a.dim() - 1;
  Tensor dot = sum(a * b, {d});
  Tensor m1 = sum(a * a, {d}) + 1e-12, m2 = sum(b * b, {d}) + 1e-12;
  Tensor cos = dot / sqrt(m1 * m2);
  Tensor zero = zeros_like(cos);
  Tensor pos = where(y == 1.0, 1.0 - cos, zero);
  Tensor neg = where(y == -1.0, relu(cos - margin), zero);
  return reduce(pos + neg, reduction);
}

}  // namespace functional
}  // namespace mantissa::nn
