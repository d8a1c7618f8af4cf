#include "nn/conv.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"

namespace mantissa::nn {

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, const Conv2dOptions& o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  MT_CHECK(o.groups >= 1 && in % o.groups == 0 && out % o.groups == 0, "Conv2d", "in_channels ", in,
           " and out_channels ", out, " must be divisible by groups ", o.groups);
  MT_CHECK(k.h >= 1 && k.w >= 1, "Conv2d", "kernel_size must be >= 1, got ", k);
  weight = register_parameter("weight", empty({out, in / o.groups, k.h, k.w}));
  bias = register_parameter("bias", o.bias ? empty({out}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double b = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias, -b, b);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return functional::conv2d(
      x, weight, bias,
      {.stride = options.stride, .padding = options.padding, .dilation = options.dilation, .groups = options.groups});
}

std::string Conv2d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=" << kernel_size << ", stride=" << options.stride;
  if (options.padding != Size2(0)) os << ", padding=" << options.padding;
  if (options.dilation != Size2(1)) os << ", dilation=" << options.dilation;
  if (options.groups != 1) os << ", groups=" << options.groups;
  if (!bias.defined()) os << ", bias=false";
  return os.str();
}

}  // namespace mantissa::nn
