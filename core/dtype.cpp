#include "core/dtype.h"

#include "core/error.h"

namespace mantissa {

size_t element_size(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Int64:
      return 8;
    case DType::Float32:
    case DType::Int32:
      return 4;
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::UInt8:
    case DType::Bool:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Int64:
      return "int64";
    case DType::Int32:
      return "int32";
    case DType::UInt8:
      return "uint8";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
bool is_integral(DType t, bool include_bool) {
  return t == DType::Int64 || t == DType::Int32 || t == DType::UInt8 || (include_bool && t == DType::Bool);
}

namespace {
// 0 bool, 1 integer, 2 floating
int category(DType t) { return t == DType::Bool ? 0 : (is_integral(t) ? 1 : 2); }
int rank(DType t) {  // width order inside a category
  switch (t) {
    case DType::Bool:
      return 0;
    case DType::UInt8:
      return 1;
    case DType::Int32:
      return 2;
    case DType::Int64:
      return 3;
    case DType::Float16:
    case DType::BFloat16:
      return 1;
    case DType::Float32:
      return 2;
    case DType::Float64:
      return 3;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;  // f16 + bf16
  return rank(a) >= rank(b) ? a : b;
}

DType promote_with_scalar(DType tensor, bool scalar_is_floating) {
  if (scalar_is_floating && !is_floating(tensor)) return DType::Float32;
  if (!scalar_is_floating && tensor == DType::Bool) return DType::Int64;
  return tensor;
}

}  // namespace mantissa
