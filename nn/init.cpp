#include "nn/init.h"

#include <cmath>
#include <utility>

#include "autograd/grad_mode.h"
#include "autograd/tensor_methods.h"
#include "core/error.h"
#include "core/random.h"

namespace mantissa::nn::init {

namespace {

// Writes `values` (same shape) into t without recording history.
Tensor assign(Tensor& t, const Tensor& values) {
  MT_CHECK(t.defined(), "init", "cannot initialize an undefined tensor");
  NoGradGuard guard;
  t.copy_(values);
  return t;
}

TensorOptions like(const Tensor& t) {
  MT_CHECK(t.defined() && is_floating(t.dtype()), "init", "expected a floating-point tensor, got ",
           t.defined() ? dtype_name(t.dtype()) : "undefined");
  return {.dtype = DType::Float64};  // drawn in double, rounded once by copy_
}

double fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return double(mode == FanMode::FanIn ? in : out);
}

}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  MT_CHECK(t.defined() && t.dim() >= 2, "init", "fan in and fan out need a tensor with at least 2 dims, got shape ",
           t.defined() ? t.shape_str() : "undefined");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param < 0 ? 0.01 : param;
      return std::sqrt(2.0 / (1 + slope * slope));
    }
    case Nonlinearity::SELU:
      return 3.0 / 4.0;
  }
  return 1.0;
}

Tensor uniform_(Tensor t, double low, double high) { return assign(t, uniform(t.sizes(), low, high, like(t))); }
Tensor normal_(Tensor t, double mean, double std) { return assign(t, normal(t.sizes(), mean, std, like(t))); }
Tensor constant_(Tensor t, double value) {
  MT_CHECK(t.defined(), "init", "cannot initialize an undefined tensor");
  NoGradGuard guard;
  t.fill_(value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(std::move(t), 0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1); }

Tensor xavier_uniform_(Tensor t, double gain) {
  if (t.defined() && t.numel() == 0) return t;
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  const double b = gain * std::sqrt(6.0 / double(in + out));
  return uniform_(t, -b, b);
}

Tensor xavier_normal_(Tensor t, double gain) {
  if (t.defined() && t.numel() == 0) return t;
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0, gain * std::sqrt(2.0 / double(in + out)));
}

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity) {
  if (t.defined() && t.numel() == 0) return t;  // nothing to draw (and a zero fan)
  const double b = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan(t, mode));
  return uniform_(t, -b, b);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity) {
  if (t.defined() && t.numel() == 0) return t;
  return normal_(t, 0, calculate_gain(nonlinearity, a) / std::sqrt(fan(t, mode)));
}

}  // namespace mantissa::nn::init
