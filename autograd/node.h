// The autograd graph. Every differentiable op that sees an input requiring grad
// records one Node for its (single) output; the node holds the edges to the nodes
// of its inputs and a backward closure over the tensors it saved (micrograd-style).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/tensor_methods.h"
#include "core/autograd_meta.h"
#include "core/tensor.h"

namespace mantissa::autograd {

struct ViewWindow;

struct Node : std::enable_shared_from_this<Node> {
  Node();
  virtual ~Node();  // iterative: freeing a very deep graph must not recurse once per node
  virtual std::string name() const = 0;
  // Gradients w.r.t. each input, given the gradient of the output.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // Frees saved tensors once backward no longer needs them (retain_graph=false).
  virtual void release() {}
  // What the engine runs for the gradient summed at this node: the pre-hooks (which may
  // replace `grad`, updated in place) and retain_grad, then, when `apply_node`, apply() with
  // current_node() set, inside a profiler range named after the node while profiling.
  std::vector<Tensor> call(Tensor& grad, bool create_graph, bool apply_node = true);

  std::vector<std::shared_ptr<Node>> next;  // one per input; null where no grad is needed
  std::vector<Hook> pre_hooks;              // hooks registered on the output tensor
  std::weak_ptr<TensorImpl> retained;       // output whose .grad should be kept (retain_grad)
  uint64_t sequence;                        // creation order, for a stable topological order
  bool released = false;
  // A cast's node (Tensor::to): the gradient it returns for its input may stay in the narrower
  // dtype it arrived in (bf16/fp16 for an fp32 input); the engine widens it to this dtype
  // (exactly) unless the node it flows into reads narrow gradients (below) and nothing else sees
  // it there (hooks, retain_grad, autograd::grad's captures, a sum with another gradient).
  std::optional<DType> defers_widening_to;
  // apply() takes a gradient narrower than its output's dtype as the exactly widened values
  // (softmax's backward reads a bf16 gradient in its kernel: no fp32 copy of it is made).
  bool reads_narrow_grad = false;
  // A select / slice view's node: apply() returns the view's own gradient and the engine puts it
  // in this window of the input's gradient, together with the other windows of the same input
  // that reach it (sum_windows), or alone into zeros when a graph of the backward is built.
  std::shared_ptr<const ViewWindow> grad_window;
};

// While it lives, on this thread, FunctionNode::apply asks only for the gradients of edges into
// `needed` (the engine's set for autograd::grad: the nodes that lead to a requested input);
// null: every edge with a node. Restores the previous set (a backward run inside a hook).
class NeededNodesScope {
 public:
  explicit NeededNodesScope(const std::unordered_set<Node*>* needed);
  ~NeededNodesScope();
  NeededNodesScope(const NeededNodesScope&) = delete;
  NeededNodesScope& operator=(const NeededNodesScope&) = delete;

 private:
  const std::unordered_set<Node*>* previous_;
};

// The node that gradients for `t` flow into: its grad_fn, or a leaf's accumulator.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

// The closure type of op backward formulas: grads for each input, given the output grad.
// `needs[i]` says whether input i wants a gradient (skip work where it does not).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad, const std::vector<bool>& needs)>;

// The one naming rule of backward nodes: the op's name in CamelCase + "Backward" ("linear" ->
// "LinearBackward", "max_pool2d_backward" -> "MaxPool2dBackwardBackward").
std::string backward_node_name(const std::string& op);

// The node an op records (record() in autograd/op_helpers.h), named after the op by the rule above.
struct FunctionNode final : Node {
  FunctionNode(const std::string& op, BackwardFn fn) : name_(backward_node_name(op)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override;

 private:
  std::string name_;
  BackwardFn fn_;
};

struct AccumulateGrad final : Node {
  explicit AccumulateGrad(const Tensor& leaf) : leaf_(leaf.impl_ptr()) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(const Tensor& grad) override;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// True when grad mode is on and any input requires grad: the op must record a node.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// Makes `output` a non-leaf produced by `fn` from `inputs` (call only when needs_grad); `name`
// is the op's own name ("mul", "linear"): the node is named <Op>Backward from it.
// Returns the node, for the flags above.
Node& record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn fn);

// A tensor kept for backward. Detects in-place modification through the version counter.
// Outputs are stored without their grad_fn (no reference cycle); the engine restores it
// when a graph of the backward pass is being built (create_graph).
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output = false);
  Tensor unpack() const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
  bool is_output_ = false;
};

// Runs backward from `roots` seeded with `grads` (ones for scalar roots when undefined).
// With `inputs`, returns their gradients instead of accumulating into .grad (autograd::grad).
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
                                 bool create_graph, const std::vector<Tensor>& inputs = {});

// The node being executed by the engine on this thread (null outside backward).
Node* current_node();

// Gradients of `outputs` w.r.t. `inputs` (torch.autograd.grad). Unreached inputs get
// undefined tensors unless allow_unused is false, which throws. As in torch, only the nodes on
// a path to an input run (hooks of the others do not), each asked only for those gradients.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// Registers `hook(leaf)`, called after AccumulateGrad has added a backward pass's gradient
// into leaf.grad (gradient bucketing for data parallelism reads .grad from here).
void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook);
// Runs `callback` when the backward pass running on this thread finishes its graph (before
// run_backward returns); outside backward it throws. Used to flush work started by hooks.
void queue_callback(std::function<void()> callback);

// Where AccumulateGrad raises the non-finite flag while it accumulates leaf gradients.
// amp::GradScaler installs one for the duration of scaler.backward(), so the overflow
// check costs no extra pass over the gradients.
struct FoundInfSink {
  virtual ~FoundInfSink() = default;
  // A float32 [1] flag on `device`; set to 1 when a non-finite gradient is accumulated.
  virtual Tensor flag_for(Device device) = 0;
  // Called with a leaf's .grad right after a checked accumulation into it (its version then
  // is what was checked): later writes bump the version, so the sink can tell them apart.
  virtual void checked(const Tensor& grad) { (void)grad; }
};
void set_found_inf_sink(FoundInfSink* sink);  // thread-local; null to remove
FoundInfSink* found_inf_sink();

}  // namespace mantissa::autograd
