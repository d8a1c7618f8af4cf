// When a freed cached block may be handed out again: the bookkeeping of the CUDA caching
// allocators (cuda/allocator.cpp), in plain C++ so the CPU tests drive it with several device
// ids and fake events. Streams and events are opaque handles here (cudaStream_t and
// cudaEvent_t in cuda/).
//
// A block used by work queued on other streams (a pinned host block: every upload from it)
// carries one StreamUse per (device, stream). When it is freed, one event is recorded per
// use, each on the device that ran the work (the legacy default stream is per device, so
// the device is part of the use), and the block becomes reusable once all have completed.
#pragma once
#include <cstddef>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mantissa {

struct StreamUse {
  int device = 0;
  void* stream = nullptr;
  bool operator==(const StreamUse&) const = default;
};

// The event calls, provided by cuda/ (and by fakes in tests). None may throw.
class EventOps {
 public:
  virtual ~EventOps() = default;
  // Records an event after the work queued so far on `use` (with use.device current meanwhile,
  // the caller's current device restored after). Null when no event could be recorded: the
  // implementation has then waited for the stream instead (slow but safe).
  virtual void* record(const StreamUse& use) = 0;
  // True once `event` completed (a failed event counts as completed); then it is destroyed.
  virtual bool query(void* event) = 0;
  // Blocks until `event` completed, then destroys it.
  virtual void wait(void* event) = 0;
};

// Keyed by the block's address. Not thread-safe: the allocator holds its lock around it.
class BlockReuse {
 public:
  explicit BlockReuse(EventOps& ops) : ops_(ops) {}

  // Work on `use` reads or writes the live block `block`.
  void record_use(void* block, const StreamUse& use);
  // The uses recorded for a live block (empty when none).
  const std::vector<StreamUse>& uses(void* block) const;
  // The block was freed: true when it is reusable at once, else it is pending until
  // completed() returns it.
  bool release(void* block);
  // The pending blocks whose events have all completed (each returned once).
  std::vector<void*> completed();
  // Waits for every pending event; returns the blocks that were pending.
  std::vector<void*> wait_all();
  size_t pending_events() const { return events_.size(); }

 private:
  EventOps& ops_;
  std::unordered_map<void*, std::vector<StreamUse>> uses_;
  std::deque<std::pair<void*, void*>> events_;  // (event, block)
  std::unordered_map<void*, int> waiting_;      // block -> events still to complete
};

}  // namespace mantissa
