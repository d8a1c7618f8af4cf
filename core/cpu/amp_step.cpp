// The CPU row of the fused optimizer step and the loss-scale update (contracts in
// core/backend.h). The per-element math is core/step_math.h's, shared with
// cuda/amp_step.cu; on the CPU the flags are plain memory, so reading them is free.
#include <array>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/step_math.h"

namespace mantissa::cpu {

namespace {

// The element loop over one parameter: g = grad * inv_scale, body(w, g, state), wc = round(w).
// W is the working copy's element type (void: none).
template <typename T, typename W, int N, typename Body>
void step_loop(int64_t n, T* w, const T* g, std::array<T*, 3> s, W* wc, T inv_scale, const Body& body) {
  parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
    // Locals, not the captured references: read through the closure inside the loop, the
    // functor's flags could alias the stores and GCC 12 kept the loop scalar. No `omp simd`
    // either: it turns the locals passed by reference into per-lane arrays it cannot vectorize.
    const Body f = body;
    T* const wp = w;
    const T* const gp = g;
    const std::array<T*, 3> sp = s;
    W* const wcp = wc;
    const T inv = inv_scale;
    // fp16/bf16 working copies of fp32 masters are rounded after each chunk of updates, in a
    // loop of their own (narrow_block): fused into the update loop, the rounding kept it scalar.
    constexpr bool kBlockCopy = std::is_same_v<T, float> && (std::is_same_v<W, Half> || std::is_same_v<W, BFloat16>);
    constexpr int64_t kChunk = kBlockCopy ? 1024 : int64_t(1) << 62;
    for (int64_t i0 = b; i0 < e; i0 += kChunk) {
      const int64_t i1 = std::min(e, i0 + kChunk);
      for (int64_t i = i0; i < i1; ++i) {
        T wi = wp[i];
        std::array<T, 3> si{};
        for (int k = 0; k < N; ++k) si[k] = sp[k][i];
        f(wi, gp[i] * inv, si);
        wp[i] = wi;
        for (int k = 0; k < N; ++k) sp[k][i] = si[k];
        // No `continue` here for the other cases: with one, GCC 12 kept the loop scalar.
        if constexpr (!kBlockCopy && !std::is_void_v<W>) wcp[i] = cast_to<W>(wi);
      }
      if constexpr (kBlockCopy) narrow_block(wp + i0, wcp + i0, i1 - i0);
    }
  });
}

template <typename T, int N, typename Body>
void step_tensor(const FusedStepTensor& p, T inv_scale, const Body& body) {
  std::array<T*, 3> s{};
  for (int k = 0; k < N; ++k) s[k] = p.state[size_t(k)].data_ptr<T>();
  const int64_t n = p.param.numel();
  T* w = p.param.data_ptr<T>();
  const T* g = p.grad.data_ptr<T>();
  if (!p.working_copy.defined()) return step_loop<T, void, N>(n, w, g, s, nullptr, inv_scale, body);
  dispatch_floating(p.working_copy.dtype(), "fused_optimizer_step", [&]<typename W>() {
    step_loop<T, W, N>(n, w, g, s, p.working_copy.data_ptr<W>(), inv_scale, body);
  });
}

// The update of one element with the optimizer's state slots; always inlined into step_loop
// (as a lambda GCC 12 called it per element in the loop without a working copy: the fp32
// MLP's SGD step ran 12x slower than the bf16 one).
template <typename T>
struct AdamBody {
  math::AdamUpdateT<T> f;
  MT_HOST_DEVICE void operator()(T& w, T g, std::array<T, 3>& s) const { f(w, g, s[0], s[1], s[2]); }
};
template <typename T>
struct SgdBody {
  math::SgdUpdateT<T> f;
  MT_HOST_DEVICE void operator()(T& w, T g, std::array<T, 3>& s) const { f(w, g, s[0]); }
};

// RMSprop: s[0] square_avg, then momentum_buffer (with momentum) and grad_avg (centered), at
// the slots kBuf and kAvg (-1: absent, written to a local that is dropped).
template <typename T, int kBuf, int kAvg>
struct RmsPropBody {
  math::RmsPropUpdateT<T> f;
  MT_HOST_DEVICE void operator()(T& w, T g, std::array<T, 3>& s) const {
    T unused_buf = T(0), unused_avg = T(0);
    f(w, g, s[0], kBuf >= 0 ? s[kBuf < 0 ? 0 : kBuf] : unused_buf, kAvg >= 0 ? s[kAvg < 0 ? 0 : kAvg] : unused_avg);
  }
};
template <typename T>
struct AdagradBody {
  math::AdagradUpdateT<T> f;
  MT_HOST_DEVICE void operator()(T& w, T g, std::array<T, 3>& s) const { f(w, g, s[0]); }
};

template <typename T, int N>
void rmsprop_tensor(const FusedStepTensor& p, const math::OptimizerHyper& h, T inv_scale) {
  const math::RmsPropUpdateT<T> f = math::rmsprop_update_for<T>(h);
  const bool with_momentum = h.momentum > 0;
  if constexpr (N == 1) {
    step_tensor<T, 1>(p, inv_scale, RmsPropBody<T, -1, -1>{f});
  } else if constexpr (N == 2) {
    if (with_momentum)
      step_tensor<T, 2>(p, inv_scale, RmsPropBody<T, 1, -1>{f});
    else
      step_tensor<T, 2>(p, inv_scale, RmsPropBody<T, -1, 1>{f});
  } else if constexpr (N == 3) {
    step_tensor<T, 3>(p, inv_scale, RmsPropBody<T, 1, 2>{f});
  } else {
    MT_FAIL("fused_optimizer_step", "internal: RMSprop with ", N, " state buffers");
  }
}

template <typename T, int N>
void step_all(const FusedStepArgs& a, T inv_scale) {
  const math::OptimizerHyper& h = a.hyper;
  for (const FusedStepTensor& p : a.tensors) {
    int64_t& count = *p.step.data_ptr<int64_t>();
    const int64_t t = count + 1;
    if (h.kind == math::OptimizerKind::Adam)
      step_tensor<T, N>(p, inv_scale, AdamBody<T>{math::adam_update_for<T>(h, t)});
    else if (h.kind == math::OptimizerKind::RmsProp)
      rmsprop_tensor<T, N>(p, h, inv_scale);
    else if (h.kind == math::OptimizerKind::Adagrad)
      step_tensor<T, N>(p, inv_scale, AdagradBody<T>{math::adagrad_update_for<T>(h, t)});
    else
      step_tensor<T, N>(p, inv_scale, SgdBody<T>{math::sgd_update_for<T>(h, t == p.first_at_step)});
    count = t;
  }
}

}  // namespace

void fused_optimizer_step(const FusedStepArgs& a) {
  if (a.tensors.empty()) return;
  if (a.found_inf.defined() && *a.found_inf.data_ptr<float>() != 0.0f) return;
  const DType master = a.tensors.front().param.dtype();
  for (const FusedStepTensor& p : a.tensors)
    MT_CHECK(p.param.dtype() == master, "fused_optimizer_step", "one launch mixes ", dtype_name(master), " and ",
             dtype_name(p.param.dtype()), " masters");
  // The factor as the unfused code computed it: the host's float inv_scale, then 1 / scale.
  double inv = a.inv_scale;
  if (a.scale.defined()) inv = double(float(1.0 / double(*a.scale.data_ptr<float>()))) * a.inv_scale;
  auto run = [&]<typename T>() {
    const T inv_scale = T(inv);
    switch (a.num_state) {
      case 0:
        return step_all<T, 0>(a, inv_scale);
      case 1:
        return step_all<T, 1>(a, inv_scale);
      case 2:
        return step_all<T, 2>(a, inv_scale);
      default:
        return step_all<T, 3>(a, inv_scale);
    }
  };
  if (master == DType::Float64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
}

void update_scale(const Tensor& scale, const Tensor& counters, const Tensor& found_inf, const math::ScaleUpdate& rule) {
  float* flag = found_inf.defined() ? found_inf.data_ptr<float>() : nullptr;
  int32_t* c = counters.data_ptr<int32_t>();
  rule(*scale.data_ptr<float>(), c[0], c[1], c[2], flag != nullptr && *flag != 0.0f);
  if (flag) *flag = 0.0f;
}

}  // namespace mantissa::cpu
