// Interpolation (nearest, linear, bilinear) on the GPU: one thread per output element. The
// backward scatters each gy element into its source pixels with atomicAdd, in an acc-typed
// buffer (float for half types) rounded into gx afterwards, so it is not deterministic in the
// last bit of acc. Source indices and weights come from core/nn_kernels.h, shared with
// core/cpu/nn_upsample.cpp.
#include "core/nn_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

template <typename A>
__device__ UpsampleTap<A> tap(int64_t d, int64_t in, int64_t out, const UpsampleGeometry& g, double scale_factor) {
  if (g.linear) return upsample_linear_tap<A>(d, in, out, g.align_corners, scale_factor);
  const int64_t s = upsample_nearest_source(d, in, out, scale_factor);
  return {s, s, A(1), A(0)};
}

// x: [N, C, IH, IW]; y: [N, C, OH, OW] (total elements).
template <typename T>
__global__ void upsample_kernel(const T* x, T* y, UpsampleGeometry g, int64_t total) {
  using A = acc_t<T>;
  const bool one_h = !g.linear || g.one_d || g.IH == g.OH, one_w = !g.linear || g.IW == g.OW;
  MT_GRID_LOOP(i, total) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
    const UpsampleTap<A> a = tap<A>(oh, g.IH, g.OH, g, g.scale_h), b = tap<A>(ow, g.IW, g.OW, g, g.scale_w);
    const T* xp = x + plane * g.IH * g.IW;
    auto row = [&](int64_t h) {
      const T* r = xp + h * g.IW;
      return one_w ? cast_to<A>(r[b.i0]) : cast_to<A>(r[b.i0]) * b.l0 + cast_to<A>(r[b.i1]) * b.l1;
    };
    const A v = one_h ? row(a.i0) : row(a.i0) * a.l0 + row(a.i1) * a.l1;
    y[i] = cast_to<T>(v);
  }
}

// gy: [N, C, OH, OW] (total elements); acc: [N, C, IH, IW] (A, zeroed), += the adjoint.
template <typename T, typename A>
__global__ void upsample_backward_kernel(const T* gy, A* acc, UpsampleGeometry g, int64_t total) {
  const bool one_h = !g.linear || g.one_d || g.IH == g.OH, one_w = !g.linear || g.IW == g.OW;
  MT_GRID_LOOP(i, total) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
    const UpsampleTap<A> a = tap<A>(oh, g.IH, g.OH, g, g.scale_h), b = tap<A>(ow, g.IW, g.OW, g, g.scale_w);
    A* xp = acc + plane * g.IH * g.IW;
    const A v = cast_to<A>(gy[i]);
    auto put = [&](int64_t h, A vh) {
      A* r = xp + h * g.IW;
      if (one_w) {
        atomicAdd(r + b.i0, vh);
      } else {
        atomicAdd(r + b.i0, vh * b.l0);
        atomicAdd(r + b.i1, vh * b.l1);
      }
    };
    if (one_h) {
      put(a.i0, v);
    } else {
      put(a.i0, v * a.l0);
      put(a.i1, v * a.l1);
    }
  }
}

}  // namespace

void upsample(const Tensor& x, const Tensor& y, const UpsampleGeometry& g) {
  const int64_t total = y.numel();
  if (total == 0) return;
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "upsample", [&]<typename T>() {
    upsample_kernel<T>
        <<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(dptr<const T>(x), dptr<T>(y), g, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void upsample_backward(const Tensor& gy, const Tensor& gx, const UpsampleGeometry& g) {
  if (gx.numel() == 0) return;
  const int dev = gx.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(gy.dtype(), "upsample", [&]<typename T>() {
    using A = acc_t<T>;
    constexpr DType acc_dtype = std::is_same_v<A, double> ? DType::Float64 : DType::Float32;
    Tensor acc = zeros(gx.sizes(), {acc_dtype, gx.device()});
    const int64_t total = gy.numel();
    if (total > 0) {
      upsample_backward_kernel<T, A>
          <<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(dptr<const T>(gy), dptr<A>(acc), g, total);
      MT_CUDA_CHECK_LAUNCH();
    }
    copy(acc, gx);  // rounds into T (a plain copy for float and double)
  });
}

}  // namespace mantissa::cuda
