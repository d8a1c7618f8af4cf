// Gradient accumulation with the GradScaler's non-finite check fused in (docs/design.md §4): the
// same functor as core/cpu/grad.cpp, and the flag stays on the device (no host sync).
#include "core/step_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {
// src: broadcast/strided to dst's shape; dst: any strides; found_inf: float [1] or null.
// dst[i] = (init ? 0 : dst[i]) + src[i] in Acc; *found_inf = 1 if any src[i] is inf/NaN
template <typename S, typename D, typename Acc>
__global__ void accumulate_grad_kernel(Indexer<2> ix, int64_t n, const S* x, D* y, bool init, float* found_inf) {
  const math::AccumulateAndCheck op;
  bool bad = false;
  ix.for_each(n, [&](const Offsets<2>& o) {
    const Acc acc = init ? Acc(0) : cast_to<Acc>(y[o.v[0]]);
    y[o.v[0]] = cast_to<D>(op(acc, cast_to<Acc>(x[o.v[1]]), bad));
  });
  if (bad && found_inf) *found_inf = 1.0f;  // every writer stores the same value: no atomic needed
}

// src: any strides; *found_inf = 1 if any src[i] is inf/NaN (the check-only mode: dst undefined)
template <typename S, typename Acc>
__global__ void check_finite_kernel(Indexer<1> ix, int64_t n, const S* x, float* found_inf) {
  const math::AccumulateAndCheck op;
  bool bad = false;
  ix.for_each(n, [&](const Offsets<1>& o) { (void)op(Acc(0), cast_to<Acc>(x[o.v[0]]), bad); });
  if (bad) *found_inf = 1.0f;
}
}  // namespace

void accumulate_grad(const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf) {
  // With dst undefined, src is only checked into found_inf (as core/cpu/grad.cpp).
  if (!dst.defined()) {
    const int64_t n = src.numel();
    if (n == 0 || !found_inf.defined()) return;
    MT_CHECK(found_inf.dtype() == DType::Float32 && found_inf.device() == src.device(), "accumulate_grad",
             "found_inf must be a float32 tensor on ", src.device().str());
    const int dev = src.device().index;
    DeviceGuard g(dev);
    dispatch_floating(src.dtype(), "accumulate_grad", [&]<typename S>() {
      using Acc = std::conditional_t<std::is_same_v<S, double>, double, float>;
      auto ix = make_indexer<1>(src.sizes(), {src.strides()}, "accumulate_grad");
      check_finite_kernel<S, Acc>
          <<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(ix, n, dptr<const S>(src), dptr<float>(found_inf));
      MT_CUDA_CHECK_LAUNCH();
    });
    return;
  }
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (found_inf.defined())
    MT_CHECK(found_inf.dtype() == DType::Float32 && found_inf.device() == dst.device(), "accumulate_grad",
             "found_inf must be a float32 tensor on ", dst.device().str());
  const int dev = dst.device().index;
  DeviceGuard g(dev);
  float* flag = found_inf.defined() ? dptr<float>(found_inf) : nullptr;
  dispatch_floating(src.dtype(), "accumulate_grad", [&]<typename S>() {
    dispatch_floating(dst.dtype(), "accumulate_grad", [&]<typename D>() {
      using Acc = std::conditional_t<std::is_same_v<D, double>, double, float>;
      auto ix = make_indexer<2>(dst.sizes(), {dst.strides(), bstrides(src, dst.sizes())}, "accumulate_grad");
      accumulate_grad_kernel<S, D, Acc>
          <<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(ix, n, dptr<const S>(src), dptr<D>(dst), init, flag);
      MT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace mantissa::cuda
