// Containers: Sequential (a chain of single-tensor modules) and ModuleList (an
// indexable list of submodules, e.g. transformer blocks). Elements are named "0",
// "1", ... in parameter names ("features.0.weight").
//
// An element given as an rvalue or a std::shared_ptr is owned by the container (shared);
// an lvalue module is registered by reference, like register_module(name, member).
#pragma once
#include <memory>
#include <string>
#include <type_traits>

#include "nn/module.h"

namespace mantissa::nn {

namespace detail {
template <typename T>
struct is_shared_ptr : std::false_type {};
template <typename T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {};
}  // namespace detail

// Shared base of Sequential and ModuleList.
class ModuleContainer : public Module {
 public:
  // Appends a module (rvalue: moved into shared ownership; shared_ptr: shared; lvalue: by reference).
  template <typename M>
  void push_back(M&& m) {
    push_back(std::to_string(size()), std::forward<M>(m));
  }
  template <typename M>
  void push_back(const std::string& name, M&& m) {
    using D = std::remove_cvref_t<M>;
    if constexpr (detail::is_shared_ptr<D>::value) {
      register_module(name, std::shared_ptr<typename D::element_type>(m));
    } else {
      static_assert(std::is_base_of_v<Module, D>, "push_back: expected a module or a std::shared_ptr to one");
      if constexpr (std::is_lvalue_reference_v<M>)
        register_module(name, m);
      else
        register_module(name, std::make_shared<D>(std::move(m)));
    }
  }
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  // The i-th element; throws mantissa::Error when out of range.
  Module& operator[](size_t i) const;
  // The i-th element as T; throws when it is not a T.
  template <typename T>
  T& at(size_t i) const {
    T* p = dynamic_cast<T*>(&(*this)[i]);
    MT_CHECK(p != nullptr, name(), "element ", i, " is a ", (*this)[i].name(), ", not the requested type");
    return *p;
  }
};

// Applies its elements in order: forward(x) = m_n(...m_1(x)).
//
//   mt::nn::Sequential net(mt::nn::Conv2d(1, 32, 3, {.padding = 1}), mt::nn::ReLU(), mt::nn::MaxPool2d(2),
//                          mt::nn::Flatten(), mt::nn::Linear(32 * 14 * 14, 10));
//   mt::Tensor logits = net(images);
//   net.at<mt::nn::Conv2d>(0).weight;  // "0.weight" in net.named_parameters()
class Sequential : public ModuleContainer {
 public:
  Sequential() = default;
  template <typename... Ms>
  requires(sizeof...(Ms) > 0 && !(sizeof...(Ms) == 1 && (std::is_same_v<std::remove_cvref_t<Ms>, Sequential> &&
                                                         ...))) explicit Sequential(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }
  Tensor forward(const Tensor& x) override;
};

// A list of submodules with no forward of its own.
//
//   mt::nn::ModuleList blocks;
//   for (int i = 0; i < 6; ++i) blocks.push_back(std::make_shared<Block>(512));
//   for (mt::nn::Module* b : blocks.children()) h = (*b)(h);
class ModuleList : public ModuleContainer {
 public:
  ModuleList() = default;
  template <typename... Ms>
  requires(sizeof...(Ms) > 0 && !(sizeof...(Ms) == 1 && (std::is_same_v<std::remove_cvref_t<Ms>, ModuleList> &&
                                                         ...))) explicit ModuleList(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }
};

// Named submodules with no forward of its own, in insertion order (torch.nn.ModuleDict); the
// names are the state-dict prefixes ("heads.cls.weight").
//
//   mt::nn::ModuleDict heads;
//   heads.insert("cls", mt::nn::Linear(256, 10));
//   heads.insert("box", std::make_shared<mt::nn::Linear>(256, 4));
//   mt::Tensor logits = heads["cls"](h);   heads.at<mt::nn::Linear>("box").weight;
class ModuleDict : public ModuleContainer {
 public:
  ModuleDict() = default;
  // Adds `name` (names: non-empty, no '.', unique), as push_back does.
  template <typename M>
  void insert(const std::string& name, M&& m) {
    push_back(name, std::forward<M>(m));
  }
  bool contains(const std::string& name) const;
  std::vector<std::string> keys() const;
  // The submodule `name`; throws mantissa::Error naming the known keys when absent.
  Module& operator[](const std::string& name) const;
  template <typename T>
  T& at(const std::string& name) const {
    T* p = dynamic_cast<T*>(&(*this)[name]);
    MT_CHECK(p != nullptr, "ModuleDict", "'", name, "' is a ", (*this)[name].name(), ", not the requested type");
    return *p;
  }
};

}  // namespace mantissa::nn
