// The GPU timer a profiler::Profile uses for ops on a CUDA device: a pair of CUDA events
// recorded on the op's stream around it, read back at Profile::stop() (one wait for work long
// queued, none per op). Event pairs are pooled: creating events costs more than recording them.
// Called from destructors (closing ranges), so CUDA errors yield "no time" rather than throw.
#include "core/profiler.h"

#include <mutex>
#include <vector>

#include "cuda/device.h"

namespace mantissa {

namespace {

struct EventPair {
  cudaEvent_t start = nullptr, end = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
};

std::mutex g_pool_mutex;
std::vector<EventPair*> g_pool;  // idle pairs, any device

void* timer_start(int device) {
  EventPair* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    for (size_t i = 0; i < g_pool.size(); ++i)
      if (g_pool[i]->device == device) {
        p = g_pool[i];
        g_pool.erase(g_pool.begin() + std::ptrdiff_t(i));
        break;
      }
  }
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) return nullptr;
  if (prev != device && cudaSetDevice(device) != cudaSuccess) return nullptr;
  if (!p) {
    p = new EventPair;
    p->device = device;
    if (cudaEventCreate(&p->start) != cudaSuccess || cudaEventCreate(&p->end) != cudaSuccess) {
      (void)cudaGetLastError();
      if (p->start) (void)cudaEventDestroy(p->start);
      delete p;
      p = nullptr;
    }
  }
  if (p) {
    p->stream = cuda::current_stream(device);
    if (cudaEventRecord(p->start, p->stream) != cudaSuccess) (void)cudaGetLastError();
  }
  if (prev != device) (void)cudaSetDevice(prev);
  return p;
}

void timer_stop(void* token) {
  auto* p = static_cast<EventPair*>(token);
  if (!p) return;
  // The legacy default stream means the current device's: record on the op's device.
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) return;
  if (prev != p->device && cudaSetDevice(p->device) != cudaSuccess) return;
  if (cudaEventRecord(p->end, p->stream) != cudaSuccess) (void)cudaGetLastError();
  if (prev != p->device) (void)cudaSetDevice(prev);
}

double timer_elapsed_ms(void* token) {
  auto* p = static_cast<EventPair*>(token);
  if (!p) return -1;
  float ms = -1;
  if (cudaEventSynchronize(p->end) != cudaSuccess || cudaEventElapsedTime(&ms, p->start, p->end) != cudaSuccess) {
    (void)cudaGetLastError();
    ms = -1;
  }
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool.push_back(p);
  return double(ms);
}

}  // namespace

profiler::GpuTimer cuda::gpu_timer() { return {timer_start, timer_stop, timer_elapsed_ms}; }

}  // namespace mantissa
