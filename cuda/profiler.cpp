#include "cuda/profiler.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/nvtx.h"

namespace mantissa::cuda {

namespace {
bool env_enabled() {
  const char* v = std::getenv("MANTISSA_NVTX");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}
std::atomic<bool> g_profiling{env_enabled()};
// One entry per open push_range on this thread: whether it really pushed. A pop then undoes
// exactly its own push, even when profiling was switched on or off in between.
thread_local std::vector<bool> t_pushed;
}  // namespace

void set_profiling(bool on) { g_profiling.store(on, std::memory_order_relaxed); }
bool profiling_enabled() { return g_profiling.load(std::memory_order_relaxed); }

void push_range(const char* name) {
  const bool on = profiling_enabled();
  if (on) nvtxRangePushA(name);
  t_pushed.push_back(on);
}

void pop_range() {
  if (t_pushed.empty()) return;  // unbalanced pop: ignore rather than corrupt the NVTX stack
  if (t_pushed.back()) nvtxRangePop();
  t_pushed.pop_back();
}

}  // namespace mantissa::cuda
