#include "core/host_sync.h"

#include <array>
#include <atomic>

#include "core/error.h"

namespace mantissa {

namespace {

constexpr int kMaxCounted = 64;  // cuda/'s kMaxDevices

struct Counters {
  std::atomic<int64_t> syncs{0};
  std::atomic<int64_t> d2h{0};
};

std::array<Counters, kMaxCounted>& counters() {
  static std::array<Counters, kMaxCounted> c;
  return c;
}

Counters& at(int index, const char* op) {
  MT_CHECK(index >= 0 && index < kMaxCounted, op, "device index ", index, " is outside [0, ", kMaxCounted, ")");
  return counters()[size_t(index)];
}

}  // namespace

HostSyncCounts host_sync_counts(Device device) {
  if (device.is_cpu()) return {};
  const Counters& c = at(device.index, "host_sync_counts");
  return {c.syncs.load(std::memory_order_relaxed), c.d2h.load(std::memory_order_relaxed)};
}

void reset_host_sync_counts() {
  for (Counters& c : counters()) {
    c.syncs.store(0, std::memory_order_relaxed);
    c.d2h.store(0, std::memory_order_relaxed);
  }
}

namespace detail {
void count_host_sync(int cuda_index) {
  at(cuda_index, "count_host_sync").syncs.fetch_add(1, std::memory_order_relaxed);
}
void count_device_to_host(int cuda_index) {
  at(cuda_index, "count_device_to_host").d2h.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

}  // namespace mantissa
