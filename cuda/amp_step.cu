// The fused optimizer step and the loss-scale update on the GPU (contracts in
// core/backend.h), without a host synchronisation anywhere in a training step.
//
// Design constraints:
//  * the per-element math is core/step_math.h's (SgdUpdateT / AdamUpdateT / RmsPropUpdateT /
//    AdagradUpdateT, built per parameter by their *_update_for), exactly what the CPU row runs;
//  * the found-inf flag, the loss scale and the step counts are device memory: the step
//    kernel reads the flag and returns at once when it is set (params, moments, working
//    copies and step counts untouched), and update_scale adjusts the scale on the device;
//  * multi-tensor launches (as PyTorch's multi_tensor_apply), planned on the host by
//    core/multi_tensor_plan.h (tested on the CPU): a model of hundreds of small tensors costs
//    a handful of launches, not one (or several) per parameter.
#include <type_traits>
#include <vector>

#include "core/multi_tensor_plan.h"
#include "core/step_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {

using multi_tensor::kChunk;
using multi_tensor::TensorList;
constexpr int kStepThreads = 512;

struct NoWorkingCopy {};

// Per tensor i of the list, elements of one chunk:
//   param, state[0..N): T [numel] updated in place; grad: T [numel]; working_copy: W [numel]
//   t = *step + 1 (the count including this update; incremented later by increment_steps)
//   g = grad * inv_scale / *scale;  f_t(param, g, state...);  working_copy = round(param)
// Nothing happens when *found_inf != 0.
template <typename T, typename W, int N, math::OptimizerKind kKind>
__global__ void __launch_bounds__(kStepThreads)
    fused_step_kernel(TensorList list, math::OptimizerHyper hyper, float host_inv_scale, const float* scale,
                      const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  const int ti = list.block_tensor[blockIdx.x];
  int64_t begin = 0, end = 0;
  multi_tensor::chunk_range(list, int(blockIdx.x), kChunk, begin, end);
  const int64_t t = *list.step[ti] + 1;
  // The factor exactly as the CPU row forms it: float(1 / S), times the host factor, rounded to T.
  double inv = host_inv_scale;
  if (scale != nullptr) inv = double(float(1.0 / double(*scale))) * double(host_inv_scale);
  const T inv_scale = T(inv);

  T* w = static_cast<T*>(list.param[ti]);
  const T* g = static_cast<const T*>(list.grad[ti]);
  T* s0 = static_cast<T*>(list.state[0][ti]);
  W* wc = static_cast<W*>(list.working_copy[ti]);
  (void)wc;  // unused without a working copy
  if constexpr (kKind == math::OptimizerKind::Adam) {
    T* s1 = static_cast<T*>(list.state[1][ti]);
    T* s2 = static_cast<T*>(list.state[2][ti]);
    const math::AdamUpdateT<T> f = math::adam_update_for<T>(hyper, t);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      T wi = w[i], m = s0[i], v = s1[i], vmax = N > 2 ? s2[i] : T(0);
      f(wi, g[i] * inv_scale, m, v, vmax);
      w[i] = wi;
      s0[i] = m;
      s1[i] = v;
      if constexpr (N > 2) s2[i] = vmax;
      if constexpr (!std::is_same_v<W, NoWorkingCopy>) wc[i] = cast_to<W>(wi);
    }
  } else if constexpr (kKind == math::OptimizerKind::RmsProp) {
    // state: square_avg, then momentum_buffer (momentum > 0), then grad_avg (centered).
    const math::RmsPropUpdateT<T> f = math::rmsprop_update_for<T>(hyper);
    const bool with_momentum = hyper.momentum > 0;
    T* buf_p = N > 1 && with_momentum ? static_cast<T*>(list.state[1][ti]) : nullptr;
    T* avg_p = hyper.centered ? static_cast<T*>(list.state[with_momentum ? 2 : 1][ti]) : nullptr;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      T wi = w[i], sq = s0[i], buf = buf_p ? buf_p[i] : T(0), avg = avg_p ? avg_p[i] : T(0);
      f(wi, g[i] * inv_scale, sq, buf, avg);
      w[i] = wi;
      s0[i] = sq;
      if (buf_p) buf_p[i] = buf;
      if (avg_p) avg_p[i] = avg;
      if constexpr (!std::is_same_v<W, NoWorkingCopy>) wc[i] = cast_to<W>(wi);
    }
  } else if constexpr (kKind == math::OptimizerKind::Adagrad) {
    const math::AdagradUpdateT<T> f = math::adagrad_update_for<T>(hyper, t);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      T wi = w[i], sum = s0[i];
      f(wi, g[i] * inv_scale, sum);
      w[i] = wi;
      s0[i] = sum;
      if constexpr (!std::is_same_v<W, NoWorkingCopy>) wc[i] = cast_to<W>(wi);
    }
  } else {
    const math::SgdUpdateT<T> f = math::sgd_update_for<T>(hyper, t == list.first_at_step[ti]);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      T wi = w[i], buf = N > 0 ? s0[i] : T(0);
      f(wi, g[i] * inv_scale, buf);
      w[i] = wi;
      if constexpr (N > 0) s0[i] = buf;
      if constexpr (!std::is_same_v<W, NoWorkingCopy>) wc[i] = cast_to<W>(wi);
    }
  }
}

// steps: count int64 [1] counters; each += 1 unless *found_inf != 0. Runs after every
// fused_step_kernel of the step (same stream), which read the old values.
__global__ void increment_steps_kernel(multi_tensor::StepList list, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  for (int i = threadIdx.x; i < list.count; i += blockDim.x) ++*list.step[i];
}

// scale: float [1]; counters: int32 [3]; found_inf: float [1] or null (read, then cleared).
__global__ void update_scale_kernel(float* scale, int32_t* counters, float* found_inf, math::ScaleUpdate rule) {
  const bool inf = found_inf != nullptr && *found_inf != 0.0f;
  rule(*scale, counters[0], counters[1], counters[2], inf);
  if (found_inf != nullptr) *found_inf = 0.0f;
}

const float* flag_ptr(const Tensor& t, Device device, const char* what) {
  if (!t.defined()) return nullptr;
  MT_CHECK(t.dtype() == DType::Float32 && t.numel() == 1 && t.device() == device, "fused_optimizer_step", what,
           " must be a float32 [1] tensor on ", device.str(), ", got ", t.shape_str(), " ", dtype_name(t.dtype()),
           " on ", t.device().str());
  return dptr<const float>(t);
}

// Launches fused_step_kernel over `tensors` (one master type T, one working-copy type W),
// in as many launches as the per-launch limits need.
template <typename T, typename W, int N, math::OptimizerKind kKind>
void launch_lists(const std::vector<const FusedStepTensor*>& tensors, const FusedStepArgs& a, const float* scale,
                  const float* found_inf, cudaStream_t stream) {
  std::vector<multi_tensor::TensorEntry> entries;
  entries.reserve(tensors.size());
  for (const FusedStepTensor* p : tensors) {
    multi_tensor::TensorEntry e;
    e.param = p->param.raw_data();
    e.grad = p->grad.raw_data();
    for (int k = 0; k < N; ++k) e.state[k] = p->state[size_t(k)].raw_data();
    e.working_copy = p->working_copy.defined() ? p->working_copy.raw_data() : nullptr;
    e.step = dptr<const int64_t>(p->step);
    e.first_at_step = p->first_at_step;
    e.numel = p->param.numel();
    entries.push_back(e);
  }
  for (const multi_tensor::Launch& l : multi_tensor::plan_launches(entries)) {
    fused_step_kernel<T, W, N, kKind>
        <<<l.blocks, kStepThreads, 0, stream>>>(l.list, a.hyper, a.inv_scale, scale, found_inf);
    MT_CUDA_CHECK_LAUNCH();
  }
}

template <typename T, typename W>
void launch_for_kind(const std::vector<const FusedStepTensor*>& tensors, const FusedStepArgs& a, const float* scale,
                     const float* found_inf, cudaStream_t stream) {
  using K = math::OptimizerKind;
  const K kind = a.hyper.kind;
  if (kind == K::Adam && a.num_state == 3) return launch_lists<T, W, 3, K::Adam>(tensors, a, scale, found_inf, stream);
  if (kind == K::Adam && a.num_state == 2) return launch_lists<T, W, 2, K::Adam>(tensors, a, scale, found_inf, stream);
  if (kind == K::Sgd && a.num_state == 1) return launch_lists<T, W, 1, K::Sgd>(tensors, a, scale, found_inf, stream);
  if (kind == K::Sgd && a.num_state == 0) return launch_lists<T, W, 0, K::Sgd>(tensors, a, scale, found_inf, stream);
  if (kind == K::RmsProp && a.num_state == 3)
    return launch_lists<T, W, 3, K::RmsProp>(tensors, a, scale, found_inf, stream);
  if (kind == K::RmsProp && a.num_state == 2)
    return launch_lists<T, W, 2, K::RmsProp>(tensors, a, scale, found_inf, stream);
  if (kind == K::RmsProp && a.num_state == 1)
    return launch_lists<T, W, 1, K::RmsProp>(tensors, a, scale, found_inf, stream);
  if (kind == K::Adagrad && a.num_state == 1)
    return launch_lists<T, W, 1, K::Adagrad>(tensors, a, scale, found_inf, stream);
  MT_FAIL("fused_optimizer_step", "internal: optimizer kind ", int(kind), " with ", a.num_state, " state buffers");
}

}  // namespace

void fused_optimizer_step(const FusedStepArgs& a) {
  if (a.tensors.empty()) return;
  const Device device = a.tensors.front().param.device();
  const int dev = device.index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  const float* scale = flag_ptr(a.scale, device, "scale");
  const float* found_inf = flag_ptr(a.found_inf, device, "found_inf");
  const DType master = a.tensors.front().param.dtype();

  // One kernel instantiation per working-copy type: bucket the tensors by it.
  // 0: none, 1: float16, 2: bfloat16, 3: float32.
  std::vector<const FusedStepTensor*> buckets[4];
  for (const FusedStepTensor& p : a.tensors) {
    MT_CHECK(p.param.device() == device && p.param.dtype() == master && p.param.is_contiguous() &&
                 p.grad.dtype() == master && p.grad.is_contiguous() && p.grad.numel() == p.param.numel() &&
                 p.step.defined() && p.step.dtype() == DType::Int64 && p.step.device() == device,
             "fused_optimizer_step", "internal: parameter of shape ", p.param.shape_str(),
             " does not match the launch (", dtype_name(master), " on ", device.str(), ")");
    for (int k = 0; k < a.num_state; ++k)
      MT_CHECK(p.state[size_t(k)].defined() && p.state[size_t(k)].dtype() == master &&
                   p.state[size_t(k)].numel() == p.param.numel() && p.state[size_t(k)].device() == device,
               "fused_optimizer_step", "internal: state ", k, " does not match its parameter");
    int code = 0;
    if (p.working_copy.defined()) {
      MT_CHECK(p.working_copy.device() == device && p.working_copy.is_contiguous(), "fused_optimizer_step",
               "internal: working copy not contiguous on ", device.str());
      switch (p.working_copy.dtype()) {
        case DType::Float16:
          code = 1;
          break;
        case DType::BFloat16:
          code = 2;
          break;
        case DType::Float32:
          code = 3;
          break;
        default:
          MT_FAIL("fused_optimizer_step", "working copy of dtype ", dtype_name(p.working_copy.dtype()));
      }
    }
    buckets[code].push_back(&p);
  }

  auto run = [&]<typename T>() {
    if (!buckets[0].empty()) launch_for_kind<T, NoWorkingCopy>(buckets[0], a, scale, found_inf, stream);
    if (!buckets[1].empty()) launch_for_kind<T, __half>(buckets[1], a, scale, found_inf, stream);
    if (!buckets[2].empty()) launch_for_kind<T, __nv_bfloat16>(buckets[2], a, scale, found_inf, stream);
    if (!buckets[3].empty()) launch_for_kind<T, float>(buckets[3], a, scale, found_inf, stream);
  };
  if (master == DType::Float64)
    run.template operator()<double>();
  else if (master == DType::Float32)
    run.template operator()<float>();
  else
    MT_FAIL("fused_optimizer_step", "masters must be float32 or float64, got ", dtype_name(master));

  // The step counts advance after every update kernel has read them.
  std::vector<int64_t*> steps;
  steps.reserve(a.tensors.size());
  for (const FusedStepTensor& p : a.tensors) steps.push_back(dptr<int64_t>(p.step));
  for (const multi_tensor::StepList& l : multi_tensor::plan_step_lists(steps)) {
    increment_steps_kernel<<<1, 256, 0, stream>>>(l, found_inf);
    MT_CUDA_CHECK_LAUNCH();
  }
}

void update_scale(const Tensor& scale, const Tensor& counters, const Tensor& found_inf, const math::ScaleUpdate& rule) {
  const Device device = scale.device();
  MT_CHECK(scale.dtype() == DType::Float32 && scale.numel() == 1, "update_scale", "scale must be float32 [1]");
  MT_CHECK(counters.dtype() == DType::Int32 && counters.numel() == 3 && counters.device() == device, "update_scale",
           "counters must be int32 [3] on ", device.str());
  float* flag = nullptr;
  if (found_inf.defined()) {
    MT_CHECK(found_inf.dtype() == DType::Float32 && found_inf.numel() == 1 && found_inf.device() == device,
             "update_scale", "found_inf must be float32 [1] on ", device.str());
    flag = dptr<float>(found_inf);
  }
  DeviceGuard guard(device.index);
  update_scale_kernel<<<1, 1, 0, current_stream(device.index)>>>(dptr<float>(scale), dptr<int32_t>(counters), flag,
                                                                 rule);
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mantissa::cuda
