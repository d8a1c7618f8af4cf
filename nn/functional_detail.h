// Helpers shared by the nn/functional*.cpp op definitions (not part of the public API).
#pragma once
#include "amp/autocast.h"
#include "autograd/op_helpers.h"
#include "core/launch.h"
#include "core/nn_kernels.h"
#include "nn/functional.h"

namespace mantissa::nn::detail {

using mantissa::detail::describe;
using mantissa::detail::grad_for;
using mantissa::detail::Grads;
using mantissa::detail::needs_grad;
using mantissa::detail::record;
using mantissa::detail::SavedTensor;

// The accumulation dtype of the nn kernels for a floating dtype: fp64 stays fp64, the rest use fp32.
inline DType acc_type(DType t) { return t == DType::Float64 ? DType::Float64 : DType::Float32; }

// `t` converted to `dtype` and made contiguous, with no autograd history (undefined stays undefined).
inline Tensor plain(const Tensor& t, DType dtype) { return t.defined() ? launch::cast(t, dtype) : t; }

// The kernel table of x's device, checked to have entry `fn`.
template <typename Fn>
Fn kernel(const Tensor& x, const char* op, Fn NnKernels::*entry) {
  Fn fn = nn_kernels_for(x.device(), op).*entry;
  MT_CHECK(fn != nullptr, op, "no kernel for ", x.device().str());
  return fn;
}

// x as [N, C, H, W] for the 2-D spatial ops (conv, unfold, pooling): an unbatched [C, H, W]
// input gains N = 1, and `unbatched` says so (the op drops it again from its result).
inline Tensor batched(const char* op, const Tensor& x, bool& unbatched) {
  MT_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), op,
           "expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got ", describe({x}));
  MT_CHECK(is_floating(x.dtype()), op, "expected a floating-point input, got ", describe({x}));
  unbatched = x.dim() == 3;
  return unbatched ? x.unsqueeze(0) : x;
}

// The result of a norm over an input with no elements ([0, C], [N, 0], an empty spatial dim):
// an empty output whose gradients are empty (x) or zero (the affine's weight and bias), as
// PyTorch's. With `per_channel` w and b are [C] and broadcast over dim 1 of x; without, over x's
// trailing dims (layer_norm's normalized_shape).
inline Tensor empty_norm_output(const Tensor& x, const Tensor& w, const Tensor& b, bool per_channel) {
  Tensor y = x * 0.0;
  for (const Tensor& t : {w, b}) {
    if (!t.defined()) continue;
    Shape s(size_t(x.dim()), 1);
    s[1] = t.numel();
    y = y + ((per_channel ? t.reshape(s) : t) * 0.0).to(y.dtype());
  }
  return y;
}

}  // namespace mantissa::nn::detail
