// The host's waits for a GPU, counted and followed by the report of the sticky index error
// (core/index_check.h, core/host_sync.h).
#include <array>
#include <mutex>
#include <new>

#include "core/host_sync.h"
#include "cuda/device.h"

namespace mantissa::cuda {

namespace {

// One record per device in page-locked, device-mapped host memory: kernels write it
// directly and the host reads it after any synchronisation, with no copy. Leaked on purpose
// (freeing after the runtime shut down fails).
std::array<IndexErrorRecord*, kMaxDevices> g_records{};
std::array<std::once_flag, kMaxDevices> g_record_once;

}  // namespace

IndexErrorRecord* index_error_record(int device) {
  check_device_index(device, "index check");
  std::call_once(g_record_once[size_t(device)], [&] {
    DeviceGuard g(device);
    void* p = nullptr;
    MT_CUDA_CHECK(cudaHostAlloc(&p, sizeof(IndexErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
    auto* r = new (p) IndexErrorRecord();
    void* dp = nullptr;
    MT_CUDA_CHECK(cudaHostGetDevicePointer(&dp, p, 0));
    MT_CHECK(dp == p, "index check", "internal: mapped memory without unified addressing");
    g_records[size_t(device)] = r;
  });
  return g_records[size_t(device)];
}

void check_index_errors(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  IndexErrorRecord* r = g_records[size_t(device)];
  if (r == nullptr) return;  // no check ran on this device yet
  // The synchronisation before made the kernels' writes visible; volatile keeps the read.
  if (static_cast<volatile int32_t&>(r->code) == 0) return;
  throw_if_index_error(*r);
}

void stream_synchronize(int device, cudaStream_t stream) {
  detail::count_host_sync(device);
  MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  check_index_errors(device);
}

void device_synchronize(int device) {
  DeviceGuard g(device);
  detail::count_host_sync(device);
  MT_CUDA_CHECK(cudaDeviceSynchronize());
  check_index_errors(device);
}

void copy_to_host(void* dst, const void* src, size_t n, int device, cudaStream_t stream) {
  detail::count_device_to_host(device);
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream));
  stream_synchronize(device, stream);
}

}  // namespace mantissa::cuda
