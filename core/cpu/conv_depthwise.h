// The weight (and bias) gradient of a depthwise 2-D convolution with unit stride on the CPU
// (core/cpu/nn_conv_depthwise.cpp). oneDNN 2.x has a vector kernel for it only up to 3 x 3:
// beyond, one small GEMM per (sample, channel) took 50 ms for ConvNeXt's 7 x 7 over
// [16, 96, 28, 28] (the backward data stays with oneDNN's depthwise kernel).
#pragma once
#include "core/nn_kernels.h"
#include "core/tensor.h"

namespace mantissa::cpu {

// Depthwise (groups == C == Cout) with stride 1 in both dims: any kernel size, padding, dilation.
bool is_unit_stride_depthwise(const Conv2dGeometry& g);

// gw [C, 1, KH, KW] and gb [C] (either may be undefined) from gy [N, C, OH, OW] and
// x [N, C, H, W], both contiguous.
void depthwise_weight_grad(const Tensor& gy, const Tensor& x, const Tensor& gw, const Tensor& gb,
                           const Conv2dGeometry& g);

}  // namespace mantissa::cpu
