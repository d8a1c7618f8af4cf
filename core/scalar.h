// A number passed to an op alongside tensors (like a Python scalar in PyTorch).
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/error.h"

namespace mantissa {

class Scalar {
 public:
  Scalar() = default;
  // A floating value is kept as a double only: inf, NaN and huge values have no int64.
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : d_(static_cast<double>(v)), floating_(true) {}
  template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  Scalar(T v) : d_(static_cast<double>(v)), i_(static_cast<int64_t>(v)), floating_(false) {}

  double to_double() const { return d_; }
  // The value as an integer (a floating value truncated toward zero, as a C cast does).
  // Throws mantissa::Error naming `op` when a floating value has no int64: NaN, inf, |x| >= 2^63.
  int64_t to_int(const char* op = "Scalar") const {
    if (!floating_) return i_;
    // ±2^63 are exact in double and int64 spans [-2^63, 2^63): a double in that range (the
    // only doubles between -2^63 - 1 and -2^63 are those two) truncates into int64.
    MT_CHECK(std::isfinite(d_) && d_ >= -9223372036854775808.0 && d_ < 9223372036854775808.0, op, "value ", d_,
             " cannot be converted to an integer dtype without overflow");
    return static_cast<int64_t>(d_);
  }
  bool is_floating() const { return floating_; }

 private:
  double d_ = 0;
  int64_t i_ = 0;
  bool floating_ = false;
};

}  // namespace mantissa
