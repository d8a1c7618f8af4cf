// The fused per-parameter update pass every optimizer runs (design §4 "step").
//
// One loop over a parameter's elements:
//   g  = grad[i] * inv_scale                  (the GradScaler's 1/S; 1 without one)
//   f(w[i], g, state...)                      (the optimizer's functor, core/elementwise_math.h)
//   w16[i] = round(w[i])                      (only when the parameter has an AMP working copy)
// then the master's version is bumped and the working copy is marked fresh for that version,
// so the next autocast forward reuses it without a cast. Internal to optim/: optimizers
// call fused_update() from their update() with a lambda that applies their functor.
#pragma once
#include <array>
#include <type_traits>

#include "autograd/autocast.h"
#include "core/cpu/loops.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/tensor.h"

namespace mantissa::optim::detail {

// Calls f.template operator()<T>() with T the C++ type of a master weight: float or double.
template <typename F>
void dispatch_master(const char* op, const Tensor& param, F&& f) {
  switch (param.dtype()) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    default:
      MT_FAIL(op, "cannot update a ", dtype_name(param.dtype()), " parameter of shape ", param.shape_str(),
              ": optimizers update float32 (or float64) master weights; keep parameters in float32 and use "
              "amp::Autocast for float16/bfloat16 compute");
  }
}

// The element loop on contiguous buffers. W is the working copy's element type (void: none).
template <typename T, typename W, size_t N, typename Body>
void fused_loop(int64_t n, T* w, const T* g, std::array<T*, N> s, W* wc, T inv_scale, const Body& body) {
  cpu::parallel_for(0, n, cpu::kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T wi = w[i];
      std::array<T, N> si;
      for (size_t k = 0; k < N; ++k) si[k] = s[k][i];
      body(wi, g[i] * inv_scale, si);
      w[i] = wi;
      for (size_t k = 0; k < N; ++k) s[k][i] = si[k];
      if constexpr (!std::is_void_v<W>) wc[i] = cpu::cast_to<W>(wi);
    }
  });
}

// Runs the fused update of `param` (a CPU master of type T) with gradient `grad` and the
// contiguous state tensors `state` (same shape, type T). body(T& w, T g, std::array<T, N>& s)
// applies the optimizer's functor to one element. Call under NoGradGuard.
template <typename T, size_t N, typename Body>
void fused_update(const char* op, const Tensor& param, const Tensor& grad, const std::array<Tensor, N>& state,
                  T inv_scale, const Body& body) {
  MT_CHECK(param.device().is_cpu(), op, "the fused update of a parameter on ", param.device(),
           " is not available in this build (CPU only)");
  MT_CHECK(grad.device() == param.device(), op, "gradient on ", grad.device(), " but parameter on ", param.device());
  MT_CHECK(grad.sizes() == param.sizes(), op, "gradient of shape ", grad.shape_str(),
           " does not match parameter shape ", param.shape_str());
  MT_CHECK(grad.is_floating_point(), op, "gradient has non-floating dtype ", dtype_name(grad.dtype()));
  // A gradient of another float type (set by hand) is read through a converted copy.
  Tensor g = launch::contiguous(launch::cast(grad, param.dtype()));
  for (const Tensor& s : state)
    MT_CHECK(s.defined() && s.is_contiguous() && s.dtype() == param.dtype() && s.sizes() == param.sizes(), op,
             "internal: state tensor does not match its parameter");

  // Strided masters and working copies (rare: params are normally contiguous) are updated
  // through contiguous temporaries and copied back.
  Tensor w = param.is_contiguous() ? param : launch::contiguous(param);
  Tensor wc_target = amp::working_copy_for_refresh(param);
  Tensor wc;
  if (wc_target.defined()) {
    MT_CHECK(
        wc_target.numel() == param.numel() && wc_target.device() == param.device() && is_floating(wc_target.dtype()),
        op, "the working copy of a parameter of shape ", param.shape_str(), " is ", wc_target.shape_str(), " ",
        dtype_name(wc_target.dtype()), " on ", wc_target.device());
    wc = wc_target.is_contiguous() ? wc_target : launch::contiguous(wc_target);
  }

  std::array<T*, N> sp;
  for (size_t k = 0; k < N; ++k) sp[k] = state[k].template data_ptr<T>();
  const int64_t n = param.numel();
  T* wp = w.data_ptr<T>();
  const T* gp = g.data_ptr<T>();
  if (!wc.defined()) {
    fused_loop<T, void, N>(n, wp, gp, sp, nullptr, inv_scale, body);
  } else {
    cpu::dispatch_floating(
        wc.dtype(), op, [&]<typename W>() { fused_loop<T, W, N>(n, wp, gp, sp, wc.data_ptr<W>(), inv_scale, body); });
  }

  const Backend& be = cpu_backend();
  if (!w.is_same(param)) be.copy(w, param);
  param.bump_version();
  if (wc.defined()) {
    if (!wc.is_same(wc_target)) be.copy(wc, wc_target);
    // Graphs that saved the old working copy must not backward through the new values.
    wc_target.bump_version();
    amp::mark_working_copy_fresh(param);
  }
}

}  // namespace mantissa::optim::detail
