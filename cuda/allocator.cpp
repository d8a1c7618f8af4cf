// Caching allocators for device and pinned host memory. cudaMalloc/cudaFree synchronize
// the device and cost tens of microseconds or more; a training step frees and allocates
// the same shapes every iteration, so after the first step every request is served from
// the cache and no call reaches the driver. Blocks are never split (unlike PyTorch's
// allocator): sizes are rounded into classes instead (512 bytes below 1 MiB, an eighth of the
// power of two above), and a request takes a cached block of up to 2x its rounded size below
// 1 MiB, up to 1.25x above (max_fit).
#include "cuda/allocator.h"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/block_reuse.h"
#include "core/device.h"
#include "cuda/device.h"

namespace mantissa {
namespace cuda {

namespace {

constexpr size_t kSmallLimit = size_t(1) << 20;  // requests below 1 MiB are "small"
constexpr size_t kSmallRound = 512;

// Small requests round to 512 bytes; larger ones to an eighth of their power of two.
size_t round_size(size_t n) {
  if (n < kSmallLimit) return (n + kSmallRound - 1) / kSmallRound * kSmallRound;
  size_t p = kSmallLimit;
  while (p < n) p <<= 1;
  size_t step = p / 8;
  return (n + step - 1) / step * step;
}

// The largest cached block an allocation of `size` may take: small blocks up to twice
// the request (a driver call costs more than a few hundred wasted KiB), large ones +25%.
size_t max_fit(size_t size) { return size < kSmallLimit ? 2 * size : size + size / 4; }

std::string mib(size_t bytes) {
  return std::to_string(bytes >> 20) + "." + std::to_string(((bytes & ((1 << 20) - 1)) * 10) >> 20) + " MiB";
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  cudaStream_t stream = nullptr;  // allocation stream (always null for host blocks)
};

// The CUDA events behind BlockReuse: each recorded on the device of its use.
class CudaEventOps final : public EventOps {
 public:
  void* record(const StreamUse& use) override {
    int prev = -1;
    const bool switch_device = cudaGetDevice(&prev) == cudaSuccess && prev != use.device;
    if (switch_device && cudaSetDevice(use.device) != cudaSuccess) (void)cudaGetLastError();
    const auto stream = static_cast<cudaStream_t>(use.stream);
    cudaEvent_t ev = nullptr;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(ev, stream) != cudaSuccess) {
      // Could not record: wait for the stream instead, which is slow but safe.
      if (ev) (void)cudaEventDestroy(ev);
      ev = nullptr;
      (void)cudaGetLastError();
      (void)cudaStreamSynchronize(stream);
      (void)cudaGetLastError();
    }
    if (switch_device) (void)cudaSetDevice(prev);
    return ev;
  }
  bool query(void* event) override {
    const auto ev = static_cast<cudaEvent_t>(event);
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    if (q != cudaSuccess) (void)cudaGetLastError();  // treat a failed event as done
    (void)cudaEventDestroy(ev);
    return true;
  }
  void wait(void* event) override {
    const auto ev = static_cast<cudaEvent_t>(event);
    if (cudaEventSynchronize(ev) != cudaSuccess) (void)cudaGetLastError();
    (void)cudaEventDestroy(ev);
  }
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    auto ka = std::make_tuple(reinterpret_cast<uintptr_t>(a->stream), a->size, reinterpret_cast<uintptr_t>(a->ptr));
    auto kb = std::make_tuple(reinterpret_cast<uintptr_t>(b->stream), b->size, reinterpret_cast<uintptr_t>(b->ptr));
    return ka < kb;
  }
};

// One allocator per device (host_ == false) or for pinned host memory (host_ == true).
// Host blocks are not tied to a stream or a device: pinned memory (portable: registered with
// every GPU's context) is reusable once the events of its recorded (device, stream) uses
// completed.
class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(int device, bool host) : device_(device), host_(host), reuse_(events_) {}
  // Never destroyed (see device_allocator): freeing after the CUDA runtime shut down fails.
  ~CachingAllocator() override = default;

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    const cudaStream_t stream = host_ ? nullptr : current_stream(device_);
    std::lock_guard<std::mutex> lock(mutex_);
    process_events_locked();
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = free_.lower_bound(&key);
    Block* b = nullptr;
    if (it != free_.end() && (*it)->stream == stream && (*it)->size <= max_fit(size)) {
      b = *it;
      free_.erase(it);
    } else {
      void* p = malloc_locked(size, nbytes);  // may throw: create the Block after it
      b = new Block();
      b->ptr = p;
      b->size = size;
      b->stream = stream;
      stats_.reserved += size;
    }
    active_.emplace(b->ptr, b);
    stats_.allocated += b->size;
    stats_.allocated_total += b->size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
    return b->ptr;
  }

  // Called from Storage's destructor: must not throw. CUDA errors here (e.g. a sticky
  // error after a faulting kernel) are left for the next checked call to report.
  void deallocate(void* p, size_t) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.find(p);
    if (it == active_.end()) return;  // not ours: nothing sane to do in a destructor
    Block* b = it->second;
    active_.erase(it);
    stats_.allocated -= b->size;
    if (reuse_.release(p))
      free_.insert(b);
    else
      pending_.emplace(p, b);
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked();
  }

  void record_use(void* p, int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.find(p);
    if (it == active_.end()) return;
    if (!host_ && stream == it->second->stream) return;  // same-stream reuse is ordered already
    reuse_.record_use(p, StreamUse{device, stream});
  }

 private:
  void* malloc_locked(size_t size, size_t requested) {
    std::unique_ptr<DeviceGuard> guard;
    if (!host_) guard = std::make_unique<DeviceGuard>(device_);
    void* p = nullptr;
    cudaError_t err = host_ ? cudaHostAlloc(&p, size, cudaHostAllocPortable) : cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached_locked();  // give the cache back to the driver and try once more
      err = host_ ? cudaHostAlloc(&p, size, cudaHostAllocPortable) : cudaMalloc(&p, size);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      if (!host_ && cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
      MT_FAIL("allocate", "out of memory allocating ", mib(requested),
              host_ ? " of pinned host memory" : " on cuda:", host_ ? std::string() : std::to_string(device_),
              " (allocated by mantissa: ", mib(stats_.allocated), ", reserved: ", mib(stats_.reserved),
              host_ ? ")" : ", free on device: " + mib(free_b) + " of " + mib(total_b) + ")");
    }
    MT_CUDA_CHECK(err);
    return p;
  }

  // Moves blocks whose recorded uses completed to the free set.
  void process_events_locked() {
    if (pending_.empty()) return;
    for (void* p : reuse_.completed()) take_pending_locked(p);
  }

  void take_pending_locked(void* p) {
    auto it = pending_.find(p);
    if (it == pending_.end()) return;
    free_.insert(it->second);
    pending_.erase(it);
  }

  void release_cached_locked() {
    for (void* p : reuse_.wait_all()) take_pending_locked(p);
    std::unique_ptr<DeviceGuard> guard;
    if (!host_) guard = std::make_unique<DeviceGuard>(device_);
    for (Block* b : free_) {
      cudaError_t err = host_ ? cudaFreeHost(b->ptr) : cudaFree(b->ptr);
      if (err != cudaSuccess) (void)cudaGetLastError();
      stats_.reserved -= b->size;
      delete b;
    }
    free_.clear();
  }

  const int device_;
  const bool host_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block*> active_;
  std::set<Block*, BlockLess> free_;
  std::unordered_map<void*, Block*> pending_;  // freed, waiting for their uses' events
  CudaEventOps events_;
  BlockReuse reuse_;
  AllocatorStats stats_;
};

CachingAllocator* device_caching_allocator(int device) {
  check_device_index(device, "allocate");
  // Leaked on purpose: tensors in static storage may be freed after main returns.
  static std::array<CachingAllocator*, kMaxDevices> allocators{};
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[size_t(device)], [&] { allocators[size_t(device)] = new CachingAllocator(device, false); });
  return allocators[size_t(device)];
}

CachingAllocator* pinned_caching_allocator() {
  static CachingAllocator* a = new CachingAllocator(-1, true);
  return a;
}

}  // namespace

Allocator* device_allocator(int device) { return device_caching_allocator(device); }

void record_stream(int device, void* ptr, cudaStream_t stream) {
  device_caching_allocator(device)->record_use(ptr, device, stream);
}

Allocator* pinned_allocator() { return pinned_caching_allocator(); }

void record_pinned_use(void* ptr, int device, cudaStream_t stream) {
  pinned_caching_allocator()->record_use(ptr, device, stream);
}

}  // namespace cuda
}  // namespace mantissa
