// The CUDA row of the nn kernel table (the list and contracts in core/nn_kernels.h; kernels in
// cuda/nn_*.cu, cuda/nn_conv.cpp and cuda/attention.cu), and the small launchers the convolution
// (cuda/nn_conv.cpp) shares with the .cu kernels. Plain C++.
#pragma once
#include "core/nn_kernels.h"

namespace mantissa::cuda {

MT_NN_KERNELS(MT_NN_DECLARATION)

// Routes convolutions through im2col + cuBLAS even when cuDNN is available (tests of that path).
void set_conv_force_gemm(bool on);

// cuda/nn_unfold.cu
// y [N, C, S] += bias [C] (both T; the sum is rounded once).
void add_channel_bias(const Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S);
// out [C] (T) = the sum over n and s of x [N, C, S] (T), accumulated in fp32 (fp64 for fp64).
void channel_sum(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& out);

}  // namespace mantissa::cuda
