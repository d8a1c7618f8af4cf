// 2-D pooling layers (stateless wrappers over nn::functional).
#pragma once
#include "nn/functional.h"
#include "nn/module.h"

namespace mantissa::nn {

using MaxPool2dOptions = functional::MaxPool2dFuncOptions;
using AvgPool2dOptions = functional::AvgPool2dFuncOptions;

// Maximum over each window; the stride defaults to the kernel size.
//
//   mt::nn::MaxPool2d pool(2);                          // [N, C, 28, 28] -> [N, C, 14, 14]
//   mt::nn::MaxPool2d pool3(3, {.stride = 2, .padding = 1, .ceil_mode = true});
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, const MaxPool2dOptions& options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Size2 kernel_size;
  MaxPool2dOptions options;
};

// Mean over each window (PyTorch's count_include_pad / divisor_override rules).
//
//   mt::nn::AvgPool2d pool(2);
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, const AvgPool2dOptions& options = {});
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Size2 kernel_size;
  AvgPool2dOptions options;
};

// Mean over adaptive windows giving a fixed output size (global pooling with 1).
//
//   mt::nn::AdaptiveAvgPool2d gap(1);                   // [N, C, H, W] -> [N, C, 1, 1]
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  Size2 output_size;
};

using MaxPool1dOptions = functional::MaxPool1dFuncOptions;
using AvgPool1dOptions = functional::AvgPool1dFuncOptions;

// The 1-D pools over [N, C, L] or [C, L] (functional::max_pool1d, avg_pool1d, adaptive_avg_pool1d).
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(int64_t kernel_size, const MaxPool1dOptions& options = {})
      : kernel_size(kernel_size), options(options) {}
  Tensor forward(const Tensor& x) override { return functional::max_pool1d(x, kernel_size, options); }
  int64_t kernel_size;
  MaxPool1dOptions options;
};

class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(int64_t kernel_size, const AvgPool1dOptions& options = {})
      : kernel_size(kernel_size), options(options) {}
  Tensor forward(const Tensor& x) override { return functional::avg_pool1d(x, kernel_size, options); }
  int64_t kernel_size;
  AvgPool1dOptions options;
};

class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(int64_t output_size) : output_size(output_size) {}
  Tensor forward(const Tensor& x) override { return functional::adaptive_avg_pool1d(x, output_size); }
  int64_t output_size;
};

}  // namespace mantissa::nn
