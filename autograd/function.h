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
// of forward (undefined where none is needed), or, as in LibTorch, one per argument with
// undefined entries for the non-tensor ones (trailing undefined entries are accepted too).
#pragma once
#include <any>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "amp/autocast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/trace.h"

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
    static amp::OpPolicy& policy = amp::policy_entry(Derived::name);  // looked up once per op type
    inputs = amp::autocast_many(policy, inputs);
    auto ctx = std::make_shared<Context>();
    Tensor out;
    // An exporter tracing this thread may record the call as one op (core/trace.h).
    trace::Tracer* tracer = trace::current();
    const bool traced = tracer != nullptr && tracer->function_begin(Derived::name);
    {
      NoGradGuard guard;
      size_t i = 0;
      // Braced initialisation evaluates left to right, so tensors are picked in order.
      std::tuple<decltype(pick(inputs, i, std::forward<Args>(args)))...> picked{
          pick(inputs, i, std::forward<Args>(args))...};
      out = std::apply([&](auto&&... a) { return Derived::forward(*ctx, std::forward<decltype(a)>(a)...); },
                       std::move(picked));
    }
    if (traced) tracer->function_end(Derived::name, inputs, *ctx, out);
    if (needs_grad(inputs)) {
      // The forward may return an input or a view of one: give the node its own output.
      if (!out.is_leaf() || out.requires_grad()) out = out.detach();
      ctx->freeze(out);
      std::vector<InputMeta> metas;
      for (const Tensor& t : inputs) metas.push_back({t.sizes(), t.dtype(), t.device()});
      // Which forward arguments are tensors: backward may answer per argument, as LibTorch's.
      std::vector<bool> tensor_args{std::is_same_v<std::decay_t<Args>, Tensor>...};
      record(Derived::name, inputs, out, [ctx, metas, tensor_args](const Tensor& g, const std::vector<bool>& needs) {
        ctx->needs_input_grad = needs;
        std::vector<Tensor> grads = per_tensor(Derived::backward(*ctx, g), tensor_args, metas.size());
        // A wrong count, shape, dtype or device from user code must not reach the engine (it
        // would mis-accumulate, or fail in the next node's backward naming that node).
        MT_CHECK(grads.size() >= metas.size(), Derived::name, "backward returned ", grads.size(),
                 " gradients but forward took ", metas.size(), " tensors");
        grads.resize(metas.size());  // per_tensor checked that the rest are undefined
        for (size_t i = 0; i < grads.size(); ++i)
          if (needs[i] && grads[i].defined()) grads[i] = fit_gradient(grads[i], metas[i], i);
        return grads;
      });
    }
    return out;
  }

 private:
  // What backward's gradient for an input must match: the input as forward saw it (after autocast).
  struct InputMeta {
    Shape shape;
    DType dtype;
    Device device;
  };

  // As PyTorch's engine does: a gradient of a broadcast shape is summed back to the input's
  // shape, and a floating gradient is cast to the input's dtype and moved to its device (a bf16
  // activation meeting an fp32 parameter yields one fp32 gradient; each input gets its own).
  static Tensor fit_gradient(Tensor grad, const InputMeta& in, size_t i) {
    if (grad.sizes() != in.shape) {
      const Shape& gs = grad.sizes();
      bool expandable = in.shape.size() <= gs.size();
      for (size_t d = 0; expandable && d < in.shape.size(); ++d) {
        int64_t s = in.shape[in.shape.size() - 1 - d];
        expandable = s == 1 || s == gs[gs.size() - 1 - d];
      }
      MT_CHECK(expandable, Derived::name, "backward returned a gradient of shape ", grad.shape_str(), " for input ", i,
               " of shape ", shape_str(in.shape));
      grad = sum_to(grad, in.shape);
    }
    if (grad.dtype() != in.dtype) {
      MT_CHECK(is_floating(grad.dtype()) && is_floating(in.dtype), Derived::name, "backward returned a ",
               dtype_name(grad.dtype()), " gradient for input ", i, " of dtype ", dtype_name(in.dtype), " (shape ",
               shape_str(in.shape), "): only floating gradients can be cast to a floating input's dtype");
      grad = grad.to(in.dtype);
    }
    if (grad.device() != in.device) grad = grad.to(in.device);
    return grad;
  }

  // backward's result as one gradient per Tensor argument. It may also give one per argument
  // of forward (LibTorch's convention: undefined for the non-tensor ones), or the per-tensor
  // list followed by undefined entries; a defined gradient for a non-tensor argument is an error.
  static std::vector<Tensor> per_tensor(std::vector<Tensor> grads, const std::vector<bool>& tensor_args,
                                        size_t tensors) {
    if (grads.size() == tensors) return grads;
    std::vector<Tensor> out;
    if (grads.size() == tensor_args.size()) {
      for (size_t a = 0; a < grads.size(); ++a) {
        MT_CHECK(tensor_args[a] || !grads[a].defined(), Derived::name, "backward returned a gradient for argument ", a,
                 ", which is not a Tensor");
        if (tensor_args[a]) out.push_back(grads[a]);
      }
      return out;
    }
    for (size_t k = tensors; k < grads.size(); ++k)
      MT_CHECK(!grads[k].defined(), Derived::name, "backward returned ", grads.size(), " gradients but forward took ",
               tensors, " tensors (of ", tensor_args.size(), " arguments); extra entries must be undefined");
    return grads;  // fewer (checked by the caller) or undefined trailing entries
  }

  template <typename T>
  static void collect(std::vector<Tensor>& v, const T& a) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) v.push_back(a);
  }
  // Returns the autocast input for Tensor arguments, the argument itself otherwise.
  template <typename T>
  static decltype(auto) pick(const std::vector<Tensor>& inputs, size_t& i, T&& a) {
    if constexpr (std::is_same_v<std::decay_t<T>, Tensor>)
      return Tensor(inputs[i++]);
    else
      return std::forward<T>(a);
  }
};

}  // namespace mantissa::autograd
