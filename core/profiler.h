// Named profiler ranges (NVTX when the CUDA backend is built), in plain C++ so every layer
// can mark what it does: each dispatched op (core/backend.cpp wraps the dispatch tables),
// each module forward with its dotted path (nn::Module::operator()), backward and its
// nodes (autograd engine), optimizer steps, GradScaler updates and DataLoader batches.
//
// Off, a range costs one relaxed load of a global bool and a branch. The switch is
//   * MANTISSA_NVTX=1 / MANTISSA_NVTX=0 in the environment (wins over the default),
//   * profiler::set_enabled(on) at run time (wins over everything),
//   * otherwise on as soon as a CUDA device is found (core/device.cpp), off on the CPU.
//
//   { mt::profiler::Range r("data"); batch = next(loader); }
//   $ nsys profile ./train            # ranges show up in the NVTX row
#pragma once
#include <atomic>
#include <cstdint>

namespace mantissa::profiler {

namespace detail {
inline std::atomic<bool> g_enabled{false};
}  // namespace detail

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
// An explicit choice: later defaults (a CUDA device appearing) no longer change it.
void set_enabled(bool on);
// A backend's default (on when a CUDA device is present); ignored once the environment or
// set_enabled() decided.
void set_default(bool on);

// Unconditional push/pop through the installed hooks (callers check enabled() first).
void push(const char* name);
void pop();

// Where ranges go: NVTX when the CUDA backend is linked in, nowhere otherwise. Tests install
// recorders.
struct Hooks {
  void (*push)(const char* name) = nullptr;
  void (*pop)() = nullptr;
};
Hooks set_hooks(Hooks hooks);  // returns the previous hooks
// A device backend's hooks, installed only while no hooks are (core/backend_registry.cpp).
void install_default_hooks(Hooks hooks);

// Ranges pushed and popped by this thread since it started (tests check the balance).
struct Counts {
  uint64_t pushed = 0, popped = 0;
};
Counts thread_counts();

// RAII range; decides once, at construction, whether it pushes.
class Range {
 public:
  explicit Range(const char* name) : active_(enabled()) {
    if (active_) push(name);
  }
  ~Range() {
    if (active_) pop();
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool active_;
};

}  // namespace mantissa::profiler

// Twins of the kernel tables while profiling (backend_for, nn_kernels_for): each entry of the
// twin opens a range named after the kernel, then calls the real table's entry.
//   static const Backend t{MT_PROFILED_ENTRY(Backend, cpu_backend, matmul, "matmul"), ...};
namespace mantissa::profiler::detail {
template <typename Table, const Table& (*Inner)(), auto Member, typename... Args>
void call_in_range(const char* name, Args... args) {
  Range r(name);
  (Inner().*Member)(args...);
}
}  // namespace mantissa::profiler::detail
#define MT_PROFILED_ENTRY(Table, Inner, entry, name) \
  .entry = [](auto... args) { ::mantissa::profiler::detail::call_in_range<Table, Inner, &Table::entry>(name, args...); }
// The same, named by the entry's first argument (the op): name_of(op).
#define MT_PROFILED_OP_ENTRY(Table, Inner, entry, name_of)                                              \
  .entry = [](auto op, auto... args) {                                                                  \
    ::mantissa::profiler::detail::call_in_range<Table, Inner, &Table::entry>(name_of(op), op, args...); \
  }
