#include "cuda/device.h"

#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "core/device.h"
#include "cuda/cuda_api.h"

namespace mantissa {

namespace cuda {

// Any failure (no driver, no device, driver too old, CUDA_VISIBLE_DEVICES empty) means
// "no GPU": the CPU build must keep working.
// Queried once: the count is fixed for the life of the process, and backend_for asks on
// every op.
int runtime_device_count() {
  static const int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n < 0 ? 0 : (n > kMaxDevices ? kMaxDevices : n);
  }();
  return count;
}

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();
  MT_FAIL("CUDA", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") from ", expr, " at ", file, ":", line);
}

void check_device_index(int device, const char* op) {
  MT_CHECK(device >= 0 && device < cuda_device_count(), op, "device cuda:", device, " is not available (",
           cuda_device_count(), " CUDA devices found)");
}

const cudaDeviceProp& device_properties(int device) {
  check_device_index(device, "device_properties");
  static std::array<std::unique_ptr<cudaDeviceProp>, kMaxDevices> props;
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[size_t(device)], [&] {
    auto p = std::make_unique<cudaDeviceProp>();
    MT_CUDA_CHECK(cudaGetDeviceProperties(p.get(), device));
    props[size_t(device)] = std::move(p);
  });
  // A failed call_once (it threw) leaves the slot empty and lets the next caller retry.
  MT_CHECK(props[size_t(device)] != nullptr, "device_properties", "could not query cuda:", device);
  return *props[size_t(device)];
}

DeviceGuard::DeviceGuard(int device) {
  MT_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) MT_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != prev_) (void)cudaSetDevice(prev_);
}

namespace {
thread_local std::array<cudaStream_t, kMaxDevices> t_streams{};  // null: legacy default stream
}

cudaStream_t current_stream(int device) { return t_streams[size_t(device)]; }

StreamGuard::StreamGuard(int device, cudaStream_t stream) : device_(device), prev_(t_streams[size_t(device)]) {
  t_streams[size_t(device)] = stream;
}

StreamGuard::~StreamGuard() { t_streams[size_t(device_)] = prev_; }

// ---------------------------------------------------------------- cuda_api.h

void synchronize(int device) {
  check_device_index(device, "cuda::synchronize");
  device_synchronize(device);
}

void set_device(int device) {
  check_device_index(device, "cuda::set_device");
  MT_CUDA_CHECK(cudaSetDevice(device));
}

std::string device_name(int device) { return device_properties(device).name; }

int compute_capability(int device) {
  const cudaDeviceProp& p = device_properties(device);
  return p.major * 10 + p.minor;
}

size_t total_memory(int device) { return device_properties(device).totalGlobalMem; }

}  // namespace cuda
}  // namespace mantissa
