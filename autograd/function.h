// Custom differentiable ops written in C++, like torch.autograd.Function.
//
//   struct Cube : mt::autograd::Function<Cube> {
//     static constexpr const char* name = "cube";   // also its autocast policy key
//     static mt::Tensor forward(mt::autograd::Context& ctx, const mt::Tensor& x) {
//       ctx.save_for_backward({x});
//       return x * x * x;
//     }
//     static std::vector<mt::Tensor> backward(mt::autograd::Context& ctx, const mt::Tensor& g) {
//       mt::Tensor x = ctx.saved()[0];
//       return {g * 3 * x * x};
//     }
//   };
//   mt::Tensor y = Cube::apply(x);
//
// forward runs without recording; backward returns one gradient per Tensor argument
// of forward (undefined where none is needed).
#pragma once
#include <any>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/shape.h"

namespace mantissa::autograd {

class Context {
 public:
  void save_for_backward(std::vector<Tensor> ts) { raw_ = std::move(ts); }
  std::vector<Tensor> saved() const {
    std::vector<Tensor> out;
    for (const auto& s : saved_) out.push_back(s.unpack());
    return out;
  }
  // Non-tensor state for backward (shapes, flags, ...).
  std::map<std::string, std::any> data;
  // Which Tensor arguments want a gradient (valid in backward).
  std::vector<bool> needs_input_grad;

  // Internal: turns the raw saved list into version-checked saved tensors.
  void freeze(const Tensor& output) {
    for (const Tensor& t : raw_) saved_.emplace_back(t, t.defined() && t.is_same(output));
    raw_.clear();
  }

 private:
  std::vector<Tensor> raw_;
  std::vector<SavedTensor> saved_;
};

template <typename Derived>
struct Function {
  template <typename... Args>
  static Tensor apply(Args&&... args) {
    std::vector<Tensor> inputs;
    (collect(inputs, args), ...);
    inputs = amp::autocast_many(Derived::name, inputs);
    auto ctx = std::make_shared<Context>();
    Tensor out;
    {
      NoGradGuard guard;
      size_t i = 0;
      // Braced initialisation evaluates left to right, so tensors are picked in order.
      std::tuple<decltype(pick(inputs, i, std::forward<Args>(args)))...> picked{
          pick(inputs, i, std::forward<Args>(args))...};
      out = std::apply([&](auto&&... a) { return Derived::forward(*ctx, std::forward<decltype(a)>(a)...); },
                       std::move(picked));
    }
    if (needs_grad(inputs)) {
      // The forward may return an input or a view of one: give the node its own output.
      if (!out.is_leaf() || out.requires_grad()) out = out.detach();
      ctx->freeze(out);
      std::vector<Shape> shapes;
      for (const Tensor& t : inputs) shapes.push_back(t.sizes());
      record(Derived::name, inputs, out, [ctx, shapes](const Tensor& g, const std::vector<bool>& needs) {
        ctx->needs_input_grad = needs;
        std::vector<Tensor> grads = Derived::backward(*ctx, g);
        // A wrong count or shape from user code must not reach the engine (it would mis-accumulate).
        MT_CHECK(grads.size() == shapes.size(), Derived::name, "backward returned ", grads.size(),
                 " gradients but forward took ", shapes.size(), " tensors");
        for (size_t i = 0; i < grads.size(); ++i) {
          if (!needs[i] || !grads[i].defined() || grads[i].sizes() == shapes[i]) continue;
          // As in PyTorch, a gradient of a broadcast shape of the input is summed back to it.
          const Shape& gs = grads[i].sizes();
          bool expandable = shapes[i].size() <= gs.size();
          for (size_t d = 0; expandable && d < shapes[i].size(); ++d) {
            int64_t s = shapes[i][shapes[i].size() - 1 - d];
            expandable = s == 1 || s == gs[gs.size() - 1 - d];
          }
          MT_CHECK(expandable, Derived::name, "backward returned a gradient of shape ", grads[i].shape_str(),
                   " for input ", i, " of shape ", shape_str(shapes[i]));
          grads[i] = sum_to(grads[i], shapes[i]);
        }
        return grads;
      });
    }
    return out;
  }

 private:
  template <typename T>
  static void collect(std::vector<Tensor>& v, const T& a) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) v.push_back(a);
  }
  // Returns the autocast input for Tensor arguments, the argument itself otherwise.
  template <typename T>
  static decltype(auto) pick(const std::vector<Tensor>& inputs, size_t& i, T&& a) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) return Tensor(inputs[i++]);
    else return std::forward<T>(a);
  }
};

}  // namespace mantissa::autograd
