// dtype -> C++ type dispatch, written once for every device: each device names its own 16-bit
// float types (the CPU: mantissa::Half and BFloat16; CUDA: __half and __nv_bfloat16) and gets
// its dispatch_all / dispatch_floating and the dtype policy that core/elementwise_dispatch.h
// takes (core/cpu/loops.h, cuda/loops.cuh).
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace mantissa {

template <typename Fp16, typename Bf16>
struct DtypeDispatch {
  // The type arithmetic happens in: fp32 for every float type narrower than fp64.
  template <typename T>
  using acc = std::conditional_t<
      std::is_same_v<T, double>, double,
      std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, Fp16> || std::is_same_v<T, Bf16>, float, T>>;

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
