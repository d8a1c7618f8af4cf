// The backward engine: collects the graph reachable from the roots, counts each node's
// consumers, then runs nodes in dependency order, summing gradients per node.
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/profiler.h"

namespace mantissa {

namespace {
thread_local bool t_grad_enabled = true;
}
bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace autograd {

namespace {
std::atomic<uint64_t> g_sequence{0};
thread_local Node* t_current_node = nullptr;
thread_local FoundInfSink* t_sink = nullptr;
thread_local int t_backward_depth = 0;
thread_local std::vector<std::function<void()>> t_callbacks;
}  // namespace

Node::Node() : sequence(g_sequence++) {}

Node::~Node() {
  // The default destructor would free a chain of nodes recursively and overflow the stack
  // on a deep graph (a loop unrolled 100k times). Instead, nodes that only this chain keeps
  // alive hand their edges to a local stack before they die.
  std::vector<std::shared_ptr<Node>> stack = std::move(next);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n && n.use_count() == 1) {
      for (auto& nx : n->next) stack.push_back(std::move(nx));
      n->next.clear();
    }
  }
}
Node* current_node() { return t_current_node; }
void set_found_inf_sink(FoundInfSink* sink) { t_sink = sink; }

void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook) {
  MT_CHECK(leaf.requires_grad() && leaf.is_leaf(), "register_post_accumulate_grad_hook",
           "expected a leaf tensor that requires grad, got shape ", leaf.shape_str());
  meta(leaf).post_accumulate_hooks.push_back(std::move(hook));
}

void queue_callback(std::function<void()> callback) {
  MT_CHECK(t_backward_depth > 0, "queue_callback", "can only be called while backward is running");
  t_callbacks.push_back(std::move(callback));
}
FoundInfSink* found_inf_sink() { return t_sink; }

AutogradMeta& meta(const Tensor& t) {
  MT_CHECK(t.defined(), "autograd", "undefined tensor");
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

const AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  const AutogradMeta* m = meta_if(t);
  if (!m || !m->requires_grad) return nullptr;
  if (m->grad_fn) return m->grad_fn;
  auto& mm = meta(t);
  if (auto acc = mm.grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(t);
  mm.grad_accumulator = acc;
  return acc;
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  MT_CHECK(!released, name_,
           "trying to backward through the graph a second time (or to read saved tensors after they were freed); "
           "pass retain_graph=true to the first backward");
  std::vector<bool> needs(next.size());
  for (size_t i = 0; i < next.size(); ++i) needs[i] = next[i] != nullptr;
  return fn_(grad_output, needs);
}

void FunctionNode::release() {
  fn_ = nullptr;
  released = true;
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_in) {
  std::shared_ptr<TensorImpl> impl = leaf_.lock();
  if (!impl) return {};
  Tensor leaf(impl);
  AutogradMeta& m = meta(leaf);
  Tensor g = grad_in;
  for (auto& h : m.hooks) {
    Tensor r = h(g);
    if (r.defined()) g = r;
  }
  if (GradMode::is_enabled()) {  // create_graph: keep the gradient differentiable
    Tensor gc = g.dtype() == leaf.dtype() ? g : g.to(leaf.dtype());
    m.grad = m.grad.defined() ? m.grad + gc : gc;
    for (auto& h : m.post_accumulate_hooks) h(leaf);
    return {};
  }
  // One fused pass: convert (fp16 -> fp32 for AMP masters), accumulate, check finiteness.
  const bool init = !m.grad.defined();
  if (init) m.grad = make_tensor(leaf.sizes(), leaf.dtype(), leaf.device());
  else if (!m.grad.is_contiguous()) m.grad = launch::contiguous(m.grad);
  MT_CHECK(g.device() == leaf.device(), "backward", "gradient on ", g.device().str(), " for a leaf on ",
           leaf.device().str());
  Tensor flag = t_sink ? t_sink->flag_for(leaf.device()) : Tensor();
  backend_for(leaf.device()).accumulate_grad(g, m.grad, init, flag);
  if (!init) m.grad.bump_version();
  for (auto& h : m.post_accumulate_hooks) h(leaf);
  return {};
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next.push_back(t.defined() ? gradient_edge(t) : nullptr);
  AutogradMeta& m = meta(output);
  m.requires_grad = true;
  m.grad_fn = std::move(node);
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.version();
  // An output keeps only its data: its grad_fn is the node that saves it.
  data_ = is_output ? make_view(t, t.sizes(), t.strides(), t.offset()) : t;
}

Tensor SavedTensor::unpack() const {
  if (!data_.defined()) return data_;
  MT_CHECK(data_.version() == version_, "backward",
           "a tensor of shape ", data_.shape_str(), " and dtype ", dtype_name(data_.dtype()),
           " saved for backward was modified by an in-place operation (version ", version_, " -> ",
           data_.version(), ")");
  if (is_output_ && GradMode::is_enabled() && t_current_node) {
    // Double backward: reconnect the saved output to the node that produced it.
    Tensor t = make_view(data_, data_.sizes(), data_.strides(), data_.offset());
    AutogradMeta& m = meta(t);
    m.requires_grad = true;
    m.grad_fn = t_current_node->shared_from_this();
    return t;
  }
  return data_;
}

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                                 bool retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  profiler::Range backward_range("backward");
  // Callbacks queued by hooks run when the outermost backward finishes its graph; an
  // exception drops them.
  struct Depth {
    Depth() { ++t_backward_depth; }
    ~Depth() {
      if (--t_backward_depth == 0) t_callbacks.clear();
    }
  } depth;
  // Seed each root.
  std::unordered_map<Node*, Tensor> buffer;
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    MT_CHECK(r.requires_grad(), "backward",
             "element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor seed = i < seeds.size() ? seeds[i] : Tensor();
    if (!seed.defined()) {
      MT_CHECK(r.numel() == 1, "backward", "grad can be implicitly created only for scalar outputs; got shape ",
               r.shape_str(), " (pass a gradient)");
      seed = ones_like(r);
    } else {
      MT_CHECK(seed.sizes() == r.sizes(), "backward", "gradient of shape ", seed.shape_str(),
               " does not match the output shape ", r.shape_str());
    }
    auto node = gradient_edge(r);
    auto& slot = buffer[node.get()];
    slot = slot.defined() ? slot + seed : seed;
    root_nodes.push_back(node);
  }

  // Capture targets for autograd::grad.
  std::unordered_map<Node*, size_t> capture;
  std::vector<Tensor> captured(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    MT_CHECK(inputs[i].requires_grad(), "grad", "input ", i, " does not require grad");
    capture[gradient_edge(inputs[i]).get()] = i;
  }

  // Count consumers of each reachable node.
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& n : root_nodes)
    if (seen.insert(n.get()).second) stack.push_back(n.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& nx : n->next) {
      if (!nx) continue;
      deps[nx.get()]++;
      if (seen.insert(nx.get()).second) stack.push_back(nx.get());
    }
  }

  struct Restore {
    bool prev;
    ~Restore() {
      GradMode::set_enabled(prev);
      t_current_node = nullptr;
    }
  } restore{GradMode::is_enabled()};
  GradMode::set_enabled(create_graph);

  std::vector<std::shared_ptr<Node>> ready;
  std::unordered_set<Node*> queued;
  for (auto& n : root_nodes)
    if (deps[n.get()] == 0 && queued.insert(n.get()).second) ready.push_back(n);
  while (!ready.empty()) {
    // Latest-created first: finishes a branch before moving on, like PyTorch.
    auto it = std::max_element(ready.begin(), ready.end(),
                               [](const auto& a, const auto& b) { return a->sequence < b->sequence; });
    std::shared_ptr<Node> node = *it;
    ready.erase(it);
    Tensor g = std::move(buffer[node.get()]);
    buffer.erase(node.get());
    for (auto& h : node->pre_hooks) {
      Tensor r = h(g);
      if (r.defined()) g = r;
    }
    if (auto kept = node->retained.lock(); kept && g.defined()) {
      // Like a leaf's .grad: a private copy (not the seed) that accumulates over backward calls.
      Tensor& kg = meta(Tensor(kept)).grad;
      Tensor gi = create_graph ? g : g.detach().clone();
      kg = kg.defined() ? kg + gi : gi;
    }
    auto cap = capture.find(node.get());
    if (cap != capture.end()) captured[cap->second] = g;
    std::vector<Tensor> grads;
    bool is_leaf_node = dynamic_cast<AccumulateGrad*>(node.get()) != nullptr;
    if (g.defined() && !(is_leaf_node && !inputs.empty())) {
      t_current_node = node.get();
      if (profiler::enabled()) {  // a range per node, named like its grad_fn ("MulBackward")
        const std::string name = node->name();
        profiler::Range node_range(name.c_str());
        grads = node->apply(g);
      } else {
        grads = node->apply(g);
      }
      t_current_node = nullptr;
    }
    if (!retain_graph) node->release();
    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* nx = node->next[i].get();
      if (!nx) continue;
      if (i < grads.size() && grads[i].defined()) {
        auto& slot = buffer[nx];
        slot = slot.defined() ? slot + grads[i] : grads[i];
      }
      if (--deps[nx] == 0 && queued.insert(nx).second) ready.push_back(node->next[i]);
    }
  }
  if (t_backward_depth == 1) {
    // A callback may queue another (run in order until none is left).
    for (size_t i = 0; i < t_callbacks.size(); ++i) {
      std::function<void()> cb = std::move(t_callbacks[i]);
      cb();
    }
    t_callbacks.clear();
  }
  return captured;
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

}  // namespace autograd

// ---------------------------------------------------------------- Tensor autograd methods

using autograd::meta;
using autograd::meta_if;

bool Tensor::requires_grad() const {
  const auto* m = meta_if(*this);
  return m && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  MT_CHECK(is_leaf() || on, "requires_grad_", "you can only change requires_grad of leaf tensors");
  MT_CHECK(!on || is_floating(dtype()), "requires_grad_",
           "only floating-point tensors can require gradients, got ", dtype_name(dtype()));
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
  if (auto fn = grad_fn()) fn->pre_hooks.push_back(std::move(hook));
  else meta(*this).hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  MT_CHECK(requires_grad(), "retain_grad", "cannot retain the grad of a tensor that does not require grad");
  if (auto fn = grad_fn()) fn->retained = impl_ptr();
}

}  // namespace mantissa
