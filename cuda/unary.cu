// Unary launchers: the same dtype rules and functors as cpu::unary (core/cpu/elementwise.cpp).
#include "core/elementwise_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {

template <typename T, typename F>
void float_unary(const Tensor& in, const Tensor& out, F f) {
  launch_unary<T, T, acc_t<T>>(in, out, f, "unary");
}
}  // namespace

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
  const char* name = "unary";
  if (op == UnaryOp::IsFinite) {
    dispatch_floating(in.dtype(), "isfinite", [&]<typename T>() {
      launch_unary<T, bool, acc_t<T>>(in, out, math::IsFinite{}, "isfinite");
    });
    return;
  }
  if (op == UnaryOp::LogicalNot) {
    dispatch_all(in.dtype(), [&]<typename T>() {
      launch_unary<T, bool, acc_t<T>>(in, out, math::LogicalNot{}, "logical_not");
    });
    return;
  }
  // Ops defined on integers too.
  if (op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign || op == UnaryOp::Square ||
      op == UnaryOp::Clamp || op == UnaryOp::Relu) {
    dispatch_all(in.dtype(), [&]<typename T>() {
      if constexpr (std::is_same_v<T, bool>) {
        MT_FAIL(name, "operation not supported for bool tensors");
      } else {
        using Acc = acc_t<T>;
        switch (op) {
          case UnaryOp::Neg:
            return launch_unary<T, T, Acc>(in, out, math::Neg{}, name);
          case UnaryOp::Abs:
            return launch_unary<T, T, Acc>(in, out, math::Abs{}, name);
          case UnaryOp::Sign:
            return launch_unary<T, T, Acc>(in, out, math::Sign{}, name);
          case UnaryOp::Square:
            return launch_unary<T, T, Acc>(in, out, math::Square{}, name);
          case UnaryOp::Relu:
            return launch_unary<T, T, Acc>(in, out, math::Relu{}, name);
          default:
            return launch_unary<T, T, Acc>(in, out, math::Clamp{a, b}, name);
        }
      }
    });
    return;
  }
  dispatch_floating(in.dtype(), name, [&]<typename T>() {
    switch (op) {
      case UnaryOp::Exp:
        return float_unary<T>(in, out, math::Exp{});
      case UnaryOp::Log:
        return float_unary<T>(in, out, math::Log{});
      case UnaryOp::Log1p:
        return float_unary<T>(in, out, math::Log1p{});
      case UnaryOp::Sqrt:
        return float_unary<T>(in, out, math::Sqrt{});
      case UnaryOp::Rsqrt:
        return float_unary<T>(in, out, math::Rsqrt{});
      case UnaryOp::Sin:
        return float_unary<T>(in, out, math::Sin{});
      case UnaryOp::Cos:
        return float_unary<T>(in, out, math::Cos{});
      case UnaryOp::Tanh:
        return float_unary<T>(in, out, math::Tanh{});
      case UnaryOp::Sigmoid:
        return float_unary<T>(in, out, math::Sigmoid{});
      case UnaryOp::GeluErf:
        return float_unary<T>(in, out, math::GeluErf{});
      case UnaryOp::GeluTanh:
        return float_unary<T>(in, out, math::GeluTanh{});
      case UnaryOp::Silu:
        return float_unary<T>(in, out, math::Silu{});
      case UnaryOp::Erf:
        return float_unary<T>(in, out, math::Erf{});
      case UnaryOp::Reciprocal:
        return float_unary<T>(in, out, math::Reciprocal{});
      case UnaryOp::PowScalar:
        return float_unary<T>(in, out, math::PowScalar{a});
      default:
        MT_FAIL(name, "unknown unary op ", int(op));
    }
  });
}

}  // namespace mantissa::cuda
