#include "nn/fuse.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace mantissa::nn {

Conv2d fuse_conv_bn(const Conv2d& conv, const BatchNorm& bn) {
  MT_CHECK(bn.options.track_running_stats, "fuse_conv_bn", "the batch norm keeps no running statistics to fold");
  MT_CHECK(bn.num_features == conv.out_channels, "fuse_conv_bn", "the conv has ", conv.out_channels,
           " output channels but the batch norm normalizes ", bn.num_features);
  NoGradGuard no_grad;
  const int64_t c = conv.out_channels;
  const DType dtype = conv.weight.dtype();
  const Device device = conv.weight.device();
  auto f64 = [](const Tensor& t) { return t.detach().to(kFloat64); };
  Tensor scale = rsqrt(f64(bn.running_var) + bn.options.eps);  // [C]
  Tensor shift = -f64(bn.running_mean) * scale;
  if (bn.options.affine) {
    scale = scale * f64(bn.weight);
    shift = shift * f64(bn.weight) + f64(bn.bias);
  }
  if (conv.bias.defined()) shift = shift + f64(conv.bias) * scale;

  Conv2dOptions options = conv.options;
  options.bias = true;
  Conv2d fused(conv.in_channels, conv.out_channels, conv.kernel_size, options);
  fused.to(device, dtype);
  fused.weight.copy_((f64(conv.weight) * scale.reshape({c, 1, 1, 1})).to(dtype));
  fused.bias.copy_(shift.to(dtype));
  return fused;
}

}  // namespace mantissa::nn
