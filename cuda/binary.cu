// Binary and where launchers: the dtype rules of core/elementwise_dispatch.h (shared with
// cpu::binary) over this device's loop, and where's kernel.
#include "core/elementwise_dispatch.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {
// cond, a, b: broadcast/strided to out's shape; out: any strides.
// out[i] = cond[i] ? a[i] : b[i]
template <typename T>
__global__ void where_kernel(Indexer<4> ix, int64_t n, const bool* c, const T* a, const T* b, T* y) {
  ix.for_each(n, [&](const Offsets<4>& o) { y[o.v[0]] = c[o.v[1]] ? a[o.v[2]] : b[o.v[3]]; });
}
}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double s0, double s1) {
  const char* name = op_name(op);
  elementwise::run_binary<Dtypes>(op, a.dtype(), s0, s1, [&]<typename In, typename Out, typename Acc>(auto f) {
    launch_binary<In, Out, Acc>(a, b, out, f, name);
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MT_CHECK(cond.dtype() == DType::Bool, "where", "condition must be bool, got ", dtype_name(cond.dtype()));
  const int dev = out.device().index;
  dispatch_all(out.dtype(), [&]<typename T>() {
    DeviceGuard g(dev);
    const Shape& s = out.sizes();
    auto ix = make_indexer<4>(s, {out.strides(), bstrides(cond, s), bstrides(a, s), bstrides(b, s)}, "where");
    where_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(
        ix, n, dptr<const bool>(cond), dptr<const T>(a), dptr<const T>(b), dptr<T>(out));
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
