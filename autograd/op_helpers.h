// Small helpers shared by the op definitions in autograd/ops_*.cpp.
#pragma once
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/shape.h"

namespace mantissa::detail {

using autograd::BackwardFn;
using autograd::needs_grad;
using autograd::record;
using autograd::SavedTensor;
using Grads = std::vector<Tensor>;

// The float type an op computes in for input dtype t (integers become float32).
inline DType float_type(DType t) { return is_floating(t) ? t : DType::Float32; }

// The dtype of a op b under PyTorch's rules, where 0-dim tensors act like Python scalars.
DType result_type(const Tensor& a, const Tensor& b);

// Brings a gradient back to an input's shape (undoing broadcasting) and dtype.
inline Tensor grad_for(const Tensor& g, const Shape& shape, DType dtype) {
  if (!g.defined()) return g;
  Tensor r = g.sizes() == shape ? g : sum_to(g, shape);
  return r.dtype() == dtype ? r : r.to(dtype);
}
inline Tensor grad_for(const Tensor& g, const Tensor& input) { return grad_for(g, input.sizes(), input.dtype()); }

// grad * f'(saved) through the fused binary-list kernel `op` (with the op's scalars s0, s1), or
// through `composite` (differentiable ops) when a graph of the backward is built.
template <typename Composite>
Tensor fused_backward(BinaryOp op, const Tensor& g, const Tensor& saved, Composite composite, double s0 = 0,
                      double s1 = 0) {
  if (GradMode::is_enabled()) return composite();
  return launch::binary(op, g, saved, g.dtype(), g.dtype(), s0, s1);
}

// "op: tensors of shape [..] (float32) and [..] (float16)" for error messages.
std::string describe(std::initializer_list<Tensor> ts);

}  // namespace mantissa::detail
