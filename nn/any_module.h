// A module of any forward signature behind one type (LibTorch's AnyModule), for containers
// and code that stores modules whose forward takes more than one input or returns more
// than a tensor. The forward signature is read from M::forward (which must not be
// overloaded, or name it with AnyModule::of<M, Signature>); calls check the argument count
// and types at run time and throw mantissa::Error naming the expected signature.
//
//   struct Attention : mt::nn::Module { mt::Tensor forward(const mt::Tensor& q, const mt::Tensor& kv, int64_t heads);
//   }; mt::nn::AnyModule any(std::make_shared<Attention>()); mt::Tensor y = any.forward(q, kv, int64_t(8));     //
//   any.forward<mt::Tensor>(...) names the result type any.module().parameters();                         // the held
//   module
//
// A module with the usual one-tensor forward needs none of this: Sequential, ModuleList and
// ModuleDict hold it as a Module. docs/nn.md, "Modules with several inputs", compares the two.
#pragma once
#include <any>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <typeinfo>
#include <utility>
#include <vector>

#include "core/error.h"
#include "nn/module.h"

namespace mantissa::nn {

class AnyModule {
 public:
  AnyModule() = default;
  template <typename M>
  explicit AnyModule(std::shared_ptr<M> m) {
    static_assert(std::is_base_of_v<Module, M>, "AnyModule: M must derive from mantissa::nn::Module");
    MT_CHECK(m != nullptr, "AnyModule", "null module");
    bind(m, &M::forward);
  }
  // For a module whose forward is overloaded: AnyModule::of<LSTMCell, std::pair<Tensor, Tensor>(const Tensor&,
  // const Tensor&, const Tensor&)>(cell).
  template <typename M, typename Signature>
  static AnyModule of(std::shared_ptr<M> m) {
    AnyModule a;
    a.bind(m, static_cast<typename MemberOf<M, Signature>::type>(&M::forward));
    return a;
  }

  bool defined() const { return module_ != nullptr; }
  Module& module() const {
    MT_CHECK(module_ != nullptr, "AnyModule", "empty");
    return *module_;
  }
  // "Tensor(Tensor, Tensor, int64_t)": the result and the decayed parameter types.
  const std::string& signature() const { return signature_; }

  // Calls forward with `args` (converted to the parameter types as a direct call would not be:
  // each argument must have its parameter's decayed type); returns its result as R.
  template <typename R = Tensor, typename... Args>
  R forward(Args&&... args) const {
    MT_CHECK(module_ != nullptr, "AnyModule", "forward of an empty AnyModule");
    std::vector<std::any> in{std::any(std::decay_t<Args>(std::forward<Args>(args)))...};
    std::any out = call_(in);
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      const R* r = std::any_cast<R>(&out);
      MT_CHECK(r != nullptr, module_->name(), "forward returns ", result_name_, ", not the requested ",
               label(typeid(R)), " (signature ", signature_, ")");
      return *r;
    }
  }

 private:
  template <typename M, typename Sig>
  struct MemberOf;
  template <typename M, typename R, typename... P>
  struct MemberOf<M, R(P...)> {
    using type = R (M::*)(P...);
  };

  template <typename M, typename R, typename... P>
  void bind(std::shared_ptr<M> m, R (M::*fn)(P...)) {
    bind_function<R, P...>(
        m, std::function<R(P...)>([self = m.get(), fn](P... p) -> R { return (self->*fn)(std::forward<P>(p)...); }));
  }
  template <typename M, typename R, typename... P>
  void bind(std::shared_ptr<M> m, R (M::*fn)(P...) const) {
    bind_function<R, P...>(
        m, std::function<R(P...)>([self = m.get(), fn](P... p) -> R { return (self->*fn)(std::forward<P>(p)...); }));
  }

  template <typename R, typename... P>
  void bind_function(std::shared_ptr<Module> m, std::function<R(P...)> f) {
    module_ = m;
    signature_ = label(typeid(R)) + "(" + names<P...>() + ")";
    result_name_ = label(typeid(R));
    call_ = [name = m->name(), f = std::move(f), sig = signature_](std::vector<std::any>& in) -> std::any {
      MT_CHECK(in.size() == sizeof...(P), name, "forward takes ", sizeof...(P), " arguments, got ", in.size(),
               " (signature ", sig, ")");
      return invoke<R, P...>(name, f, in, std::index_sequence_for<P...>{}, sig);
    };
  }

  template <typename R, typename... P, size_t... I>
  static std::any invoke(const std::string& name, const std::function<R(P...)>& f, std::vector<std::any>& in,
                         std::index_sequence<I...>, const std::string& sig) {
    auto arg = [&]<size_t K>() -> std::decay_t<std::tuple_element_t<K, std::tuple<P...>>>& {
      using T = std::decay_t<std::tuple_element_t<K, std::tuple<P...>>>;
      T* p = std::any_cast<T>(&in[K]);
      MT_CHECK(p != nullptr, name, "forward argument ", K, " is a ", label(in[K].type()), ", expected ",
               label(typeid(T)), " (signature ", sig, ")");
      return *p;
    };
    if constexpr (std::is_void_v<R>) {
      f(arg.template operator()<I>()...);
      return {};
    } else {
      return std::any(f(arg.template operator()<I>()...));
    }
  }

  // A readable name for the common argument types, else the compiler's.
  static std::string label(const std::type_info& t) {
    if (t == typeid(Tensor)) return "Tensor";
    if (t == typeid(int64_t)) return "int64_t";
    if (t == typeid(int)) return "int";
    if (t == typeid(double)) return "double";
    if (t == typeid(float)) return "float";
    if (t == typeid(bool)) return "bool";
    if (t == typeid(std::string)) return "std::string";
    if (t == typeid(std::pair<Tensor, Tensor>)) return "std::pair<Tensor, Tensor>";
    if (t == typeid(void)) return "void";
    return t.name();
  }
  template <typename... P>
  static std::string names() {
    std::string s;
    ((s += (s.empty() ? "" : ", ") + label(typeid(std::decay_t<P>))), ...);
    return s;
  }

  std::shared_ptr<Module> module_;
  std::function<std::any(std::vector<std::any>&)> call_;
  std::string signature_, result_name_;
};

}  // namespace mantissa::nn
