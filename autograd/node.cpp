// The graph's pieces: nodes, leaf accumulation, saved tensors and op recording.
#include "autograd/node.h"

#include <atomic>
#include <cctype>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/profiler.h"

namespace mantissa {

namespace autograd {

namespace {
std::atomic<uint64_t> g_sequence{0};
thread_local Node* t_current_node = nullptr;
thread_local FoundInfSink* t_sink = nullptr;
thread_local const std::unordered_set<Node*>* t_needed = nullptr;  // NeededNodesScope
}  // namespace

NeededNodesScope::NeededNodesScope(const std::unordered_set<Node*>* needed) : previous_(t_needed) { t_needed = needed; }
NeededNodesScope::~NeededNodesScope() { t_needed = previous_; }

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
std::vector<Tensor> Node::call(Tensor& grad, bool create_graph, bool apply_node) {
  for (auto& h : pre_hooks) {
    Tensor r = h(grad);
    if (r.defined()) grad = r;
  }
  if (auto kept = retained.lock(); kept && grad.defined()) {
    // Like a leaf's .grad: a private copy (not the seed) that accumulates over backward calls.
    Tensor& kg = meta(Tensor(kept)).grad;
    Tensor gi = create_graph ? grad : grad.detach().clone();
    kg = kg.defined() ? kg + gi : gi;
  }
  if (!grad.defined() || !apply_node) return {};
  struct Current {
    explicit Current(Node* n) { t_current_node = n; }
    ~Current() { t_current_node = nullptr; }
  } current(this);
  if (!profiler::enabled()) return apply(grad);
  const std::string range_name = name();  // a range per node, named like its grad_fn ("MulBackward")
  profiler::Range range(range_name.c_str());
  return apply(grad);
}

Node* current_node() { return t_current_node; }
void set_found_inf_sink(FoundInfSink* sink) { t_sink = sink; }

void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook) {
  MT_CHECK(leaf.requires_grad() && leaf.is_leaf(), "register_post_accumulate_grad_hook",
           "expected a leaf tensor that requires grad, got shape ", leaf.shape_str());
  meta(leaf).post_accumulate_hooks.push_back(std::move(hook));
}

FoundInfSink* found_inf_sink() { return t_sink; }

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
  for (size_t i = 0; i < next.size(); ++i)
    needs[i] = next[i] != nullptr && (!t_needed || t_needed->contains(next[i].get()));
  return fn_(grad_output, needs);
}

void FunctionNode::release() {
  fn_ = nullptr;
  released = true;
}

namespace {
// Whether g, held only by the engine (grad_in) and by the caller's copy, may become leaf's
// gradient as it is.
bool steals_gradient(const Tensor& g, const Tensor& leaf) {
  const TensorImpl* impl = g.impl();
  return g.impl_ptr().use_count() <= 2 && impl->storage.use_count() == 1 && g.dtype() == leaf.dtype() &&
         g.sizes() == leaf.sizes() && g.is_contiguous() && impl->offset == 0 && impl->storage->nbytes == g.nbytes() &&
         !g.requires_grad();
}
}  // namespace

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
  MT_CHECK(g.device() == leaf.device(), "backward", "gradient on ", g.device().str(), " for a leaf on ",
           leaf.device().str());
  Tensor flag = t_sink ? t_sink->flag_for(leaf.device()) : Tensor();
  // A first gradient nothing else holds, dense in the leaf's layout and dtype, becomes the
  // leaf's .grad without a copy (PyTorch's AccumulateGrad does the same): the engine's
  // reference and `g` are its only ones, and it covers its whole storage (a view would pin
  // the rest of a larger block). The GradScaler's check then reads it once.
  if (!m.grad.defined() && steals_gradient(g, leaf)) {
    if (flag.defined()) backend_for(leaf.device()).accumulate_grad(g, Tensor(), true, flag);
    m.grad = std::move(g);
    if (t_sink) t_sink->checked(m.grad);
    for (auto& h : m.post_accumulate_hooks) h(leaf);
    return {};
  }
  // One fused pass: convert (fp16 -> fp32 for AMP masters), accumulate, check finiteness.
  const bool init = !m.grad.defined();
  if (init)
    m.grad = make_tensor(leaf.sizes(), leaf.dtype(), leaf.device());
  else if (!m.grad.is_contiguous())
    m.grad = launch::contiguous(m.grad);
  backend_for(leaf.device()).accumulate_grad(g, m.grad, init, flag);
  if (!init) m.grad.bump_version();
  if (t_sink) t_sink->checked(m.grad);
  for (auto& h : m.post_accumulate_hooks) h(leaf);
  return {};
}

namespace {
template <typename Tensors>
bool any_needs_grad(const Tensors& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}
}  // namespace

bool needs_grad(std::initializer_list<Tensor> inputs) { return any_needs_grad(inputs); }
bool needs_grad(const std::vector<Tensor>& inputs) { return any_needs_grad(inputs); }

std::string backward_node_name(const std::string& op) {
  std::string out;
  bool upper = true;
  for (char c : op) {
    if (c == '_' || c == '.') {
      upper = true;
      continue;
    }
    out += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out + "Backward";
}

Node& record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) node->next.push_back(t.defined() ? gradient_edge(t) : nullptr);
  Node& recorded = *node;
  AutogradMeta& m = meta(output);
  m.requires_grad = true;
  m.grad_fn = std::move(node);
  return recorded;
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.version();
  // An output keeps only its data: its grad_fn is the node that saves it.
  data_ = is_output ? make_view(t, t.sizes(), t.strides(), t.offset()) : t;
}

Tensor SavedTensor::unpack() const {
  if (!data_.defined()) return data_;
  MT_CHECK(data_.version() == version_, "backward", "a tensor of shape ", data_.shape_str(), " and dtype ",
           dtype_name(data_.dtype()), " saved for backward was modified by an in-place operation (version ", version_,
           " -> ", data_.version(), ")");
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

}  // namespace autograd
}  // namespace mantissa
