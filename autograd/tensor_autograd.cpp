// The autograd methods of Tensor (declared in core/tensor.h): requires_grad, grad, hooks, backward.
#include "autograd/node.h"
#include "core/error.h"

namespace mantissa {

using autograd::meta;
using autograd::meta_if;

bool Tensor::requires_grad() const {
  const auto* m = meta_if(*this);
  return m && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  MT_CHECK(is_leaf() || on, "requires_grad_", "you can only change requires_grad of leaf tensors");
  MT_CHECK(!on || is_floating(dtype()), "requires_grad_", "only floating-point tensors can require gradients, got ",
           dtype_name(dtype()));
  meta(*this).requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const {
  const auto* m = meta_if(*this);
  return !m || !m->grad_fn;
}

Tensor Tensor::grad() const {
  const auto* m = meta_if(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    MT_CHECK(g.sizes() == sizes(), "set_grad", "gradient of shape ", g.shape_str(),
             " does not match the tensor's shape ", shape_str());
  meta(*this).grad = g;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const auto* m = meta_if(*this);
  return m ? m->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::run_backward({*this}, {gradient}, retain_graph || create_graph, create_graph);
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  MT_CHECK(requires_grad(), "register_hook", "cannot register a hook on a tensor that does not require grad");
  if (auto fn = grad_fn())
    fn->pre_hooks.push_back(std::move(hook));
  else
    meta(*this).hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  MT_CHECK(requires_grad(), "retain_grad", "cannot retain the grad of a tensor that does not require grad");
  if (auto fn = grad_fn()) fn->retained = impl_ptr();
}

}  // namespace mantissa
