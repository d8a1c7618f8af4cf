// Getting parameters ready for the fused optimizer step (docs/design.md §4 "step"), on any device.
//
// The element work is one dispatch-table entry, Backend::fused_optimizer_step (CPU:
// core/cpu/amp_step.cpp; CUDA: cuda/amp_step.cu, one multi-tensor kernel per launch):
//   g  = grad * inv_scale / scale             (the GradScaler's 1/S; 1 without one)
//   f_t(w, g, state...)                       (the optimizer's functor, core/step_math.h)
//   w16 = round(w)                            (only when the parameter has an AMP working copy)
// Around it, this file does the host-side bookkeeping the kernels must not: a gradient of
// another dtype is converted, strided masters / working copies go through contiguous
// temporaries that are copied back afterwards, then the master's version is bumped and the
// working copy marked fresh for it, so the next autocast forward reuses it without a cast.
// Internal to optim/.
#pragma once
#include <vector>

#include "amp/autocast.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/tensor.h"

namespace mantissa::optim::detail {

// What must happen after the kernels ran, per parameter.
struct AfterStep {
  Tensor param, master;  // master: param itself, or its contiguous temporary
  Tensor wc_target, wc;  // the working copy and what the kernel wrote (itself or a temporary)
};

// Checks `param` and `grad` and returns the kernel's view of them (state and step are
// filled in by the caller); records the follow-up work in `after`.
inline FusedStepTensor prepare_param(const char* op, const Tensor& param, const Tensor& grad,
                                     std::vector<AfterStep>& after) {
  MT_CHECK(param.dtype() == DType::Float32 || param.dtype() == DType::Float64, op, "cannot update a ",
           dtype_name(param.dtype()), " parameter of shape ", param.shape_str(),
           ": optimizers update float32 (or float64) master weights; keep parameters in float32 and use "
           "amp::Autocast for float16/bfloat16 compute");
  MT_CHECK(grad.device() == param.device(), op, "gradient on ", grad.device(), " but parameter on ", param.device());
  MT_CHECK(grad.sizes() == param.sizes(), op, "gradient of shape ", grad.shape_str(),
           " does not match parameter shape ", param.shape_str());
  MT_CHECK(grad.is_floating_point(), op, "gradient has non-floating dtype ", dtype_name(grad.dtype()));

  FusedStepTensor t;
  // A gradient of another float type (set by hand) or layout is read through a converted copy.
  t.grad = launch::cast(grad, param.dtype());
  // Strided masters and working copies (rare: params are normally contiguous) are updated
  // through contiguous temporaries and copied back.
  t.param = param.is_contiguous() ? param : launch::contiguous(param);
  AfterStep a{param, t.param, Tensor(), Tensor()};
  Tensor wc_target = amp::working_copy_for_refresh(param);
  if (wc_target.defined()) {
    MT_CHECK(
        wc_target.numel() == param.numel() && wc_target.device() == param.device() && is_floating(wc_target.dtype()),
        op, "the working copy of a parameter of shape ", param.shape_str(), " is ", wc_target.shape_str(), " ",
        dtype_name(wc_target.dtype()), " on ", wc_target.device());
    t.working_copy = wc_target.is_contiguous() ? wc_target : launch::contiguous(wc_target);
    a.wc_target = wc_target;
    a.wc = t.working_copy;
  }
  after.push_back(std::move(a));
  return t;
}

// Copies temporaries back and marks versions once the kernels are queued.
inline void finish_param(const AfterStep& a) {
  const Backend& be = backend_for(a.param.device());
  if (!a.master.is_same(a.param)) be.copy(a.master, a.param);
  a.param.bump_version();
  if (a.wc_target.defined()) {
    if (!a.wc.is_same(a.wc_target)) be.copy(a.wc, a.wc_target);
    // Graphs that saved the old working copy must not backward through the new values.
    a.wc_target.bump_version();
    amp::mark_working_copy_fresh(a.param);
  }
}

}  // namespace mantissa::optim::detail
