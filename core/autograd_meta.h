// The per-tensor autograd state (TensorImpl::autograd). It lives in core so that core's
// factories and printing can set and read requires_grad without linking autograd/, which
// defines the graph (autograd/node.h) and every method that records or runs it.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace mantissa::autograd {

struct Node;  // autograd/node.h
using Hook = std::function<Tensor(const Tensor&)>;

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;         // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // leaves: the node that writes .grad
  std::vector<Hook> hooks;               // leaves: gradient hooks
  // leaves: called with the leaf once its .grad holds this backward pass's contribution
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  bool is_view = false;  // shares storage with the tensor it was viewed from
  // AMP dual copy: the cached fp16/bf16 working copy of an fp32 master parameter.
  Tensor working_copy;
  uint64_t working_copy_version = 0;  // the master's version the copy was made from
};

AutogradMeta& meta(const Tensor& t);           // creates it when missing
const AutogradMeta* meta_if(const Tensor& t);  // null when missing

}  // namespace mantissa::autograd
