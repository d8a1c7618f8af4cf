// leaky_relu, elu, hardtanh and prelu (a learnable slope). leaky_relu and elu run their list
// entries' kernels (core/elementwise_math.h) and hardtanh clamp's; each records one node whose
// backward is one fused kernel of the binary list (leaky_relu_backward, ...), or, when a graph of
// the backward is built, the same formula composed of differentiable ops. PyTorch's gradient at
// the kinks: leaky_relu takes the slope at 0, elu alpha at 0, hardtanh 0 at both bounds; at NaN
// each passes what PyTorch's does.
#include <cmath>

#include "amp/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/op_helpers.h"

// PyTorch's CUDA autocast runs prelu in fp16 / bf16 (its lower-precision list).
MT_DECLARE_CAST_POLICY(prelu, LowerPrecision);

namespace mantissa {

using namespace detail;

namespace {
// One floating activation: y = the unary list entry `op` with scalars (a, b), and one node whose
// backward is the binary list entry `backward` with the same scalars, or `composite(g, x)` (made of
// differentiable ops, so double backward works) when a graph of the backward is built.
template <typename Composite>
Tensor activation(const char* name, const Tensor& x, UnaryOp op, BinaryOp backward, double a, double b,
                  Composite composite) {
  MT_CHECK(x.defined(), name, "got an undefined tensor");
  // Pass-through under autocast (no entry: they run in their input's dtype, as PyTorch).
  MT_CHECK(is_floating(x.dtype()), name, "expected a floating-point input, got ", describe({x}));
  Tensor y = launch::unary(op, x, a, b);
  if (needs_grad({x})) {
    record(name, {x}, y, [sx = SavedTensor(x), backward, a, b, composite](const Tensor& g, const std::vector<bool>&) {
      const Tensor x = sx.unpack();
      return Grads{fused_backward(
          backward, g, x, [&] { return composite(g, x); }, a, b)};
    });
  }
  return y;
}

// A 0-dim constant of x's dtype and device: broadcast, not filled to x's shape, so an ONNX export
// keeps it one value and the batch dimension dynamic.
Tensor scalar_like(const Tensor& x, double v) { return full({}, v, {.dtype = x.dtype(), .device = x.device()}); }
}  // namespace

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return activation(
      "leaky_relu", x, UnaryOp::LeakyRelu, BinaryOp::LeakyReluBackward, negative_slope, 0,
      [negative_slope](const Tensor& g, const Tensor& x) { return where(x > 0.0, g, g * negative_slope); });
}

Tensor elu(const Tensor& x, double alpha) {
  return activation("elu", x, UnaryOp::Elu, BinaryOp::EluBackward, alpha, 0, [alpha](const Tensor& g, const Tensor& x) {
    // alpha exp(x) where x <= 0 (the exp is taken of min(x, 0) only, so it never overflows);
    // NaN at NaN, as PyTorch.
    Tensor neg = minimum(x, scalar_like(x, 0));
    return where(x > 0.0, g, g * exp(neg) * alpha);
  });
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  MT_CHECK(min_val <= max_val, "hardtanh", "min_val (", min_val, ") must not exceed max_val (", max_val, ")");
  if (x.defined() && (x.dtype() == DType::Int64 || x.dtype() == DType::Int32))  // PyTorch clamps these too
    return where(x < min_val, scalar_like(x, min_val), where(x > max_val, scalar_like(x, max_val), x));
  // clamp's kernel: NaN passes through, as in PyTorch.
  return activation("hardtanh", x, UnaryOp::Clamp, BinaryOp::HardtanhBackward, min_val, max_val,
                    [min_val, max_val](const Tensor& g, const Tensor& x) {
                      // g inside the open interval, 0 at and beyond the bounds and at NaN (PyTorch's).
                      return where(logical_and(x > min_val, x < max_val), g, zeros_like(g));
                    });
}

Tensor prelu(const Tensor& x0, const Tensor& weight0) {
  MT_CHECK(x0.defined() && weight0.defined(), "prelu", "got an undefined tensor");
  auto in = amp::autocast_many(autocast_prelu, {x0, weight0});
  const Tensor &x = in[0], &w = in[1];
  MT_CHECK(is_floating(x.dtype()) && is_floating(w.dtype()), "prelu", "expected floating-point tensors, got ",
           describe({x, w}));
  const int64_t channels = x.dim() >= 2 ? x.size(1) : (x.dim() == 1 ? x.size(0) : 1);
  MT_CHECK(w.dim() == 1 && (w.size(0) == 1 || w.size(0) == channels), "prelu", "weight must be [1] or [", channels,
           "] (the channels of dim ", x.dim() >= 2 ? 1 : 0, "), got ", describe({x, w}));
  launch::check_same_device("prelu", {x, w});
  // The slope broadcast along the channel dim: [C, 1, ..., 1] against [N, C, ...].
  Tensor wb = w;
  if (x.dim() == 0) {
    wb = w.reshape({});
  } else if (w.size(0) > 1 || x.dim() >= 2) {
    Shape s(size_t(std::max<int64_t>(x.dim() - 1, 1)), 1);
    s[0] = w.size(0);
    wb = w.reshape(s);
  }
  return where(x > 0.0, x, wb * x);
}

}  // namespace mantissa
