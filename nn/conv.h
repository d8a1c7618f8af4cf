// Convolution layers: Conv2d, Conv1d, ConvTranspose2d, ConvTranspose1d.
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

struct Conv1dOptions {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

// 1-D cross-correlation of [N, C, L] (or [C, L]) with weight [Cout, C / groups, K], bias [Cout];
// PyTorch's initialization.    mt::nn::Conv1d conv(128, 100, 3);   // [N, 128, L] -> [N, 100, L - 2]
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv1dOptions& options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels, kernel_size;
  Conv1dOptions options;
  Tensor weight, bias;
};

struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

// The transposed convolution (functional::conv_transpose2d): weight [C, Cout / groups, KH, KW],
// bias [Cout]; PyTorch's initialization (its fan-in reads weight dim 1, as PyTorch's).
//   mt::nn::ConvTranspose2d up(128, 64, 4, {.stride = 2, .padding = 1});  // 7x7 -> 14x14
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
                  const ConvTranspose2dOptions& options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  Size2 kernel_size;
  ConvTranspose2dOptions options;
  Tensor weight, bias;
};

struct ConvTranspose1dOptions {
  int64_t stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
  bool bias = true;
};

// functional::conv_transpose1d: weight [C, Cout / groups, K], bias [Cout].
class ConvTranspose1d : public Module {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  const ConvTranspose1dOptions& options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_channels, out_channels, kernel_size;
  ConvTranspose1dOptions options;
  Tensor weight, bias;
};

}  // namespace mantissa::nn
