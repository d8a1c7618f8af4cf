// Parameter initialization, as torch.nn.init: each function fills a tensor in place
// (without recording autograd history) from the default generator (mt::manual_seed)
// and returns it.
//
//   mt::Tensor w = mt::empty({256, 784});
//   mt::nn::init::kaiming_normal_(w, 0, mt::nn::init::FanMode::FanOut, mt::nn::init::Nonlinearity::ReLU);
//   mt::nn::init::zeros_(bias);
#pragma once
#include <utility>

#include "core/tensor.h"

namespace mantissa::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };

// (fan_in, fan_out) of a weight [out, in, *kernel]: in * prod(kernel), out * prod(kernel).
// Throws for tensors with fewer than 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// The recommended gain for a nonlinearity (param: LeakyReLU's negative slope, default 0.01).
double calculate_gain(Nonlinearity nonlinearity, double param = -1);

Tensor uniform_(Tensor t, double low = 0, double high = 1);
Tensor normal_(Tensor t, double mean = 0, double std = 1);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1);
// N(0, s^2) with s = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor t, double gain = 1);
// U(-b, b) with b = gain(nonlinearity, a) * sqrt(3 / fan). Linear and Conv2d use a = sqrt(5).
Tensor kaiming_uniform_(Tensor t, double a = 0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
// N(0, s^2) with s = gain(nonlinearity, a) / sqrt(fan).
Tensor kaiming_normal_(Tensor t, double a = 0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);

}  // namespace mantissa::nn::init
