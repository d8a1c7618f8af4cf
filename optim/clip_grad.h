// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
#pragma once
#include <limits>
#include <vector>

#include "core/tensor.h"

namespace mantissa::optim {

// Scales the gradients of `params` in place so that their total norm (the `norm_type`-norm
// of all gradients concatenated; infinity for the max-abs norm) is at most max_norm, and
// returns that total norm before clipping as a 0-dim tensor (float32, or float64 when a
// gradient is float64) on the gradients' device, so no host sync is forced. Norms of
// float16/bfloat16 gradients are accumulated in float32. Parameters without a gradient
// are ignored; with none at all the result is 0. error_if_nonfinite throws when the
// total norm is inf or NaN (this reads it on the host).
//
//   loss.backward();
//   double norm = mt::optim::clip_grad_norm_(params, 1.0).item<double>();
//   opt.step();
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2,
                       bool error_if_nonfinite = false);

// Clamps every gradient of `params` to [-clip_value, clip_value] in place.
//   mt::optim::clip_grad_value_(params, 0.5);
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace mantissa::optim
