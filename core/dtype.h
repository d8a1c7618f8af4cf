// Element types and PyTorch's type-promotion rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <ostream>

namespace mantissa {

enum class DType : uint8_t { Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8, Bool };

constexpr DType kFloat32 = DType::Float32, kFloat = DType::Float32;
constexpr DType kFloat64 = DType::Float64, kDouble = DType::Float64;
constexpr DType kFloat16 = DType::Float16, kHalf = DType::Float16;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kInt64 = DType::Int64, kLong = DType::Int64;
constexpr DType kInt32 = DType::Int32, kInt = DType::Int32;
constexpr DType kUInt8 = DType::UInt8, kByte = DType::UInt8;
constexpr DType kBool = DType::Bool;

size_t element_size(DType t);
const char* dtype_name(DType t);  // "float32", "float16", ...
bool is_floating(DType t);
bool is_reduced_float(DType t);  // float16 or bfloat16
bool is_integral(DType t, bool include_bool = true);

// Result type of a binary op on two tensors (torch.promote_types).
DType promote_types(DType a, DType b);
// Result type of tensor (op) scalar: a float scalar lifts an integral tensor to float32.
DType promote_with_scalar(DType tensor, bool scalar_is_floating);

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace mantissa
