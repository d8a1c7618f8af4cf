// The CUDA row of the nn kernel table (contracts in core/nn_kernels.h), and the small
// launchers the convolution (cuda/nn_conv.cpp) shares with the .cu kernels. Plain C++:
// the kernels behind these declarations live in cuda/nn_*.cu.
#pragma once
#include "core/nn_kernels.h"

namespace mantissa::cuda {

// cuda/nn_conv.cpp: cuDNN, or im2col + cuBLAS when built without cuDNN.
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g);
void conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dGeometry& g);
// Routes convolutions through im2col + cuBLAS even when cuDNN is available (tests of that path).
void set_conv_force_gemm(bool on);

// cuda/nn_unfold.cu
void im2col(const Tensor& x, const Tensor& cols, const Conv2dGeometry& g);
void col2im(const Tensor& cols, const Tensor& x, const Conv2dGeometry& g);
// y [N, C, S] += bias [C] (both T; the sum is rounded once).
void add_channel_bias(const Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S);
// out [C] (T) = the sum over n and s of x [N, C, S] (T), accumulated in fp32 (fp64 for fp64).
void channel_sum(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& out);

// cuda/nn_pool.cu
void max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g);
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const Pool2dGeometry& g);
void avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g);
void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g);
void adaptive_avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g);
void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g);

// cuda/nn_norm.cu
void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y, const Tensor& mean,
                const Tensor& rstd);
void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w,
                         const Tensor& gx, const Tensor& gw, const Tensor& gb);
void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var);
void batch_norm_apply(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y);
void batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& w,
                         bool training, const Tensor& gx, const Tensor& gw, const Tensor& gb);

// cuda/nn_loss.cu
void cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                   double label_smoothing, const Tensor& loss, const Tensor& lse);
void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& weight,
                            const Tensor& lse, int64_t ignore_index, double label_smoothing, const Tensor& glogits);

// cuda/attention.cu
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                       const Tensor& lse, const AttentionGeometry& g);
void attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        const Tensor& out, const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                        const AttentionGeometry& g);
void triangle(const Tensor& in, const Tensor& out, int64_t diagonal, bool upper);

}  // namespace mantissa::cuda
