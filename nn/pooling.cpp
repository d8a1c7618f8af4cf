#include "nn/pooling.h"

#include <sstream>

namespace mantissa::nn {

MaxPool2d::MaxPool2d(Size2 k, const MaxPool2dOptions& o) : kernel_size(k), options(o) {
  if (options.stride == Size2(0)) options.stride = k;
}
Tensor MaxPool2d::forward(const Tensor& x) { return functional::max_pool2d(x, kernel_size, options); }
std::string MaxPool2d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << kernel_size << ", stride=" << options.stride << ", padding=" << options.padding
     << ", dilation=" << options.dilation << ", ceil_mode=" << (options.ceil_mode ? "true" : "false");
  return os.str();
}

AvgPool2d::AvgPool2d(Size2 k, const AvgPool2dOptions& o) : kernel_size(k), options(o) {
  if (options.stride == Size2(0)) options.stride = k;
}
Tensor AvgPool2d::forward(const Tensor& x) { return functional::avg_pool2d(x, kernel_size, options); }
std::string AvgPool2d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << kernel_size << ", stride=" << options.stride << ", padding=" << options.padding;
  if (options.ceil_mode) os << ", ceil_mode=true";
  if (!options.count_include_pad) os << ", count_include_pad=false";
  if (options.divisor_override) os << ", divisor_override=" << options.divisor_override;
  return os.str();
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 o) : output_size(o) {}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, output_size); }
std::string AdaptiveAvgPool2d::extra_repr() const {
  std::ostringstream os;
  os << "output_size=" << output_size;
  return os.str();
}

}  // namespace mantissa::nn
