// CUDA runtime helpers shared by cuda/: error checking, device properties, the
// current device and stream. Internal to cuda/ (it includes CUDA headers); the rest
// of the library sees CUDA only through core/backend.h and cuda/cuda_api.h.
#pragma once
#include <cuda_runtime.h>

#include "core/error.h"
#include "core/index_check.h"
#include "core/profiler.h"

namespace mantissa::cuda {

// Throws mantissa::Error naming the failed call, where it was made and CUDA's message.
// Clears the runtime's last-error slot first so a recoverable error (e.g. an out-of-memory)
// does not resurface in the next, unrelated check.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

// Highest device count the static per-device tables in cuda/ support.
constexpr int kMaxDevices = 64;
// GPUs the runtime reports (0 on any failure), at most kMaxDevices. core reads it through
// the registered backend (cuda_device_count()).
int runtime_device_count();
// The profiler's GPU timer: CUDA event pairs around each op (cuda/profiler.cpp).
profiler::GpuTimer gpu_timer();

// Properties of `device`, queried once and cached.
const cudaDeviceProp& device_properties(int device);

// Throws unless 0 <= device < cuda_device_count().
void check_device_index(int device, const char* op);

// Makes `device` current for the guard's lifetime, restoring the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// The stream that kernels, copies and allocations on `device` use from this thread.
// Defaults to the legacy default stream, which orders all work on the device; a
// StreamGuard overrides it (e.g. a data-loading thread with its own copy stream).
cudaStream_t current_stream(int device);

class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t prev_;
};

// Every host wait in cuda/ goes through these (cuda/sync.cpp): each is counted
// (core/host_sync.h) and then reports a pending device-side index error of that device.
void stream_synchronize(int device, cudaStream_t stream);
void device_synchronize(int device);
// Copies n bytes from device memory to host memory on `stream` and waits for them.
void copy_to_host(void* dst, const void* src, size_t n, int device, cudaStream_t stream);
// The sticky index error record of `device` (host-mapped, written by check_index kernels),
// created on first use.
IndexErrorRecord* index_error_record(int device);
// Throws the recorded error of `device`, if any (call only after a synchronisation).
void check_index_errors(int device);
// launch::check_index_range on a GPU (cuda/index.cu): no synchronisation.
void check_index(const Tensor& index, int64_t bound, bool has_ignore, int64_t ignore, int32_t code);

}  // namespace mantissa::cuda

// MT_CUDA_CHECK(cudaMalloc(&p, n)): throws mantissa::Error with file/line and the CUDA message.
#define MT_CUDA_CHECK(expr)                                                                                       \
  do {                                                                                                            \
    cudaError_t mt_cuda_err_ = (expr);                                                                            \
    if (mt_cuda_err_ != cudaSuccess) ::mantissa::cuda::throw_cuda_error(mt_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports bad launch configurations at the launch site.
#define MT_CUDA_CHECK_LAUNCH() MT_CUDA_CHECK(cudaGetLastError())
