// The CPU row of the nn kernel table (see core/nn_kernels.h for the contracts).
#pragma once
#include "core/nn_kernels.h"

namespace mantissa::cpu {
// core/cpu/nn_conv.cpp
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g);
void conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dGeometry& g);
void im2col(const Tensor& x, const Tensor& cols, const Conv2dGeometry& g);
void col2im(const Tensor& cols, const Tensor& x, const Conv2dGeometry& g);
// core/cpu/nn_pool.cpp
void max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g);
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const Pool2dGeometry& g);
void avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g);
void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g);
void adaptive_avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g);
void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g);
// core/cpu/nn_norm.cpp
void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y, const Tensor& mean,
                const Tensor& rstd);
void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w,
                         const Tensor& gx, const Tensor& gw, const Tensor& gb);
void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var);
void batch_norm_apply(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y);
void batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& w,
                         bool training, const Tensor& gx, const Tensor& gw, const Tensor& gb);
// core/cpu/nn_loss.cpp
void cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                   double label_smoothing, const Tensor& loss, const Tensor& lse);
void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& weight,
                            const Tensor& lse, int64_t ignore_index, double label_smoothing, const Tensor& glogits);
// core/cpu/attention.cpp
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                       const Tensor& lse, const AttentionGeometry& g);
void attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        const Tensor& out, const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                        const AttentionGeometry& g);
void triangle(const Tensor& in, const Tensor& out, int64_t diagonal, bool upper);
}  // namespace mantissa::cpu
