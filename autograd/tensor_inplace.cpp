// In-place tensor methods. Without autograd they write straight into the tensor's
// storage; when the result must be differentiable they compute out of place, copy the
// values in and move the tensor's history onto the new node (PyTorch's rebase).
#include "autograd/op_helpers.h"

namespace mantissa {

using namespace detail;

namespace {

void check_writable(const char* op, const Tensor& self, const Tensor& result) {
  MT_CHECK(result.sizes() == self.sizes(), op, "output with shape ", self.shape_str(),
           " doesn't match the broadcast shape ", result.shape_str());
  MT_CHECK(is_floating(self.dtype()) || !is_floating(result.dtype()), op, "result type ", dtype_name(result.dtype()),
           " can't be cast to the desired output type ", dtype_name(self.dtype()));
}

// Writes `result` into `self`, taking over its autograd history when it has one. A result
// without history (copy_ of a constant) cuts self off from its old history instead.
Tensor& assign_inplace(const char* op, Tensor& self, const Tensor& result) {
  check_writable(op, self, result);
  const bool tracked = result.requires_grad() && GradMode::is_enabled();
  const bool detached = !tracked && self.requires_grad() && GradMode::is_enabled();
  if (tracked || detached) {
    MT_CHECK(!(self.is_leaf() && self.requires_grad()), op,
             "a leaf tensor that requires grad is being used in an in-place operation (shape ", self.shape_str(), ")");
    const auto* m = autograd::meta_if(self);
    MT_CHECK(!(m && m->is_view) && self.impl()->storage.use_count() == 1, op,
             "in-place operations that record autograd history are not supported on views or on tensors "
             "whose storage is shared (shape ",
             self.shape_str(), "); use the out-of-place op");
  }
  backend_for(self.device()).copy(result, self);
  self.bump_version();
  if (tracked || detached) {
    auto& m = autograd::meta(self);
    m.requires_grad = tracked;
    m.grad_fn = tracked ? result.grad_fn() : nullptr;
  }
  return self;
}

// self = self (op) other, in place.
Tensor& binary_inplace(const char* op, Tensor& self, const Tensor& other, BinaryOp kind,
                       Tensor (*outofplace)(const Tensor&, const Tensor&), double s0 = 0) {
  if (!needs_grad({self, other})) {
    launch::check_same_device(op, {self, other});
    DType t = result_type(self, other);
    if (kind == BinaryOp::Div) t = float_type(t);
    Shape shape = broadcast_shapes(self.sizes(), other.sizes(), op);
    MT_CHECK(shape == self.sizes(), op, "output with shape ", self.shape_str(), " doesn't match the broadcast shape ",
             shape_str(shape));
    MT_CHECK(is_floating(self.dtype()) || !is_floating(t), op, "result type ", dtype_name(t),
             " can't be cast to the desired output type ", dtype_name(self.dtype()));
    Tensor o = other.dtype() == self.dtype() ? other : launch::cast(other, self.dtype());
    backend_for(self.device()).binary(kind, self, o, self, s0, 0);
    self.bump_version();
    return self;
  }
  // mul/div save self for other's gradient: give them a copy that the write below leaves intact.
  const bool saves_self = (kind == BinaryOp::Mul || kind == BinaryOp::Div) && other.requires_grad();
  return assign_inplace(op, self, outofplace(saves_self ? self.clone() : self, other));
}

Tensor add_plain(const Tensor& a, const Tensor& b) { return add(a, b); }

}  // namespace

Tensor& Tensor::add_(Key, const Tensor& o, const Scalar& alpha) {
  // self + alpha o in one pass where no graph is recorded (an EMA or a hand-written SGD step).
  if (alpha.to_double() != 1.0 && is_floating(dtype()) && is_floating(o.dtype()) && !needs_grad({*this, o}))
    return binary_inplace("add_", *this, o, BinaryOp::AddScaled, nullptr, alpha.to_double());
  Tensor b = alpha.to_double() == 1.0 ? o : o * alpha;
  return binary_inplace("add_", *this, b, BinaryOp::Add, add_plain);
}
Tensor& Tensor::add_(Key, const Scalar& s) { return add_(wrap_scalar(s, *this)); }
Tensor& Tensor::sub_(Key, const Tensor& o) { return add_(o, -1); }
Tensor& Tensor::sub_(Key, const Scalar& s) { return add_(wrap_scalar(s, *this), -1); }
Tensor& Tensor::mul_(Key, const Tensor& o) { return binary_inplace("mul_", *this, o, BinaryOp::Mul, mul); }
Tensor& Tensor::mul_(Key, const Scalar& s) { return mul_(wrap_scalar(s, *this)); }
Tensor& Tensor::div_(Key, const Tensor& o) { return binary_inplace("div_", *this, o, BinaryOp::Div, div); }
Tensor& Tensor::div_(Key, const Scalar& s) { return div_(wrap_scalar(s, *this)); }

Tensor& Tensor::clamp_(Key, const Scalar& lo, const Scalar& hi) {
  if (!needs_grad({*this})) {
    backend_for(device()).unary(UnaryOp::Clamp, *this, *this, lo.to_double(), hi.to_double());
    bump_version();
    return *this;
  }
  // clamp saves its input for backward: hand it a copy that the write below leaves intact.
  return assign_inplace("clamp_", *this, clamp(clone(), lo, hi));
}

Tensor& Tensor::masked_fill_(Key, const Tensor& mask, const Scalar& value) {
  return assign_inplace("masked_fill_", *this, masked_fill(*this, mask, value));
}

Tensor& Tensor::fill_(Key, const Scalar& value) {
  MT_CHECK(!(GradMode::is_enabled() && is_leaf() && requires_grad()), "fill_",
           "a leaf tensor that requires grad is being used in an in-place operation");
  backend_for(device()).fill(*this, value);
  bump_version();
  if (requires_grad() && !is_leaf()) {
    // The values no longer depend on the old history.
    auto& m = autograd::meta(*this);
    m.grad_fn = nullptr;
    m.requires_grad = false;
  }
  return *this;
}

Tensor& Tensor::zero_(Key) { return fill_(0); }

Tensor& Tensor::copy_(Key, const Tensor& src) {
  broadcast_shapes(sizes(), src.sizes(), "copy_");
  if (!needs_grad({src}) && !(GradMode::is_enabled() && requires_grad())) {
    Shape shape = broadcast_shapes(sizes(), src.sizes(), "copy_");
    MT_CHECK(shape == sizes(), "copy_", "source of shape ", src.shape_str(), " does not broadcast to ", shape_str());
    if (src.device() == device())
      backend_for(device()).copy(src, *this);
    else
      backend_for(device().is_cpu() ? src.device() : device())
          .copy(launch::contiguous(src).expand(sizes()).contiguous(), *this);
    bump_version();
    return *this;
  }
  Tensor s = src.to(device()).to(dtype()).expand(sizes());
  Tensor result = s.clone();
  return assign_inplace("copy_", *this, result);
}

}  // namespace mantissa
