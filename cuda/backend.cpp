// The CUDA row of the dispatch table, and copies between the host and GPUs.
//
// Transfers move only contiguous bytes of one dtype; dtype conversion, broadcasting and
// strided layouts are handled by the same-device copy kernel on the GPU side (or the CPU
// copy on the host side), so each direction is: reshape/convert where it is cheap, move,
// scatter into the destination's strides.
#include <cstring>
#include <memory>

#include "cuda/allocator.h"
#include "cuda/device.h"
#include "cuda/kernels.h"

namespace mantissa {
namespace cuda {

namespace {

// Uploads up to this size are staged through pinned memory so that the call returns
// before the DMA finishes (a pageable upload blocks until the stream drains). Larger ones
// go pageable rather than doubling their host footprint.
constexpr size_t kMaxStaged = size_t(64) << 20;

bool same_layout_contiguous(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes();
}

Tensor host_contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), Device::cpu());
  cpu_backend().copy(t, c);
  return c;
}

// Returns a pinned block to the cache once it is no longer needed on the host; the
// recorded use keeps it from being reused before the queued copy has read it.
struct PinnedBlock {
  void* p = nullptr;
  size_t n = 0;
  explicit PinnedBlock(size_t bytes) : p(pinned_allocator()->allocate(bytes)), n(bytes) {}
  ~PinnedBlock() { pinned_allocator()->deallocate(p, n); }
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
};

void upload(void* dst, const void* src, size_t n, int dev, cudaStream_t stream) {
  if (n == 0) return;
  if (n > kMaxStaged) {
    MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
    return;
  }
  PinnedBlock staging(n);
  std::memcpy(staging.p, src, n);
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, staging.p, n, cudaMemcpyHostToDevice, stream));
  record_pinned_use(staging.p, dev, stream);
}

// src on the CPU, dst on a GPU.
void copy_h2d(const Tensor& src, const Tensor& dst) {
  const int dev = dst.device().index;
  DeviceGuard g(dev);
  const cudaStream_t stream = current_stream(dev);
  Tensor host = host_contiguous(src);  // src's own elements (not yet broadcast), its dtype
  const bool direct = same_layout_contiguous(host, dst);
  Tensor target = direct ? dst : make_tensor(src.sizes(), src.dtype(), dst.device());
  if (host.is_pinned()) {
    // Already page-locked (Tensor::pin_memory, the DataLoader): DMA straight from it, and
    // keep the block from being reused before the copy on (dev, stream) has read it. The copy
    // is asynchronous: Tensor::to(device, non_blocking = false) waits for it (sync_stream).
    MT_CUDA_CHECK(cudaMemcpyAsync(target.raw_data(), host.raw_data(), host.nbytes(), cudaMemcpyHostToDevice, stream));
    record_pinned_use(host.impl()->storage->data, dev, stream);
  } else {
    upload(target.raw_data(), host.raw_data(), host.nbytes(), dev, stream);
  }
  if (!direct) copy_same_device(target, dst);
}

// src on a GPU, dst on the CPU. Converts and broadcasts on the GPU (where it is fast),
// then downloads dst's bytes and waits for them.
void copy_d2h(const Tensor& src, const Tensor& dst) {
  const int dev = src.device().index;
  DeviceGuard g(dev);
  const cudaStream_t stream = current_stream(dev);
  Tensor dsrc = src;
  if (!(src.dtype() == dst.dtype() && src.is_contiguous() && src.sizes() == dst.sizes())) {
    dsrc = make_tensor(dst.sizes(), dst.dtype(), src.device());
    copy_same_device(src, dsrc);
  }
  Tensor host = dst.is_contiguous() ? dst : make_tensor(dst.sizes(), dst.dtype(), Device::cpu());
  copy_to_host(host.raw_data(), dsrc.raw_data(), host.nbytes(), dev, stream);
  if (!host.is_same(dst)) cpu_backend().copy(host, dst);
}

// src and dst on different GPUs. Synchronous on both sides: simple and correct, and
// multi-GPU transfers are not on any hot path yet.
void copy_peer(const Tensor& src, const Tensor& dst) {
  const int sdev = src.device().index, ddev = dst.device().index;
  Tensor s = src;
  {
    DeviceGuard g(sdev);
    if (!(src.dtype() == dst.dtype() && src.is_contiguous() && src.sizes() == dst.sizes())) {
      s = make_tensor(dst.sizes(), dst.dtype(), src.device());
      copy_same_device(src, s);
    }
    stream_synchronize(sdev, current_stream(sdev));
  }
  DeviceGuard g(ddev);
  Tensor d = dst.is_contiguous() ? dst : make_tensor(dst.sizes(), dst.dtype(), dst.device());
  const cudaStream_t stream = current_stream(ddev);
  MT_CUDA_CHECK(cudaMemcpyPeerAsync(d.raw_data(), ddev, s.raw_data(), sdev, d.nbytes(), stream));
  stream_synchronize(ddev, stream);  // `s` may be a temporary of sdev's stream
  if (!d.is_same(dst)) copy_same_device(d, dst);
}

}  // namespace

void sync_stream(int device) {
  DeviceGuard g(device);
  stream_synchronize(device, current_stream(device));
}

void copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  const Device sd = src.device(), dd = dst.device();
  if (sd.is_cuda()) check_device_index(sd.index, "copy");
  if (dd.is_cuda()) check_device_index(dd.index, "copy");
  if (sd.is_cuda() && dd.is_cuda()) {
    if (sd == dd) return copy_same_device(src, dst);
    return copy_peer(src, dst);
  }
  if (dd.is_cuda()) return copy_h2d(src, dst);
  if (sd.is_cuda()) return copy_d2h(src, dst);
  cpu_backend().copy(src, dst);
}

}  // namespace cuda

}  // namespace mantissa
