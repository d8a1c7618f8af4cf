// Folding an eval-mode batch norm into the convolution before it, for inference:
// bn(conv(x)) == fused(x) with one conv instead of a conv and a normalization pass.
//
//   net.eval();
//   mt::nn::Conv2d fused = mt::nn::fuse_conv_bn(block.conv1, block.bn1);
//   mt::Tensor y = mt::relu(fused(x));            // == relu(block.bn1(block.conv1(x))) to ~1e-6
#pragma once
#include "nn/conv.h"
#include "nn/normalization.h"

namespace mantissa::nn {

// A new Conv2d (with bias) computing bn(conv(x)) as bn is in eval mode: with s = gamma /
// sqrt(running_var + eps), weight' = weight * s (per output channel) and bias' = (bias -
// running_mean) * s + beta. Computed in float64 and stored in conv's dtype and device.
// The batch norm must keep running statistics and have conv.out_channels features.
Conv2d fuse_conv_bn(const Conv2d& conv, const BatchNorm& bn);

}  // namespace mantissa::nn
