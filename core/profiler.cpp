#include "core/profiler.h"

#include <cstdlib>
#include <cstring>

namespace mantissa {

#ifdef MANTISSA_WITH_CUDA
// cuda/profiler.cpp: NVTX push/pop. Referenced from here so that a static libmantissa
// always links them in.
void cuda_nvtx_push(const char* name);
void cuda_nvtx_pop();
#endif

namespace profiler {

namespace {

std::atomic<void (*)(const char*)> g_push{
#ifdef MANTISSA_WITH_CUDA
    &cuda_nvtx_push
#else
    nullptr
#endif
};
std::atomic<void (*)()> g_pop{
#ifdef MANTISSA_WITH_CUDA
    &cuda_nvtx_pop
#else
    nullptr
#endif
};
// Set once the environment or set_enabled() chose; set_default() then changes nothing.
std::atomic<bool> g_decided{false};
thread_local Counts t_counts;

// MANTISSA_NVTX in the environment decides (once; before main() through g_env_read, or
// earlier if another static initializer gets here first).
bool read_environment() {
  static const bool decided = [] {
    const char* v = std::getenv("MANTISSA_NVTX");
    if (v == nullptr || *v == '\0') return false;
    detail::g_enabled.store(std::strcmp(v, "0") != 0, std::memory_order_relaxed);
    g_decided.store(true);
    return true;
  }();
  return decided;
}
[[maybe_unused]] const bool g_env_read = read_environment();

}  // namespace

void set_enabled(bool on) {
  (void)read_environment();
  g_decided.store(true);
  detail::g_enabled.store(on, std::memory_order_relaxed);
}

void set_default(bool on) {
  (void)read_environment();
  if (!g_decided.load()) detail::g_enabled.store(on, std::memory_order_relaxed);
}

void push(const char* name) {
  ++t_counts.pushed;
  if (auto f = g_push.load(std::memory_order_relaxed)) f(name);
}

void pop() {
  ++t_counts.popped;
  if (auto f = g_pop.load(std::memory_order_relaxed)) f();
}

Hooks set_hooks(Hooks hooks) {
  Hooks prev{g_push.exchange(hooks.push), g_pop.exchange(hooks.pop)};
  return prev;
}

Counts thread_counts() { return t_counts; }

}  // namespace profiler
}  // namespace mantissa
