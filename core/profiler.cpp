#include "core/profiler.h"

#include <cstdlib>
#include <cstring>

namespace mantissa {

namespace profiler {

namespace {

// Installed by set_hooks(), or by a device backend's registration (NVTX; core/backend_registry.h).
std::atomic<void (*)(const char*)> g_push{nullptr};
std::atomic<void (*)()> g_pop{nullptr};
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

void install_default_hooks(Hooks hooks) {
  void (*none)(const char*) = nullptr;
  if (g_push.compare_exchange_strong(none, hooks.push)) g_pop.store(hooks.pop);
}

Counts thread_counts() { return t_counts; }

}  // namespace profiler
}  // namespace mantissa
