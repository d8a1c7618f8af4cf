// The backward engine: seeds the roots, counts each reachable node's consumers, then runs
// nodes in dependency order (latest-created first among the ready ones), summing the
// gradients that reach each node. What a node does with its gradient (hooks, retain_grad,
// apply) is Node::call (autograd/node.cpp).
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/view_window.h"
#include "core/error.h"
#include "core/profiler.h"

namespace mantissa::autograd {

namespace {

thread_local int t_backward_depth = 0;
thread_local std::vector<std::function<void()>> t_callbacks;

// One backward pass over the graph reachable from its roots.
struct GraphTask {
  std::vector<std::shared_ptr<Node>> roots;   // distinct root nodes
  std::unordered_map<Node*, Tensor> buffer;   // the gradient summed so far per node
  std::unordered_map<Node*, int> consumers;   // edges into each node not yet executed
  std::unordered_map<Node*, size_t> capture;  // autograd::grad inputs: node -> index
  std::vector<Tensor> captured;
  // With captures: the nodes from which a captured one is reachable (captured ones included).
  // No other node runs, and no node computes a gradient for an edge into another (a GAN's
  // gradient penalty asks for the input's gradient only: the weights' products are skipped).
  std::unordered_set<Node*> needed;
  // Nodes whose gradient so far is a cast's narrow one (Node::defers_widening_to): the dtype
  // it stands for.
  std::unordered_map<Node*, DType> narrow;
  // Views' gradients for a node, each in its window (Node::grad_window), not yet written into
  // one tensor: they are, together with the node's whole-tensor gradient in buffer (if any),
  // when the node runs (sum_windows).
  std::unordered_map<Node*, std::vector<WindowGradient>> windows;

  // `widen_to`: g is a cast's narrow gradient for a tensor of that dtype. A sum of gradients
  // adds every term widened (exactly), as when the cast's backward widened it itself.
  // `window`: g is the gradient of that window of n's tensor.
  void add_gradient(Node* n, Tensor g, std::optional<DType> widen_to = {},
                    const std::shared_ptr<const ViewWindow>& window = nullptr) {
    if (window) {
      windows[n].push_back({std::move(g), window});
      return;
    }
    Tensor& slot = buffer[n];
    if (!slot.defined()) {
      slot = g;
      if (widen_to) narrow[n] = *widen_to;
      return;
    }
    if (auto it = narrow.find(n); it != narrow.end()) {
      slot = slot.to(it->second);
      narrow.erase(it);
    }
    slot = slot + (widen_to ? g.to(*widen_to) : g);
  }

  // The gradient summed at n as n's apply() may take it: a narrow one widened unless n reads
  // narrow gradients and no hook, retain_grad, capture or view's gradient sees it; the views'
  // gradients added in their windows (rotary embeddings' q: q * cos and its two halves) in one
  // pass, not each scattered into zeros and added to the whole.
  Tensor take_gradient(Node* n) {
    Tensor g;
    if (auto it = buffer.find(n); it != buffer.end()) {
      g = std::move(it->second);
      buffer.erase(it);
    }
    auto views = windows.find(n);
    const bool has_views = views != windows.end();
    if (auto it = narrow.find(n); it != narrow.end()) {
      const bool keep =
          !has_views && n->reads_narrow_grad && n->pre_hooks.empty() && n->retained.expired() && !capture.contains(n);
      if (!keep) g = g.to(it->second);
      narrow.erase(it);
    }
    if (has_views) {
      g = sum_windows(views->second, g);
      windows.erase(views);
    }
    return g;
  }
};

// Each root's seed: the given gradient, or ones for a scalar root.
void seed_roots(GraphTask& task, const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds) {
  std::unordered_set<Node*> seen;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    MT_CHECK(r.requires_grad(), "backward", "element ", i,
             " of tensors does not require grad and does not have a grad_fn");
    Tensor seed = i < seeds.size() ? seeds[i] : Tensor();
    if (!seed.defined()) {
      MT_CHECK(r.numel() == 1, "backward", "grad can be implicitly created only for scalar outputs; got shape ",
               r.shape_str(), " (pass a gradient)");
      seed = ones_like(r);
    } else {
      MT_CHECK(seed.sizes() == r.sizes(), "backward", "gradient of shape ", seed.shape_str(),
               " does not match the output shape ", r.shape_str());
    }
    std::shared_ptr<Node> node = gradient_edge(r);
    task.add_gradient(node.get(), seed);
    if (seen.insert(node.get()).second) task.roots.push_back(std::move(node));
  }
}

// autograd::grad: the inputs whose gradients are returned instead of accumulated.
void capture_inputs(GraphTask& task, const std::vector<Tensor>& inputs) {
  task.captured.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    MT_CHECK(inputs[i].requires_grad(), "grad", "input ", i, " does not require grad");
    task.capture[gradient_edge(inputs[i]).get()] = i;
  }
}

// Whether an edge of n leads to a requested input (task.needed, as far as it is marked).
bool any_needed_edge(const GraphTask& task, const Node* n) {
  for (auto& nx : n->next)
    if (nx && task.needed.contains(nx.get())) return true;
  return false;
}

// task.needed, by a post-order walk from the roots (iterative: a graph may be 100k nodes deep).
void mark_needed(GraphTask& task) {
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;  // a node and the next of its edges to visit
  for (auto& r : task.roots)
    if (seen.insert(r.get()).second) stack.emplace_back(r.get(), 0);
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->next.size()) {
      Node* child = n->next[i++].get();
      if (child && seen.insert(child).second) stack.emplace_back(child, 0);
      continue;
    }
    if (task.capture.contains(n) || any_needed_edge(task, n)) task.needed.insert(n);
    stack.pop_back();
  }
}

void count_consumers(GraphTask& task) {
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& n : task.roots)
    if (seen.insert(n.get()).second) stack.push_back(n.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& nx : n->next) {
      if (!nx) continue;
      task.consumers[nx.get()]++;
      if (seen.insert(nx.get()).second) stack.push_back(nx.get());
    }
  }
}

// Runs every node once all its consumers ran; the latest-created ready node first, which
// finishes a branch before moving on, like PyTorch.
void execute(GraphTask& task, bool retain_graph, bool create_graph) {
  auto later_first = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence < b->sequence;
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, decltype(later_first)> ready(
      later_first);
  for (auto& n : task.roots)
    if (task.consumers[n.get()] == 0) ready.push(n);
  const bool capturing = !task.capture.empty();
  NeededNodesScope needed_scope(capturing ? &task.needed : nullptr);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    Tensor g = task.take_gradient(node.get());
    std::vector<Tensor> grads;
    if (!capturing || task.needed.contains(node.get())) {
      // autograd::grad returns leaf gradients instead of accumulating them into .grad; a
      // captured node whose inputs lead to no other capture runs its hooks only.
      const bool apply =
          !capturing || (dynamic_cast<AccumulateGrad*>(node.get()) == nullptr && any_needed_edge(task, node.get()));
      grads = node->call(g, create_graph, apply);
      if (!retain_graph) node->release();  // (a node that did not run keeps what it saved)
    }
    if (auto cap = task.capture.find(node.get()); cap != task.capture.end()) task.captured[cap->second] = g;
    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* nx = node->next[i].get();
      if (!nx) continue;
      if (i < grads.size() && grads[i].defined()) {
        const std::optional<DType> to = node->defers_widening_to;
        const std::shared_ptr<const ViewWindow>& window = node->grad_window;
        if (window && create_graph)  // differentiable, and what a graph of the backward records
          task.add_gradient(nx, window->scatter(grads[i]));
        else
          task.add_gradient(nx, grads[i], to && grads[i].dtype() != *to ? to : std::nullopt, window);
      }
      if (--task.consumers[nx] == 0) ready.push(node->next[i]);
    }
  }
}

// Callbacks queued by hooks run when the outermost backward finished its graph; a callback
// may queue another (run in order until none is left). An exception drops them.
struct CallbackScope {
  CallbackScope() { ++t_backward_depth; }
  ~CallbackScope() {
    if (--t_backward_depth == 0) t_callbacks.clear();
  }
  void run_if_outermost() {
    if (t_backward_depth != 1) return;
    for (size_t i = 0; i < t_callbacks.size(); ++i) {
      std::function<void()> cb = std::move(t_callbacks[i]);
      cb();
    }
    t_callbacks.clear();
  }
};

}  // namespace

void queue_callback(std::function<void()> callback) {
  MT_CHECK(t_backward_depth > 0, "queue_callback", "can only be called while backward is running");
  t_callbacks.push_back(std::move(callback));
}

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, bool retain_graph,
                                 bool create_graph, const std::vector<Tensor>& inputs) {
  profiler::Range backward_range("backward");
  CallbackScope callbacks;
  GraphTask task;
  seed_roots(task, roots, seeds);
  capture_inputs(task, inputs);
  count_consumers(task);
  if (!task.capture.empty()) mark_needed(task);
  {
    struct RestoreGradMode {
      bool prev = GradMode::is_enabled();
      ~RestoreGradMode() { GradMode::set_enabled(prev); }
    } restore;
    GradMode::set_enabled(create_graph);
    execute(task, retain_graph, create_graph);
  }
  callbacks.run_if_outermost();
  return std::move(task.captured);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  MT_CHECK(!inputs.empty(), "grad", "no inputs given");
  std::vector<Tensor> out = run_backward(outputs, grad_outputs, retain_graph || create_graph, create_graph, inputs);
  if (!allow_unused)
    for (size_t i = 0; i < out.size(); ++i)
      MT_CHECK(out[i].defined(), "grad", "input ", i,
               " was not used in the graph of the outputs (pass allow_unused=true)");
  return out;
}

}  // namespace mantissa::autograd
