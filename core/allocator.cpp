#include "core/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/backend_registry.h"
#include "core/error.h"

namespace mantissa {

namespace {

// Caches freed blocks by rounded size so a training loop, which frees and allocates the
// same shapes every step, stops calling malloc after the first step.
class CpuCachingAllocator final : public Allocator {
 public:
  ~CpuCachingAllocator() override { empty_cache(); }

  void* allocate(size_t nbytes) override {
    size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    void* p = nullptr;
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= size;
    } else {
      p = std::aligned_alloc(kAlign, size);
      if (!p) {
        release_cached_locked();
        p = std::aligned_alloc(kAlign, size);
      }
      MT_CHECK(p != nullptr, "allocate", "out of memory allocating ", nbytes, " bytes on cpu");
      stats_.reserved += size;
    }
    stats_.allocated += size;
    stats_.allocated_total += size;
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
    return p;
  }

  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.allocated -= size;
    if (cached_ + size > kMaxCached) {
      std::free(p);
      stats_.reserved -= size;
      return;
    }
    free_[size].push_back(p);
    cached_ += size;
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_locked();
  }

 private:
  static constexpr size_t kAlign = 64;
  static constexpr size_t kMaxCached = size_t(2) << 30;  // keep at most 2 GiB idle

  // Small blocks round to 64 bytes; larger ones to a quarter of their power of two, which
  // bounds waste at 25% while letting near-identical sizes share a bucket.
  static size_t round_size(size_t n) {
    if (n == 0) n = 1;
    if (n <= 4096) return (n + kAlign - 1) / kAlign * kAlign;
    size_t p = 4096;
    while (p < n) p <<= 1;
    size_t step = p / 8;
    return (n + step - 1) / step * step;
  }

  void release_cached_locked() {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) std::free(p);
      stats_.reserved -= size * blocks.size();
      blocks.clear();
    }
    cached_ = 0;
  }

  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  AllocatorStats stats_;
};

}  // namespace

Allocator* allocator_for(Device d) {
  if (d.is_cpu()) {
    static CpuCachingAllocator* cpu = new CpuCachingAllocator();  // never destroyed: outlives tensors
    return cpu;
  }
  const DeviceBackend* b = find_backend(d.type);
  MT_CHECK(b != nullptr, "allocate", "device ", d.str(), " is not available: mantissa was built without it");
  return b->allocator(d.index);
}

Storage::Storage(size_t n, Device dev) : Storage(n, dev, allocator_for(dev)) {}

Storage::Storage(size_t n, Device dev, Allocator* allocator) : nbytes(n), device(dev), allocator_(allocator) {
  data = allocator_->allocate(n);
  pinned = dev.is_cpu() && allocator != allocator_for(dev);
}

Storage::~Storage() { allocator_->deallocate(data, nbytes); }

Allocator* pinned_host_allocator() {
  if (cuda_device_count() == 0) return nullptr;
  return find_backend(DeviceType::CUDA)->pinned_host_allocator();
}

}  // namespace mantissa
