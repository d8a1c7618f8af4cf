// A number passed to an op alongside tensors (like a Python scalar in PyTorch).
#pragma once
#include <cstdint>
#include <type_traits>

namespace mantissa {

class Scalar {
 public:
  Scalar() = default;
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : d_(static_cast<double>(v)), i_(static_cast<int64_t>(v)), floating_(true) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Scalar(T v) : d_(static_cast<double>(v)), i_(static_cast<int64_t>(v)), floating_(false) {}

  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }
  bool is_floating() const { return floating_; }

 private:
  double d_ = 0;
  int64_t i_ = 0;
  bool floating_ = false;
};

}  // namespace mantissa
