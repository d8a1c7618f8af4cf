// The weight (and bias) gradient of a grouped 2-D convolution with few channels per group on
// the CPU (core/cpu/nn_conv_grouped.cpp): depthwise convolutions, ResNeXt's 32 groups of 4.
// oneDNN 2.x has a direct kernel for these only in some cases (depthwise up to 3 x 3); elsewhere
// it runs one small GEMM per (sample, group): 50 ms for ConvNeXt's 7 x 7 depthwise over
// [16, 96, 28, 28], 13 ms for 32 groups of 4 channels, 3 x 3, over [16, 128, 28, 28], 33 ms for
// EfficientNet's 5 x 5 depthwise with stride 2 over [16, 96, 56, 56]. The data gradient stays
// with oneDNN.
#pragma once
#include "core/nn_kernels.h"
#include "core/tensor.h"

namespace mantissa::cpu {

// Grouped (groups > 1) with at most 16 (input, output) channel pairs per group: any kernel size,
// stride, padding, dilation.
bool is_small_group(const Conv2dGeometry& g);

// gw [Cout, C / G, KH, KW] and gb [Cout] (either may be undefined) from gy [N, Cout, OH, OW]
// and x [N, C, H, W], both contiguous.
void small_group_weight_grad(const Tensor& gy, const Tensor& x, const Tensor& gw, const Tensor& gb,
                             const Conv2dGeometry& g);

}  // namespace mantissa::cpu
