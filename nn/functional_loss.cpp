// Losses: cross_entropy (fused log-softmax + NLL kernel, forward and backward),
// nll_loss and mse_loss (differentiable compositions), binary_cross_entropy_with_logits
// (one op with an exact backward, also at logits of exactly 0). All run in fp32 under
// autocast (declared below).
#include "core/index_check.h"
#include "nn/functional_detail.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(cross_entropy, Fp32);
MT_DECLARE_CAST_POLICY(nll_loss, Fp32);
MT_DECLARE_CAST_POLICY(mse_loss, Fp32);
MT_DECLARE_CAST_POLICY(binary_cross_entropy_with_logits, Fp32);

namespace mantissa::nn {

using namespace detail;

namespace {

Tensor reduce(const Tensor& l, Reduction r) {
  switch (r) {
    case Reduction::None:
      return l;
    case Reduction::Sum:
      return sum(l);
    case Reduction::Mean:
      return mean(l);
  }
  return l;
}

// Checks input [N, C, d...] (or [C]) against class-index target [N, d...] (or []); returns C.
int64_t check_class_target(const char* op, const Tensor& x, const Tensor& target, const Tensor& weight) {
  MT_CHECK(x.defined() && x.dim() >= 1 && is_floating(x.dtype()), op,
           "expected a floating-point input of shape [N, C, ...] or [C], got ", describe({x}));
  MT_CHECK(target.defined() && (target.dtype() == DType::Int64 || target.dtype() == DType::Int32), op,
           "target must hold class indices (int64 or int32), got ", describe({target}),
           target.defined() && is_floating(target.dtype()) ? " (class-probability targets are not supported)" : "");
  Shape expected;
  if (x.dim() >= 2) {
    expected.push_back(x.size(0));
    expected.insert(expected.end(), x.sizes().begin() + 2, x.sizes().end());
  }
  MT_CHECK(target.sizes() == expected, op, "target ", describe({target}), " does not match input ", describe({x}),
           " (expected a target of shape ", shape_str(expected), ")");
  const int64_t C = x.dim() == 1 ? x.size(0) : x.size(1);
  MT_CHECK(!weight.defined() || (weight.dim() == 1 && weight.size(0) == C && is_floating(weight.dtype())), op,
           "weight must be a floating [", C, "] tensor, got ", describe({weight}));
  launch::check_same_device(op, {x, target, weight});
  return C;
}

// Logits [N, C, d...] as rows [M, C] (class dim last), differentiable.
Tensor as_rows(const Tensor& x, int64_t C) {
  if (x.dim() <= 2) return x.reshape({-1, C});
  Shape perm{0};
  for (int64_t d = 2; d < x.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return x.permute(perm).reshape({-1, C});
}

// Logits [N, C, d...] for the cross_entropy kernel without a copy: the class-strided view
// [N, S, C] of their storage (S the positions d...; a non-contiguous input copied first), or
// rows [M, C] for an [N, C] or [C] input.
Tensor kernel_logits(const Tensor& x, int64_t C) {
  if (x.dim() <= 2) return launch::contiguous(x.reshape({-1, C}));
  int64_t S = 1;
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  return launch::contiguous(x).reshape({x.size(0), C, S}).transpose(1, 2);
}

// The inverse of as_rows for a gradient [M, C].
Tensor from_rows(const Tensor& rows, const Shape& x_shape) {
  if (x_shape.size() <= 2) return rows.reshape(x_shape);
  Shape moved{x_shape[0]};
  for (size_t d = 2; d < x_shape.size(); ++d) moved.push_back(x_shape[d]);
  moved.push_back(x_shape[1]);
  Shape inv{0, int64_t(x_shape.size()) - 1};
  for (size_t d = 2; d < x_shape.size(); ++d) inv.push_back(int64_t(d) - 1);
  return rows.reshape(moved).permute(inv).contiguous();
}

// Summed class weight of the targets that are not ignored (the divisor of a mean).
Tensor counted_weight(const Tensor& tgt, const Tensor& wA, int64_t ignore_index, DType A) {
  Tensor valid = tgt != ignore_index;
  if (!wA.defined()) return sum(valid.to(A));
  Tensor safe = where(valid, tgt, zeros_like(tgt));
  return sum(index_select(wA, 0, safe) * valid.to(A));
}

}  // namespace

namespace functional {

Tensor cross_entropy(const Tensor& input0, const Tensor& target, const CrossEntropyOptions& o) {
  auto in = amp::autocast_many(autocast_cross_entropy, {input0, o.weight});
  const Tensor &x = in[0], &weight = in[1];
  const int64_t C = check_class_target("cross_entropy", x, target, weight);
  MT_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, "cross_entropy", "label_smoothing must be in [0, 1], got ",
           o.label_smoothing);
  const DType A = acc_type(x.dtype());
  Tensor logits, tgt, wA = plain(weight, A);
  {
    NoGradGuard guard;
    logits = kernel_logits(x, C);
    tgt = launch::contiguous(launch::cast(target, DType::Int64)).reshape({-1});
  }
  launch::check_index_range("cross_entropy", "target", tgt, C, &o.ignore_index, std::to_string(C) + " classes");
  const int64_t M = tgt.numel();
  Tensor loss = make_tensor({M}, A, x.device()), lse = make_tensor({M}, A, x.device());
  kernel(x, "cross_entropy", &NnKernels::cross_entropy)(logits, tgt, wA, o.ignore_index, o.label_smoothing, loss, lse);
  Tensor y, denom;
  {
    NoGradGuard guard;
    if (o.reduction == Reduction::None) {
      y = loss.reshape(target.sizes());
    } else if (o.reduction == Reduction::Sum) {
      y = sum(loss);
    } else {
      denom = counted_weight(tgt, wA, o.ignore_index, A);
      y = sum(loss) / denom;
    }
    if (y.dtype() != x.dtype()) y = y.to(x.dtype());
  }
  if (needs_grad({x})) {
    record(
        "cross_entropy", {x}, y,
        [sx = SavedTensor(x), slogits = SavedTensor(logits), tgt, wA, lse, denom, o, C, M, A](const Tensor& g, auto&) {
          const Reduction r = o.reduction;
          Tensor grow = r == Reduction::None ? g.reshape({M}).to(A)
                                             : (r == Reduction::Sum ? g.to(A) : g.to(A) / denom).expand({M});
          Tensor x = sx.unpack();
          const double s = o.label_smoothing;
          if (GradMode::is_enabled()) {
            // The same gradient with differentiable ops (create_graph).
            Tensor valid = tgt != o.ignore_index;
            Tensor safe = where(valid, tgt, zeros_like(tgt));
            Tensor wt = wA.defined() ? index_select(wA, 0, safe) : ones({M}, {.dtype = A, .device = x.device()});
            const double wsum = wA.defined() ? wA.sum().item<double>() : double(C);
            Tensor target_term = (wt * (1 - s)).unsqueeze(1);
            Tensor a = target_term + s / double(C) * wsum;
            Tensor smooth = wA.defined() ? (wA * (s / double(C))).unsqueeze(0)
                                         : full({1, C}, s / double(C), {.dtype = A, .device = x.device()});
            Tensor p = softmax(as_rows(x, C), 1);
            Tensor onehot = one_hot(safe, C).to(A);
            Tensor rows = (grow * valid.to(A)).unsqueeze(1) * (p * a - target_term * onehot - smooth);
            return Grads{from_rows(rows, x.sizes()).to(x.dtype())};
          }
          Tensor logits = slogits.unpack();
          // The gradient in x's own layout: [N, C, S] filled through the logits' view of it.
          Tensor gx = make_tensor(x.dim() <= 2 ? logits.sizes() : Shape{x.size(0), C, logits.size(1)}, logits.dtype(),
                                  logits.device());
          Tensor glog = x.dim() <= 2 ? gx : gx.transpose(1, 2);
          kernel(logits, "cross_entropy", &NnKernels::cross_entropy_backward)(launch::contiguous(grow), logits, tgt, wA,
                                                                              lse, o.ignore_index, s, glog);
          return Grads{gx.reshape(x.sizes())};
        });
  }
  return y;
}

Tensor nll_loss(const Tensor& input0, const Tensor& target, const NllLossOptions& o) {
  auto in = amp::autocast_many(autocast_nll_loss, {input0, o.weight});
  const Tensor &x0 = in[0], &weight = in[1];
  const int64_t C = check_class_target("nll_loss", x0, target, weight);
  Tensor x = x0.dim() == 1 ? x0.unsqueeze(0) : x0;
  Tensor t = launch::cast(target, DType::Int64);
  if (x0.dim() == 1) t = t.reshape({1});
  launch::check_index_range("nll_loss", "target", launch::contiguous(t), C, &o.ignore_index,
                            std::to_string(C) + " classes");
  // -w[t] * input[t] at each position, 0 where t is ignored; a mean divides by the summed w[t].
  Tensor valid = t != o.ignore_index;
  Tensor safe = where(valid, t, zeros_like(t));
  Tensor picked = gather(x, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor wt = valid.to(x.dtype());
  if (weight.defined()) wt = index_select(weight.to(x.dtype()), 0, safe.reshape({-1})).reshape(safe.sizes()) * wt;
  Tensor loss = -(picked * wt);
  if (x0.dim() == 1) loss = loss.reshape({});
  if (o.reduction == Reduction::None) return loss;
  if (o.reduction == Reduction::Sum) return sum(loss);
  // Every target ignored (summed weight 0): the loss is NaN as PyTorch's, but its gradient is 0
  // (as PyTorch's and the fused cross_entropy's), so an all-padding batch leaves the
  // parameters finite.
  Tensor total = sum(wt);
  Tensor none = total == 0.0;
  Tensor mean = sum(loss) / where(none, ones_like(total), total);
  return where(none, full_like(mean, NAN), mean);
}

Tensor mse_loss(const Tensor& input0, const Tensor& target0, Reduction reduction) {
  auto in = amp::autocast_many(autocast_mse_loss, {input0, target0});
  const Tensor &x = in[0], &y = in[1];
  MT_CHECK(x.defined() && y.defined() && x.sizes() == y.sizes(), "mse_loss",
           "input and target must have the same shape, got ", describe({x, y}));
  // An integer input against a float target computes, as in PyTorch.
  MT_CHECK(is_floating(promote_types(x.dtype(), y.dtype())), "mse_loss",
           "expected tensors that promote to a floating dtype, got ", describe({x, y}));
  const DType common = promote_types(x.dtype(), y.dtype());  // before subtracting (a bool input)
  Tensor d = x.to(common) - y.to(common);
  // square's backward is one pass, g 2d (d * d's took two products and their sum).
  return reduce(square(d), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input0, const Tensor& target0, const BceWithLogitsOptions& o) {
  auto in = amp::autocast_many(autocast_binary_cross_entropy_with_logits, {input0, target0, o.weight, o.pos_weight});
  const Tensor &x = in[0], &y = in[1], &w = in[2], &pw = in[3];
  const char* op = "binary_cross_entropy_with_logits";
  MT_CHECK(x.defined() && y.defined() && x.sizes() == y.sizes(), op,
           "target must have the same shape as the input, got ", describe({x, y}));
  MT_CHECK(is_floating(x.dtype()) && is_floating(y.dtype()), op, "expected floating-point input and target, got ",
           describe({x, y}));
  launch::check_same_device(op, {x, y, w, pw});
  if (w.defined()) broadcast_shapes(w.sizes(), x.sizes(), op);
  if (pw.defined()) broadcast_shapes(pw.sizes(), x.sizes(), op);
  // loss = (1 - y) x + lw * softplus(-x), lw = 1 + (pw - 1) y; softplus(-x) = max(-x, 0) + log1p(exp(-|x|)).
  auto softplus_neg = [](const Tensor& x) { return relu(-x) + log1p(exp(-abs(x))); };
  Tensor loss;
  {
    NoGradGuard guard;
    Tensor sp = softplus_neg(x);
    Tensor lw = pw.defined() ? (pw - 1.0) * y + 1.0 : Tensor();
    loss = (1.0 - y) * x + (lw.defined() ? lw * sp : sp);
    if (w.defined()) loss = loss * w;
    if (loss.sizes() != x.sizes()) loss = loss.contiguous();
  }
  MT_CHECK(loss.sizes() == x.sizes(), op,
           "weight or pos_weight would broadcast the loss beyond the input: ", describe({x, w, pw}));
  if (needs_grad({x, y, w, pw})) {
    record(op, {x, y, w, pw}, loss,
           [sx = SavedTensor(x), sy = SavedTensor(y), sw = SavedTensor(w), spw = SavedTensor(pw), softplus_neg](
               const Tensor& g, auto& need) {
             Tensor x = sx.unpack(), y = sy.unpack(), w = sw.unpack(), pw = spw.unpack();
             Tensor gw_ = w.defined() ? g * w : g;  // upstream gradient times the weight
             Tensor lw = pw.defined() ? (pw - 1.0) * y + 1.0 : Tensor();
             Tensor gx, gy, gweight, gpw;
             // d/dx = (1 - y) - lw * sigmoid(-x): exact at x = 0, where max(-x, 0) has no derivative.
             if (need[0]) gx = grad_for(gw_ * ((1.0 - y) - (lw.defined() ? lw : ones_like(x)) * sigmoid(-x)), x);
             Tensor sp = need[1] || need[2] || need[3] ? softplus_neg(x) : Tensor();
             if (need[1]) gy = grad_for(gw_ * (pw.defined() ? (pw - 1.0) * sp - x : -x), y);
             if (need[2]) gweight = grad_for(g * ((1.0 - y) * x + (lw.defined() ? lw * sp : sp)), w);
             if (need[3]) gpw = grad_for(gw_ * y * sp, pw);
             return Grads{gx, gy, gweight, gpw};
           });
  }
  return reduce(loss, o.reduction);
}

}  // namespace functional
}  // namespace mantissa::nn
