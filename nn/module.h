// nn::Module: the base of every layer and model. A module registers its parameters,
// buffers and submodules by name; everything else (recursive parameter lists, dotted
// names, train/eval, device and dtype moves, state dicts, printing) follows from that.
//
//   struct Net : mt::nn::Module {
//     mt::nn::Linear fc1{784, 256}, fc2{256, 10};
//     Net() { register_module("fc1", fc1); register_module("fc2", fc2); }
//     mt::Tensor forward(const mt::Tensor& x) override { return fc2(mt::relu(fc1(x))); }
//   };
//   Net net;
//   net.to(mt::kFloat64);                       // parameters converted in place
//   for (auto& [name, p] : net.named_parameters()) std::cout << name << " " << p.shape_str() << "\n";
//   std::cout << net;                           // the module tree with parameter counts
//
// Ownership. A submodule is registered either by reference (a member, as above: the
// parent does not own it) or as a std::shared_ptr (shared ownership: containers,
// modules built at run time). Registrations by reference are tracked from both sides:
// moving a module (and with it its members) re-points its parents at the new object,
// and destroying a referenced module detaches it from its parents, so a parent never
// holds a dangling pointer. Modules are movable, not copyable (a copy would silently
// share parameters).
//
// Parameters and buffers are Tensor handles shared with the members that hold them.
// to(Device) and to(DType) convert them *in place*: the TensorImpl behind each handle
// is given the converted storage (its autograd state is kept, a gradient is converted
// too, an AMP working copy is dropped), so handles held elsewhere (an optimizer, a
// member) see the new data. Convert a model before building its optimizer: optimizer
// state made earlier stays where it was.
#pragma once
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/profiler.h"
#include "core/state_dict.h"
#include "core/tensor.h"

namespace mantissa::nn {

using StateDict = mantissa::StateDict;  // core/state_dict.h

// What load_state_dict(..., strict = false) skipped.
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the module, not in the dict
  std::vector<std::string> unexpected_keys;  // in the dict, not in the module
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;

  // The single-tensor forward used by operator(), Sequential and printing-free callers.
  // Modules with other signatures define their own forward and leave this one throwing.
  virtual Tensor forward(const Tensor& x);
  // forward(x) inside a profiler range named after the module's dotted path ("features.0"; the
  // root: its type name) while profiling is on (core/profiler.h); off, one branch.
  Tensor operator()(const Tensor& x) {
    if (!profiler::enabled()) return forward(x);
    profiler::Range r(profile_name().c_str(), profiler::Kind::Module);
    return forward(x);
  }
  // The dotted path under the outermost module this one was registered into ("" for a root).
  // Set at registration: registering a parent into a grandparent updates its whole subtree.
  const std::string& path() const { return path_; }

  // --- registration (names: non-empty, no '.', unique within the module) ---
  // Stores `t` (made a leaf that requires grad unless requires_grad is false) and returns
  // the handle; an undefined tensor registers an absent parameter (e.g. no bias).
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // A buffer is state that is not trained (running statistics); non-persistent buffers
  // are left out of state_dict().
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  // A member (or any module that outlives this one) registered by reference.
  template <typename M>
  M& register_module(const std::string& name, M& module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from mantissa::nn::Module");
    add_child(name, nullptr, &module);
    return module;
  }
  // A submodule owned jointly with the caller.
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from mantissa::nn::Module");
    MT_CHECK(module != nullptr, "register_module", "submodule '", name, "' is a null pointer");
    add_child(name, module, module.get());
    return module;
  }

  // --- queries (registration order; parameters shared by two modules are listed once) ---
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;  // dotted names: "features.0.weight"
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Module*>> named_children() const;
  std::vector<Module*> children() const;
  // This module (named "") and every descendant, depth first.
  std::vector<std::pair<std::string, Module*>> named_modules() const;
  // The descendant at a dotted path ("features.0"); throws naming the path when absent.
  Module& submodule(const std::string& path) const;
  // The parameter or buffer at a dotted path ("features.0.weight").
  Tensor tensor(const std::string& path) const;
  // Number of parameter elements (each shared parameter counted once).
  int64_t num_parameters(bool trainable_only = false) const;

  // --- modes ---
  // Sets training mode here and in every descendant (Dropout, BatchNorm read it).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Sets requires_grad on every parameter (freezing with false).
  void requires_grad_(bool on = true);

  // --- placement (in place; see the header comment) ---
  Module& to(Device device);
  Module& to(DType dtype);  // floating parameters and buffers only
  Module& to(Device device, DType dtype);

  // Drops (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  // Calls fn on every descendant, then on this module (as torch.nn.Module.apply).
  Module& apply(const std::function<void(Module&)>& fn);

  // --- state ---
  // Parameters and persistent buffers by dotted name (detached handles sharing storage).
  StateDict state_dict() const;
  // Copies `dict` into the parameters and buffers. Every entry is validated first: with
  // strict, a missing or unexpected key is an error; a shape or dtype mismatch always is.
  // On error nothing is changed and the mantissa::Error names every offending key.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);

  // --- printing ---
  // The type's name ("Linear", or a user class's unqualified name).
  virtual std::string name() const;
  // The text inside the parentheses of a leaf line, e.g. "in_features=784, out_features=256, bias=true".
  virtual std::string extra_repr() const { return ""; }
  // The module tree, PyTorch style, with each line's parameter count.
  std::string str() const;

 private:
  struct Child {
    std::string name;
    std::shared_ptr<Module> owned;  // null when registered by reference
    Module* ptr;                    // null once a by-reference child has been destroyed
  };
  struct Slot {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };

  void add_child(const std::string& name, std::shared_ptr<Module> owned, Module* ptr);
  void check_new_name(const std::string& name, const char* what) const;
  const Module& child_at(const Child& c) const;
  void collect(const std::string& prefix, bool params, bool buffers, bool persistent_only, bool dedupe,
               NamedTensors& out) const;
  void print(std::ostream& os, int indent) const;
  void take_from(Module& other);
  void unlink();

  const std::string& profile_name() const;

  std::vector<Slot> params_, buffers_;
  std::string path_;               // see path()
  mutable std::string type_name_;  // name(), cached for profiler ranges of a root module
  std::vector<Child> children_;
  // Parents that hold this module by reference (kept so moves and destruction update them).
  std::vector<Module*> referrers_;
  bool training_ = true;

  friend std::ostream& operator<<(std::ostream& os, const Module& m);
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace mantissa::nn
