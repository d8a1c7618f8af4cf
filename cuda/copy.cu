// Same-device copy with dtype conversion, and fill. Cross-device and host transfers are
// orchestrated in cuda/backend.cpp on top of these.
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {
struct Identity {
  template <typename T>
  __device__ __forceinline__ T operator()(T x) const {
    return x;
  }
};

// out: any strides. out[i] = v
template <typename T>
__global__ void fill_kernel(Indexer<1> ix, int64_t n, T* y, T v) {
  ix.for_each(n, [&](const Offsets<1>& o) { y[o.v[0]] = v; });
}
}  // namespace

void copy_same_device(const Tensor& src, const Tensor& dst) {
  const int dev = dst.device().index;
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous() && src.sizes() == dst.sizes()) {
    DeviceGuard g(dev);
    MT_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, current_stream(dev)));
    return;
  }
  dispatch_all(src.dtype(), [&]<typename In>() {
    dispatch_all(dst.dtype(), [&]<typename Out>() { launch_unary<In, Out, In>(src, dst, Identity{}, "copy"); });
  });
}

void fill(const Tensor& dst, const Scalar& value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int dev = dst.device().index;
  dispatch_all(dst.dtype(), [&]<typename T>() {
    const T v = Dtypes::from_scalar<T>(value, "fill");
    DeviceGuard g(dev);
    auto ix = make_indexer<1>(dst.sizes(), {dst.strides()}, "fill");
    fill_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(ix, n, dptr<T>(dst), v);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
