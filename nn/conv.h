// 2-D convolution layer.
#pragma once
#include "nn/functional.h"
#include "nn/module.h"

namespace mantissa::nn {

struct Conv2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// Cross-correlation of an [N, C, H, W] input with weight [Cout, C / groups, KH, KW], plus
// bias [Cout]; initialized as PyTorch (kaiming_uniform(a = sqrt(5)), bias U(+-1/sqrt(fan_in))).
//
//   mt::nn::Conv2d conv(3, 64, 3, {.stride = 1, .padding = 1});
//   mt::Tensor y = conv(images);       // [N, 3, 32, 32] -> [N, 64, 32, 32]
//   mt::nn::Conv2d depthwise(64, 64, {3, 3}, {.padding = 1, .groups = 64, .bias = false});
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, const Conv2dOptions& options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  Size2 kernel_size;
  Conv2dOptions options;
  Tensor weight, bias;
};

}  // namespace mantissa::nn
