// The autograd methods of Tensor that reach the graph (declared in core/tensor.h): backward, hooks.
#include "autograd/node.h"
#include "core/error.h"

namespace mantissa {

using autograd::meta;
using autograd::meta_if;

void Tensor::backward(Key, const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::run_backward({*this}, {gradient}, retain_graph || create_graph, create_graph);
}

void Tensor::register_hook(Key, std::function<Tensor(const Tensor&)> hook) const {
  MT_CHECK(requires_grad(), "register_hook", "cannot register a hook on a tensor that does not require grad");
  if (auto fn = grad_fn())
    fn->pre_hooks.push_back(std::move(hook));
  else
    meta(*this).hooks.push_back(std::move(hook));
}

void Tensor::retain_grad(Key) const {
  MT_CHECK(requires_grad(), "retain_grad", "cannot retain the grad of a tensor that does not require grad");
  if (auto fn = grad_fn()) fn->retained = impl_ptr();
}

}  // namespace mantissa
