#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/launch.h"

namespace mantissa::nn {

// ---------------------------------------------------------------- StateDict

// ---------------------------------------------------------------- lifetime

namespace {

void erase_all(std::vector<Module*>& v, const Module* m) { v.erase(std::remove(v.begin(), v.end(), m), v.end()); }

void replace_all(std::vector<Module*>& v, Module* from, Module* to) { std::replace(v.begin(), v.end(), from, to); }

}  // namespace

Module::~Module() {
  // Parents that hold this module by reference must not keep a dangling pointer.
  for (Module* parent : referrers_)
    for (auto& c : parent->children_)
      if (!c.owned && c.ptr == this) c.ptr = nullptr;
  unlink();
}

// Forgets the by-reference children (they no longer list this module as a parent).
void Module::unlink() {
  for (auto& c : children_)
    if (!c.owned && c.ptr) erase_all(c.ptr->referrers_, this);
  children_.clear();
}

// Takes other's registrations; by-reference children now list this module as their parent.
void Module::take_from(Module& other) {
  params_ = std::move(other.params_);
  buffers_ = std::move(other.buffers_);
  children_ = std::move(other.children_);
  training_ = other.training_;
  other.params_.clear();
  other.buffers_.clear();
  other.children_.clear();
  for (auto& c : children_)
    if (!c.owned && c.ptr) replace_all(c.ptr->referrers_, &other, this);
}

// A move relocates the module: members of a moved parent are moved right after its
// base, and each one re-points the parents that referenced its old address.
Module::Module(Module&& other) noexcept {
  take_from(other);
  path_ = std::move(other.path_);
  referrers_ = std::move(other.referrers_);
  other.referrers_.clear();
  for (Module* parent : referrers_)
    for (auto& c : parent->children_)
      if (!c.owned && c.ptr == &other) c.ptr = this;
}

Module& Module::operator=(Module&& other) noexcept {
  if (this == &other) return *this;
  unlink();
  take_from(other);
  path_ = std::move(other.path_);
  type_name_.clear();
  for (Module* parent : other.referrers_) {
    for (auto& c : parent->children_)
      if (!c.owned && c.ptr == &other) c.ptr = this;
    referrers_.push_back(parent);
  }
  other.referrers_.clear();
  return *this;
}

// ---------------------------------------------------------------- registration

Tensor Module::forward(const Tensor&) {
  MT_FAIL(name(), "this module has no forward(const Tensor&); call its own forward");
}

void Module::check_new_name(const std::string& n, const char* what) const {
  MT_CHECK(!n.empty(), what, "the name must not be empty (in ", name(), ")");
  MT_CHECK(n.find('.') == std::string::npos, what, "the name '", n, "' must not contain '.' (in ", name(), ")");
  auto taken = [&](const auto& v) {
    return std::any_of(v.begin(), v.end(), [&](const auto& s) { return s.name == n; });
  };
  MT_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), what, "'", n, "' is already registered in ",
           name());
}

Tensor Module::register_parameter(const std::string& n, Tensor t, bool requires_grad) {
  check_new_name(n, "register_parameter");
  if (t.defined()) {
    MT_CHECK(!requires_grad || is_floating(t.dtype()), "register_parameter", "parameter '", n,
             "' must be floating-point to require grad, got ", dtype_name(t.dtype()));
    if (!t.is_leaf()) t = t.detach();  // a parameter is a leaf of every graph
    t.requires_grad_(requires_grad);
  }
  params_.push_back({n, t, true});
  return t;
}

Tensor Module::register_buffer(const std::string& n, Tensor t, bool persistent) {
  check_new_name(n, "register_buffer");
  buffers_.push_back({n, t, persistent});
  return t;
}

void Module::add_child(const std::string& n, std::shared_ptr<Module> owned, Module* ptr) {
  check_new_name(n, "register_module");
  MT_CHECK(ptr != this, "register_module", "a module cannot be its own submodule ('", n, "' in ", name(), ")");
  for (auto& [path, m] : ptr->named_modules())
    MT_CHECK(m != this, "register_module", "registering '", n, "' in ", name(), " would create a cycle");
  if (!owned) ptr->referrers_.push_back(this);
  children_.push_back({n, std::move(owned), ptr});
  // The child's subtree now lives under this module's path (profiler range names).
  const std::string base = path_.empty() ? n : path_ + "." + n;
  for (auto& [sub, m] : ptr->named_modules()) {
    m->path_ = base;
    if (!sub.empty()) m->path_.append(".").append(sub);
  }
}

const std::string& Module::profile_name() const {
  if (!path_.empty()) return path_;
  // Two threads may run one root module (shared-model inference); only while profiling.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (type_name_.empty()) type_name_ = name();
  return type_name_;
}

const Module& Module::child_at(const Child& c) const {
  MT_CHECK(c.ptr != nullptr, name(), "submodule '", c.name,
           "' was registered by reference and has been destroyed; register a std::shared_ptr to share ownership");
  return *c.ptr;
}

// ---------------------------------------------------------------- queries

void Module::collect(const std::string& prefix, bool params, bool buffers, bool persistent_only, bool dedupe,
                     NamedTensors& out) const {
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [path, m] : named_modules()) {
    std::string pre = prefix;
    if (!path.empty()) pre.append(path).append(".");
    auto add = [&](const std::vector<Slot>& slots) {
      for (const Slot& s : slots) {
        if (!s.tensor.defined() || (persistent_only && !s.persistent)) continue;
        if (dedupe && !seen.insert(s.tensor.impl()).second) continue;
        out.emplace_back(pre + s.name, s.tensor);
      }
    };
    if (params) add(m->params_);
    if (buffers) add(m->buffers_);
  }
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  if (!recurse) {
    for (const Slot& s : params_)
      if (s.tensor.defined()) out.emplace_back(s.name, s.tensor);
    return out;
  }
  collect("", true, false, false, true, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  if (!recurse) {
    for (const Slot& s : buffers_)
      if (s.tensor.defined()) out.emplace_back(s.name, s.tensor);
    return out;
  }
  collect("", false, true, false, true, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> out;
  for (const Child& c : children_) out.emplace_back(c.name, const_cast<Module*>(&child_at(c)));
  return out;
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> out;
  for (auto& [n, m] : named_children()) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> seen;
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& path, const Module& m) {
    if (!seen.insert(&m).second) return;
    out.emplace_back(path, const_cast<Module*>(&m));
    for (const Child& c : m.children_) walk(path.empty() ? c.name : path + "." + c.name, m.child_at(c));
  };
  walk("", *this);
  return out;
}

Module& Module::submodule(const std::string& path) const {
  const Module* m = this;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    const Child* found = nullptr;
    for (const Child& c : m->children_)
      if (c.name == part) found = &c;
    MT_CHECK(found != nullptr, "submodule", "no submodule '", path, "' in ", name(), " (missing '", part, "')");
    m = &m->child_at(*found);
  }
  return const_cast<Module&>(*m);
}

Tensor Module::tensor(const std::string& path) const {
  const size_t dot = path.rfind('.');
  const Module& m = dot == std::string::npos ? *this : submodule(path.substr(0, dot));
  const std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
  for (const auto* slots : {&m.params_, &m.buffers_})
    for (const Slot& s : *slots)
      if (s.name == leaf) return s.tensor;
  MT_FAIL("tensor", "no parameter or buffer '", path, "' in ", name());
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

// ---------------------------------------------------------------- modes and placement

void Module::train(bool on) {
  training_ = on;
  for (const Child& c : children_) const_cast<Module&>(child_at(c)).train(on);
}

void Module::requires_grad_(bool on) {
  for (Tensor& p : parameters()) p.requires_grad_(on);
}

namespace {

// Gives `t`'s TensorImpl the data of `src` (see the header: handles stay valid).
void assign_data(const Tensor& t, const Tensor& src, const std::function<Tensor(const Tensor&)>& convert_grad) {
  TensorImpl* d = t.impl();
  const TensorImpl* s = src.impl();
  d->storage = s->storage;
  d->sizes = s->sizes;
  d->strides = s->strides;
  d->offset = s->offset;
  d->dtype = s->dtype;
  if (auto& m = d->autograd) {
    m->working_copy = Tensor();  // made from the old master; the new storage restarts its version count
    m->working_copy_version = 0;
    if (m->grad.defined()) m->grad = convert_grad(m->grad);
  }
}

template <typename Convert>
void convert_all(Module& root, bool floating_only, Convert convert) {
  NoGradGuard guard;
  for (auto& [path, m] : root.named_modules()) {
    for (auto& [n, t] : m->named_parameters(false)) convert(t);
    for (auto& [n, t] : m->named_buffers(false))
      if (!floating_only || is_floating(t.dtype())) convert(t);
  }
}

}  // namespace

Module& Module::to(Device device) {
  auto move = [&](const Tensor& x) { return launch::to_device(x, device); };
  convert_all(*this, false, [&](const Tensor& t) {
    if (t.device() != device) assign_data(t, move(t), move);
  });
  return *this;
}

Module& Module::to(DType dtype) {
  MT_CHECK(is_floating(dtype), "Module::to", "modules can only be converted to a floating dtype, got ",
           dtype_name(dtype));
  auto cast = [&](const Tensor& x) { return launch::cast(x, dtype); };
  convert_all(*this, true, [&](const Tensor& t) {
    if (is_floating(t.dtype()) && t.dtype() != dtype) assign_data(t, cast(t), cast);
  });
  return *this;
}

Module& Module::to(Device device, DType dtype) { return to(device).to(dtype); }

void Module::zero_grad(bool set_to_none) {
  NoGradGuard guard;
  for (const Tensor& p : parameters()) {
    auto* m = p.impl()->autograd.get();
    if (!m || !m->grad.defined()) continue;
    if (set_to_none)
      m->grad = Tensor();
    else
      m->grad.zero_();
  }
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const Child& c : children_) const_cast<Module&>(child_at(c)).apply(fn);
  fn(*this);
  return *this;
}

// ---------------------------------------------------------------- state

StateDict Module::state_dict() const {
  StateDict sd;
  // Per module: parameters, then persistent buffers (as PyTorch orders them).
  for (auto& [path, m] : named_modules()) {
    const std::string pre = path.empty() ? "" : path + ".";
    for (const Slot& s : m->params_)
      if (s.tensor.defined()) sd.insert(pre + s.name, s.tensor.detach());
    for (const Slot& s : m->buffers_)
      if (s.tensor.defined() && s.persistent) sd.insert(pre + s.name, s.tensor.detach());
  }
  return sd;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  NamedTensors own;
  collect("", true, true, true, false, own);
  LoadResult result;
  std::vector<std::string> errors;
  std::unordered_set<std::string> own_keys;
  for (auto& [key, t] : own) {
    own_keys.insert(key);
    if (!dict.contains(key)) {
      result.missing_keys.push_back(key);
      continue;
    }
    const Tensor& src = dict.at(key);
    if (!src.defined())
      errors.push_back("'" + key + "' is an undefined tensor");
    else if (src.sizes() != t.sizes())
      errors.push_back("'" + key + "' has shape " + src.shape_str() + " in the state dict but " + t.shape_str() +
                       " in the module");
    else if (src.dtype() != t.dtype())
      errors.push_back("'" + key + "' has dtype " + dtype_name(src.dtype()) + " in the state dict but " +
                       dtype_name(t.dtype()) + " in the module");
  }
  for (auto& [key, t] : dict)
    if (!own_keys.count(key)) result.unexpected_keys.push_back(key);
  if (strict) {
    for (auto& k : result.missing_keys) errors.push_back("missing key '" + k + "'");
    for (auto& k : result.unexpected_keys) errors.push_back("unexpected key '" + k + "'");
  }
  if (!errors.empty()) {
    std::string msg;
    for (auto& e : errors) msg += (msg.empty() ? "" : "; ") + e;
    MT_FAIL("load_state_dict", msg, " (nothing was loaded into ", name(), ")");
  }
  NoGradGuard guard;
  for (auto& [key, t] : own)
    if (dict.contains(key)) const_cast<Tensor&>(t).copy_(dict.at(key));
  return result;
}

// ---------------------------------------------------------------- printing

std::string Module::name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = status == 0 && d ? d : mangled;
  std::free(d);
  // The unqualified name: after the last "::" outside template arguments.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i] == '<' || full[i] == '(')
      ++depth;
    else if (full[i] == '>' || full[i] == ')')
      --depth;
    else if (depth == 0 && full[i] == ':' && i + 1 < full.size() && full[i + 1] == ':')
      start = i + 2;
  }
  return full.substr(start);
}

namespace {

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

}  // namespace

void Module::print(std::ostream& os, int indent) const {
  const int64_t count = num_parameters();
  const std::string note = count ? "  # " + with_commas(count) + (count == 1 ? " parameter" : " parameters") : "";
  const std::string extra = extra_repr();
  if (children_.empty()) {
    os << name() << "(" << extra << ")" << note;
    return;
  }
  const std::string pad(size_t(indent + 2), ' ');
  os << name() << "(";
  if (!extra.empty()) os << "\n" << pad << extra;
  os << "\n";
  for (const Child& c : children_) {
    os << pad << "(" << c.name << "): ";
    if (c.ptr)
      c.ptr->print(os, indent + 2);
    else
      os << "<destroyed>";
    os << "\n";
  }
  os << std::string(size_t(indent), ' ') << ")" << note;
}

std::string Module::str() const {
  std::ostringstream os;
  print(os, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.print(os, 0);
  return os;
}

}  // namespace mantissa::nn
