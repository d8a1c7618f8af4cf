// Named profiler ranges (NVTX when the CUDA backend is built), in plain C++ so every layer
// can mark what it does: each dispatched op (core/backend.cpp wraps the dispatch tables),
// each module forward with its dotted path (nn::Module::operator()), backward and its
// nodes (autograd engine), optimizer steps, GradScaler updates and DataLoader batches.
//
// Off, a range costs one relaxed load of a global bool and a branch. Ranges are on while
// a profiler::Profile records (core/profile.h) or while the NVTX switch is on. The switch is
//   * MANTISSA_NVTX=1 / MANTISSA_NVTX=0 in the environment (wins over the default),
//   * profiler::set_enabled(on) at run time (wins over everything),
//   * otherwise on when a CUDA device is found and an NVTX tool is attached (nsys, ncu: they
//     set NVTX_INJECTION64_PATH; core/device.cpp), off otherwise.
//
//   { mt::profiler::Range r("data"); batch = next(loader); }
//   $ nsys profile ./train            # ranges show up in the NVTX row (nsys attaches a tool)
#pragma once
#include <atomic>
#include <cstdint>

namespace mantissa::profiler {

namespace detail {
inline std::atomic<bool> g_enabled{false};
inline std::atomic<bool> g_recording{false};  // a Recorder (a Profile) is installed
}  // namespace detail

// Whether ranges are pushed: the switch below, or a Profile recording.
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
// Whether a Profile records: for figures worth a host read only then (the loss scale).
inline bool recording() { return detail::g_recording.load(std::memory_order_relaxed); }
// An explicit choice: later defaults (a CUDA device appearing) no longer change it.
void set_enabled(bool on);
// A backend's default (on when a CUDA device is present); ignored once the environment or
// set_enabled() decided.
void set_default(bool on);

// Unconditional push/pop through the installed hooks and to the recorder, if any (callers
// check enabled() first). push_op() is push() for a dispatched op, with its metadata.
struct OpInfo;  // core/profile_op.h
// What a range marks, for a recorder's categories (NVTX sees names only).
enum class Kind : uint8_t { Range, Module, Op };
void push(const char* name, Kind kind = Kind::Range);
void push_op(const char* name, const OpInfo& op);
void pop();
// A named value on this thread's timeline (autocast decisions, cache hits); only a recorder
// sees it. `detail` may be null.
void note(const char* name, const char* detail, double value);

// Where a profiler::Profile receives ranges, beside the NVTX hooks. Calls are serialized
// (one global lock while a recorder is installed), from any thread.
class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual void begin(const char* name, Kind kind, const OpInfo* op) = 0;  // op: set for Kind::Op
  virtual void end() = 0;
  virtual void note(const char* name, const char* detail, double value) = 0;
};
// Installs `r` (null: none) and returns the previous one; once this returns, the previous
// recorder receives no more calls. Ranges are on while a recorder is installed.
Recorder* set_recorder(Recorder* r);

// GPU time of ops on a device, by events recorded on the device's stream around each op and
// resolved later (no synchronisation per op). cuda/ installs it; null members: not available.
struct GpuTimer {
  void* (*start)(int device) = nullptr;         // records a start event; returns a token
  void (*stop)(void* token) = nullptr;          // records the matching end event
  double (*elapsed_ms)(void* token) = nullptr;  // waits for the end event; frees the token
};
void set_gpu_timer(GpuTimer timer);
GpuTimer gpu_timer();

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
  explicit Range(const char* name, Kind kind = Kind::Range) : active_(enabled()) {
    if (active_) push(name, kind);
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
