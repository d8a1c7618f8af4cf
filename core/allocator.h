// Allocators and the reference-counted Storage that tensors and their views share.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace mantissa {

struct AllocatorStats {
  size_t allocated = 0;        // bytes handed out and not yet returned
  size_t reserved = 0;         // bytes held from the system (allocated + cached)
  size_t peak_allocated = 0;   // high-water mark of `allocated`
  size_t allocated_total = 0;  // bytes handed out since the start, never decreasing (the profiler's per-op figure)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void empty_cache() = 0;
};

// The allocator for a device: a caching allocator on the CPU (and on CUDA when built with it).
Allocator* allocator_for(Device d);
// Page-locked (pinned) host memory, from which copies to a GPU run asynchronously; null
// when there is none to be had (built without CUDA, or no GPU).
Allocator* pinned_host_allocator();

// A block of memory; views share one Storage and its version counter.
struct Storage {
  Storage(size_t nbytes, Device device);
  // Memory from a given allocator (e.g. pinned host memory for a CPU tensor).
  Storage(size_t nbytes, Device device, Allocator* allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  // Bumped by every in-place write, so autograd can detect saved tensors that changed.
  uint64_t version = 0;
  bool pinned = false;  // page-locked host memory (pinned_host_allocator())

 private:
  Allocator* allocator_ = nullptr;
};

}  // namespace mantissa
