// The dtype rules of the elementwise ops, written once for the CPU (core/cpu/elementwise.cpp)
// and CUDA (cuda/unary.cu, cuda/binary.cu) launchers. Each op's functor and domain come from
// the lists in core/elementwise_math.h; a device supplies only its loop and its dtype dispatch:
//
//   struct Device {
//     template <typename F> static void all(DType t, F&& f);       // f.operator()<T>() for any dtype
//     template <typename F> static void floating(DType t, const char* op, F&& f);  // throws otherwise
//     template <typename T> using acc = ...;                        // the compute type of T
//   };
//   loop.template operator()<In, Out, Acc>(functor)                 // runs the loop
#pragma once
#include <type_traits>

#include "core/backend.h"
#include "core/error.h"

namespace mantissa::elementwise {

// FloatingOnly is Floating for the kernels; the ops differ (core/elementwise_math.h).
enum class Domain { Numeric, Floating, FloatingOnly, FloatingToBool, AnyToBool, Arithmetic };

// Calls v.template operator()<Functor, Domain>() for `op`. Every enumerator has a case (the
// switch is generated from the same list as the enum), so there is no default to hide one.
template <typename V>
void visit(UnaryOp op, V&& v) {
  switch (op) {
#define MT_VISIT_CASE(Enum, name, F, domain, ...) \
  case UnaryOp::Enum:                             \
    return v.template operator()<math::F, Domain::domain>();
    MT_UNARY_OPS(MT_VISIT_CASE)
#undef MT_VISIT_CASE
  }
  MT_FAIL("unary", "unknown unary op ", int(op));
}

template <typename V>
void visit(BinaryOp op, V&& v) {
  switch (op) {
#define MT_VISIT_CASE(Enum, name, F, domain, policy) \
  case BinaryOp::Enum:                               \
    return v.template operator()<math::F, Domain::domain>();
    MT_BINARY_OPS(MT_VISIT_CASE)
#undef MT_VISIT_CASE
  }
  MT_FAIL("binary", "unknown binary op ", int(op));
}

// out = f(in) with op's domain rules: loop.operator()<In, Out, Acc>(f).
template <typename Device, typename Loop>
void run_unary(UnaryOp op, DType dtype, double a, double b, Loop&& loop) {
  visit(op, [&]<typename F, Domain D>() {
    const F f = math::make_functor<F>(a, b);
    const char* name = op_name(op);
    if constexpr (D == Domain::Floating || D == Domain::FloatingOnly) {
      Device::floating(dtype, name,
                       [&]<typename T>() { loop.template operator()<T, T, typename Device::template acc<T>>(f); });
    } else if constexpr (D == Domain::FloatingToBool) {
      Device::floating(dtype, name,
                       [&]<typename T>() { loop.template operator()<T, bool, typename Device::template acc<T>>(f); });
    } else if constexpr (D == Domain::AnyToBool) {
      Device::all(dtype, [&]<typename T>() { loop.template operator()<T, bool, typename Device::template acc<T>>(f); });
    } else {  // Numeric
      Device::all(dtype, [&]<typename T>() {
        if constexpr (std::is_same_v<T, bool>)
          MT_FAIL(name, "operation not supported for bool tensors");
        else
          loop.template operator()<T, T, typename Device::template acc<T>>(f);
      });
    }
  });
}

// out = f(a, b) with op's domain rules: loop.operator()<In, Out, Acc>(f); f built from the op's
// scalars s0, s1 (math::make_functor: the backward of an activation with a parameter).
template <typename Device, typename Loop>
void run_binary(BinaryOp op, DType dtype, double s0, double s1, Loop&& loop) {
  visit(op, [&]<typename F, Domain D>() {
    const char* name = op_name(op);
    const F f = math::make_functor<F>(s0, s1);
    if constexpr (D == Domain::AnyToBool) {
      Device::all(dtype, [&]<typename T>() { loop.template operator()<T, bool, typename Device::template acc<T>>(f); });
    } else if constexpr (D == Domain::Arithmetic) {
      Device::all(dtype, [&]<typename T>() {
        using Acc = typename Device::template acc<T>;
        if constexpr (std::is_floating_point_v<Acc>) {
          loop.template operator()<T, T, Acc>(f);
        } else {  // integers (bool counts as one) compute in their own type
          using IntAcc = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
          loop.template operator()<T, T, IntAcc>(typename math::IntegerForm<F>::type{});
        }
      });
    } else {  // Floating
      Device::floating(dtype, name,
                       [&]<typename T>() { loop.template operator()<T, T, typename Device::template acc<T>>(f); });
    }
  });
}

}  // namespace mantissa::elementwise
