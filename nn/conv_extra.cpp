// Conv1d, ConvTranspose2d and ConvTranspose1d: modules around their functions
// (nn/functional_conv_extra.cpp), initialized as PyTorch's.
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "nn/conv.h"
#include "nn/init.h"

namespace mantissa::nn {

namespace {

// PyTorch's _ConvNd.reset_parameters: kaiming_uniform(a = sqrt(5)), bias U(+-1/sqrt(fan_in)),
// the fan-in read from the weight's dim 1 (so for a transposed conv: Cout / groups * K).
void reset_conv(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double b = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
    init::uniform_(bias, -b, b);
  }
}

void check_channels(const char* name, int64_t in, int64_t out, int64_t groups) {
  MT_CHECK(in > 0 && out > 0 && groups >= 1 && in % groups == 0 && out % groups == 0, name, "in_channels ", in,
           " and out_channels ", out, " must be positive and divisible by groups ", groups);
}

}  // namespace

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, const Conv1dOptions& o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels("Conv1d", in, out, o.groups);
  MT_CHECK(k >= 1, "Conv1d", "kernel_size must be >= 1, got ", k);
  weight = register_parameter("weight", empty({out, in / o.groups, k}));
  bias = register_parameter("bias", o.bias ? empty({out}) : Tensor());
  reset_parameters();
}
void Conv1d::reset_parameters() { reset_conv(weight, bias); }
Tensor Conv1d::forward(const Tensor& x) {
  return functional::conv1d(
      x, weight, bias,
      {.stride = options.stride, .padding = options.padding, .dilation = options.dilation, .groups = options.groups});
}
std::string Conv1d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=(" << kernel_size << ",), stride=(" << options.stride
     << ",)";
  return os.str();
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, const ConvTranspose2dOptions& o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels("ConvTranspose2d", in, out, o.groups);
  MT_CHECK(k.h >= 1 && k.w >= 1, "ConvTranspose2d", "kernel_size must be >= 1, got ", k);
  weight = register_parameter("weight", empty({in, out / o.groups, k.h, k.w}));
  bias = register_parameter("bias", o.bias ? empty({out}) : Tensor());
  reset_parameters();
}
void ConvTranspose2d::reset_parameters() { reset_conv(weight, bias); }
Tensor ConvTranspose2d::forward(const Tensor& x) {
  return functional::conv_transpose2d(x, weight, bias,
                                      {.stride = options.stride,
                                       .padding = options.padding,
                                       .output_padding = options.output_padding,
                                       .dilation = options.dilation,
                                       .groups = options.groups});
}
std::string ConvTranspose2d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=" << kernel_size << ", stride=" << options.stride;
  return os.str();
}

ConvTranspose1d::ConvTranspose1d(int64_t in, int64_t out, int64_t k, const ConvTranspose1dOptions& o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels("ConvTranspose1d", in, out, o.groups);
  MT_CHECK(k >= 1, "ConvTranspose1d", "kernel_size must be >= 1, got ", k);
  weight = register_parameter("weight", empty({in, out / o.groups, k}));
  bias = register_parameter("bias", o.bias ? empty({out}) : Tensor());
  reset_parameters();
}
void ConvTranspose1d::reset_parameters() { reset_conv(weight, bias); }
Tensor ConvTranspose1d::forward(const Tensor& x) {
  return functional::conv_transpose1d(x, weight, bias,
                                      {.stride = options.stride,
                                       .padding = options.padding,
                                       .output_padding = options.output_padding,
                                       .dilation = options.dilation,
                                       .groups = options.groups});
}
std::string ConvTranspose1d::extra_repr() const {
  std::ostringstream os;
  os << in_channels << ", " << out_channels << ", kernel_size=(" << kernel_size << ",), stride=(" << options.stride
     << ",)";
  return os.str();
}

}  // namespace mantissa::nn
