// dtype -> C++ type dispatch and value conversion, written once for every device: each device
// names its own 16-bit float types (the CPU: mantissa::Half and BFloat16; CUDA: __half and
// __nv_bfloat16) and their conversions to and from float, and gets its dispatch_all /
// dispatch_floating, cast_to and the dtype policy that core/elementwise_dispatch.h takes
// (core/cpu/loops.h, cuda/loops.cuh).
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"

// Forced inline on both sides: the CPU loops vectorize only with the element math inlined
// (GCC 12 left the SGD functor a call inside the fused step's loop, which stayed scalar).
#if defined(__CUDACC__)
#define MT_HOST_DEVICE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define MT_HOST_DEVICE inline __attribute__((always_inline))
#else
#define MT_HOST_DEVICE inline
#endif

namespace mantissa {

// Convert: static to_float(Fp16), to_float(Bf16), to_fp16(float), to_bf16(float), the last two
// rounding to nearest even.
template <typename Fp16, typename Bf16, typename Convert>
struct DtypeDispatch {
  // The type arithmetic happens in: fp32 for every float type narrower than fp64.
  template <typename T>
  using acc = std::conditional_t<
      std::is_same_v<T, double>, double,
      std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, Fp16> || std::is_same_v<T, Bf16>, float, T>>;

  // Value conversion with the same rules on every device: fp16/bf16 go through fp32 (so fp64 ->
  // fp16 rounds twice, as Eigen::half(double) does); to bool is != 0; the rest static_cast.
  template <typename To, typename From>
  MT_HOST_DEVICE static To cast(From v) {
    if constexpr (std::is_same_v<To, From>)
      return v;
    else if constexpr (std::is_same_v<From, Fp16> || std::is_same_v<From, Bf16>)
      return cast<To>(Convert::to_float(v));
    else if constexpr (std::is_same_v<To, bool>)
      return v != From(0);
    else if constexpr (std::is_same_v<To, Fp16>)
      return Convert::to_fp16(static_cast<float>(v));
    else if constexpr (std::is_same_v<To, Bf16>)
      return Convert::to_bf16(static_cast<float>(v));
    else
      return static_cast<To>(v);
  }

  // A Scalar as T for fill-like ops, the same on every device: bool is != 0, floating types
  // through double, integers exactly (an error naming `op` for a fractional or huge value).
  template <typename T>
  static T from_scalar(const Scalar& value, const char* op) {
    if constexpr (std::is_same_v<T, bool>)
      return value.to_double() != 0.0;
    else if constexpr (std::is_floating_point_v<acc<T>>)
      return cast<T>(value.to_double());
    else
      return cast<T>(value.to_int(op));
  }

  // Calls f.template operator()<T>() with T this device's C++ type of `t`.
  template <typename F>
  static void all(DType t, F&& f) {
    switch (t) {
      case DType::Float32:
        return f.template operator()<float>();
      case DType::Float64:
        return f.template operator()<double>();
      case DType::Float16:
        return f.template operator()<Fp16>();
      case DType::BFloat16:
        return f.template operator()<Bf16>();
      case DType::Int64:
        return f.template operator()<int64_t>();
      case DType::Int32:
        return f.template operator()<int32_t>();
      case DType::UInt8:
        return f.template operator()<uint8_t>();
      case DType::Bool:
        return f.template operator()<bool>();
    }
  }

  // The same for floating dtypes; any other throws naming `op`.
  template <typename F>
  static void floating(DType t, const char* op, F&& f) {
    switch (t) {
      case DType::Float32:
        return f.template operator()<float>();
      case DType::Float64:
        return f.template operator()<double>();
      case DType::Float16:
        return f.template operator()<Fp16>();
      case DType::BFloat16:
        return f.template operator()<Bf16>();
      default:
        MT_FAIL(op, "expected a floating-point tensor, got ", dtype_name(t));
    }
  }
};

}  // namespace mantissa
