// Caching allocators for device and pinned host memory. cudaMalloc/cudaFree synchronize
// the device and cost tens of microseconds or more; a training step frees and allocates
// the same shapes every iteration, so after the first step every request is served from
// the cache and no call reaches the driver. Blocks are never split (unlike PyTorch's
// allocator): sizes are rounded into classes instead, which bounds the waste at 25%.
#include "cuda/allocator.h"

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

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
  cudaStream_t stream = nullptr;   // allocation stream (always null for host blocks)
  std::vector<cudaStream_t> uses;  // other streams that used it (record_stream)
  int pending_events = 0;          // events still to complete before reuse
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    auto ka = std::make_tuple(reinterpret_cast<uintptr_t>(a->stream), a->size, reinterpret_cast<uintptr_t>(a->ptr));
    auto kb = std::make_tuple(reinterpret_cast<uintptr_t>(b->stream), b->size, reinterpret_cast<uintptr_t>(b->ptr));
    return ka < kb;
  }
};

// One allocator per device (host_ == false) or for pinned host memory (host_ == true).
// Host blocks are not tied to a stream: pinned memory is reusable by any stream once the
// events of its recorded uses completed.
class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(int device, bool host) : device_(device), host_(host) {}
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
    if (b->uses.empty()) {
      free_.insert(b);
      return;
    }
    int prev = -1;
    const bool switch_device = !host_ && cudaGetDevice(&prev) == cudaSuccess && prev != device_;
    if (switch_device) (void)cudaSetDevice(device_);
    for (cudaStream_t s : b->uses) {
      cudaEvent_t ev = nullptr;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess &&
          cudaEventRecord(ev, s) == cudaSuccess) {
        pending_.emplace_back(ev, b);
        ++b->pending_events;
      } else {
        // Could not record: wait for the stream instead, which is slow but safe.
        if (ev) (void)cudaEventDestroy(ev);
        (void)cudaGetLastError();
        (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
      }
    }
    b->uses.clear();
    if (b->pending_events == 0) free_.insert(b);
    if (switch_device) (void)cudaSetDevice(prev);
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked();
  }

  void record_use(void* p, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = active_.find(p);
    if (it == active_.end()) return;
    Block* b = it->second;
    if (!host_ && stream == b->stream) return;  // same-stream reuse is ordered already
    for (cudaStream_t s : b->uses)
      if (s == stream) return;
    b->uses.push_back(stream);
  }

 private:
  void* malloc_locked(size_t size, size_t requested) {
    std::unique_ptr<DeviceGuard> guard;
    if (!host_) guard = std::make_unique<DeviceGuard>(device_);
    void* p = nullptr;
    cudaError_t err = host_ ? cudaHostAlloc(&p, size, cudaHostAllocDefault) : cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached_locked();  // give the cache back to the driver and try once more
      err = host_ ? cudaHostAlloc(&p, size, cudaHostAllocDefault) : cudaMalloc(&p, size);
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

  // Moves blocks whose recorded uses completed to the free set. Events are queried in
  // FIFO order and the scan stops at the first unfinished one: cheap, and late blocks
  // are picked up on a later call.
  void process_events_locked() {
    while (!pending_.empty()) {
      auto [ev, b] = pending_.front();
      cudaError_t q = cudaEventQuery(ev);
      if (q == cudaErrorNotReady) {
        (void)cudaGetLastError();
        break;
      }
      if (q != cudaSuccess) (void)cudaGetLastError();  // treat a failed event as done
      (void)cudaEventDestroy(ev);
      pending_.pop_front();
      if (--b->pending_events == 0) free_.insert(b);
    }
  }

  void release_cached_locked() {
    for (auto& [ev, b] : pending_) {
      (void)cudaEventSynchronize(ev);
      (void)cudaEventDestroy(ev);
      if (--b->pending_events == 0) free_.insert(b);
    }
    (void)cudaGetLastError();
    pending_.clear();
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
  std::deque<std::pair<cudaEvent_t, Block*>> pending_;
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
  device_caching_allocator(device)->record_use(ptr, stream);
}

Allocator* pinned_allocator() { return pinned_caching_allocator(); }

void record_pinned_use(void* ptr, cudaStream_t stream) { pinned_caching_allocator()->record_use(ptr, stream); }

}  // namespace cuda
}  // namespace mantissa
