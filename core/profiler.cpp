#include "core/profiler.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace mantissa {

namespace profiler {

namespace {

// Installed by set_hooks(), or by a device backend's registration (NVTX; core/backend_registry.h).
std::atomic<void (*)(const char*)> g_push{nullptr};
std::atomic<void (*)()> g_pop{nullptr};
// Set once the environment or set_enabled() chose; set_default() then changes nothing.
std::atomic<bool> g_decided{false};
std::atomic<bool> g_switch{false};  // the NVTX switch (environment, set_enabled, set_default)
thread_local Counts t_counts;

// The recorder of a Profile: calls into it are serialized by the mutex, so that
// set_recorder(nullptr) returning means no thread is still inside the old one.
std::mutex g_recorder_mutex;
Recorder* g_recorder = nullptr;                           // guarded by g_recorder_mutex
std::atomic<bool>& g_has_recorder = detail::g_recording;  // a lock-free look before taking the mutex
std::atomic<GpuTimer*> g_gpu_timer{nullptr};

void refresh_enabled() {
  detail::g_enabled.store(g_switch.load(std::memory_order_relaxed) || g_has_recorder.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
}

// MANTISSA_NVTX in the environment decides (once; before main() through g_env_read, or
// earlier if another static initializer gets here first).
bool read_environment() {
  static const bool decided = [] {
    const char* v = std::getenv("MANTISSA_NVTX");
    if (v == nullptr || *v == '\0') return false;
    g_switch.store(std::strcmp(v, "0") != 0, std::memory_order_relaxed);
    g_decided.store(true);
    refresh_enabled();
    return true;
  }();
  return decided;
}
[[maybe_unused]] const bool g_env_read = read_environment();

}  // namespace

void set_enabled(bool on) {
  (void)read_environment();
  g_decided.store(true);
  g_switch.store(on, std::memory_order_relaxed);
  refresh_enabled();
}

void set_default(bool on) {
  (void)read_environment();
  if (!g_decided.load()) {
    g_switch.store(on, std::memory_order_relaxed);
    refresh_enabled();
  }
}

void push(const char* name, Kind kind) {
  ++t_counts.pushed;
  if (auto f = g_push.load(std::memory_order_relaxed)) f(name);
  if (g_has_recorder.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(g_recorder_mutex);
    if (g_recorder) g_recorder->begin(name, kind, nullptr);
  }
}

void push_op(const char* name, const OpInfo& op) {
  ++t_counts.pushed;
  if (auto f = g_push.load(std::memory_order_relaxed)) f(name);
  if (g_has_recorder.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(g_recorder_mutex);
    if (g_recorder) g_recorder->begin(name, Kind::Op, &op);
  }
}

void pop() {
  ++t_counts.popped;
  if (auto f = g_pop.load(std::memory_order_relaxed)) f();
  if (g_has_recorder.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(g_recorder_mutex);
    if (g_recorder) g_recorder->end();
  }
}

void note(const char* name, const char* detail, double value) {
  if (!g_has_recorder.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_recorder_mutex);
  if (g_recorder) g_recorder->note(name, detail, value);
}

Recorder* set_recorder(Recorder* r) {
  (void)read_environment();
  std::lock_guard<std::mutex> lock(g_recorder_mutex);
  Recorder* prev = g_recorder;
  g_recorder = r;
  g_has_recorder.store(r != nullptr, std::memory_order_relaxed);
  refresh_enabled();
  return prev;
}

void set_gpu_timer(GpuTimer timer) {
  static GpuTimer slot;  // installed once per process by a device backend
  slot = timer;
  g_gpu_timer.store(timer.start ? &slot : nullptr);
}

GpuTimer gpu_timer() {
  if (const GpuTimer* t = g_gpu_timer.load()) return *t;
  return {};
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
