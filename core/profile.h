// The built-in profiler: while a Profile is alive it records every profiler range of every
// thread — each dispatched op with its tensors, compute dtype, FLOPs and allocation, each
// module forward by dotted path, backward and its nodes, optimizer steps, scaler updates,
// data loading — and exports a Chrome trace and summary tables.
//
//   mt::profiler::Profile prof;                  // starts recording
//   for (int i = 0; i < 3; ++i) { train_step(); prof.step(); }
//   prof.stop();
//   std::cout << prof.summary_table();           // ops by total time, as torch's key_averages()
//   prof.write_chrome_trace("trace.json");       // open in ui.perfetto.dev or chrome://tracing
//
// One Profile records at a time (a second one throws). Its destructor stops it, also while
// an exception unwinds; ranges still open at stop() are closed there and marked truncated.
// On a GPU, each op also gets its device time from CUDA events recorded around it, resolved
// at stop() (no synchronisation per op).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/profile_op.h"
#include "core/profiler.h"

namespace mantissa::profiler {

// Where a range belongs in a training step, from its outermost enclosing range: a module
// (forward), "backward", "<Optimizer>.step", "GradScaler.*", "DataLoader.next", or a range
// the user named after a phase ("forward", "backward", "optimizer", "scaler", "data"). A
// "train_step" range (the examples mark each step so) is looked through.
enum class Phase : uint8_t { Other, Forward, Backward, Optimizer, Scaler, Data };
const char* phase_name(Phase p);

struct Event {
  std::string name;
  Kind kind = Kind::Range;
  int thread = 0;                    // 0: the first thread seen, then in order of appearance
  int parent = -1;                   // the enclosing event on the same thread
  int depth = 0;                     // nesting level on its thread
  int64_t start_ns = 0, end_ns = 0;  // since the profile started
  Phase phase = Phase::Other;
  bool truncated = false;      // still open when the profile stopped
  bool backward_node = false;  // an autograd node, named "<ForwardOp>Backward"
  // Ops only.
  OpInfo op;                 // conv/attention pointers cleared
  bool nested_op = false;    // inside another op (its FLOPs belong to the outer one)
  bool autocast = false;     // autocast was on for the thread when the op ran
  std::string autocast_op;   // the op that last consulted the autocast policy before it
  int autocast_policy = -1;  // that op's amp::CastPolicy (as int), -1: none
  // Bytes the allocator of the op's device handed out from the end of the thread's previous
  // op to the end of this one: its output (allocated just before the kernel) and workspace.
  int64_t alloc_bytes = 0;
  double gpu_ms = -1;  // device time of a GPU op (-1: none)

  double ms() const { return double(end_ns - start_ns) * 1e-6; }
  const char* category() const;  // "op", "module", "backward", "range"
};

// A named value on a thread's timeline (profiler::note).
struct Note {
  std::string name, detail;
  double value = 0;
  int thread = 0;
  int64_t time_ns = 0;
};

// Totals of one op (or module) name over the profile.
struct OpStats {
  std::string name;
  std::string dtypes;  // the compute dtypes seen, "float16/float32"
  int64_t calls = 0;
  double total_ms = 0;  // inclusive CPU wall time
  double self_ms = 0;   // minus nested ranges
  double gpu_ms = 0;    // device time, when measured
  double flops = 0;
  int64_t alloc_bytes = 0;  // Event::alloc_bytes summed
  double mean_us() const { return calls ? total_ms * 1e3 / double(calls) : 0; }
  double gflops_per_s() const;  // over GPU time when measured, else CPU time
};

class Profile final : public Recorder {
 public:
  Profile();  // starts recording; throws mantissa::Error if another Profile records
  ~Profile() override;
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  void stop();  // idempotent; the readers below need a stopped profile
  bool recording() const { return recording_; }
  // Marks the end of a training step; steps() divides the totals into "per step" figures.
  void step();
  int steps() const { return steps_; }

  double wall_ms() const { return double(stop_ns_) * 1e-6; }
  const std::vector<Event>& events() const;
  const std::vector<Note>& notes() const;
  std::vector<OpStats> op_stats() const;      // dispatched ops by name, by total time, largest first
  std::vector<OpStats> module_stats() const;  // module forwards by dotted path, likewise
  std::map<Phase, double> phase_ms() const;   // time in outermost ranges, by phase
  // The allocator's bytes in use: the most seen at a range boundary, and its high-water mark
  // (since the process started) at stop(), on the device of the ops.
  int64_t peak_allocated_seen() const { return peak_seen_; }
  int64_t allocator_peak() const { return allocator_peak_; }

  // Tables as text; max_rows 0: all.
  std::string summary_table(size_t max_rows = 25) const;
  std::string module_table(size_t max_rows = 25) const;
  std::string phase_table() const;
  // The Chrome trace event format (JSON): complete ("X") events nested per thread, instant
  // events for notes; args carry shapes, dtypes, FLOPs, allocation and GPU time.
  std::string chrome_trace() const;
  void write_chrome_trace(const std::string& path) const;  // throws mantissa::Error on I/O failure

  // Recorder (called by core/profiler.cpp under its lock).
  void begin(const char* name, Kind kind, const OpInfo* op) override;
  void end() override;
  void note(const char* name, const char* detail, double value) override;

 private:
  struct ThreadState {
    int id = 0;
    std::vector<int> open;  // indices of this thread's open events
    std::string autocast_op;
    int autocast_policy = -1;
    int64_t alloc_mark = -1;  // the allocator's allocated_total at the end of the previous op
    Device alloc_device;
  };
  ThreadState& thread_state();
  int64_t start_cpu_alloc_ = 0;  // the CPU allocator's allocated_total when the profile started
  int64_t now_ns() const;
  AllocatorStats allocator_stats(Device d);
  void require_stopped(const char* what) const;
  std::vector<OpStats> stats_by_name(bool modules) const;

  bool recording_ = false;
  int64_t origin_ = 0;  // steady clock at start, ns
  int64_t stop_ns_ = 0;
  int steps_ = 0;
  int64_t peak_seen_ = 0, allocator_peak_ = 0;
  Device last_device_;
  std::vector<Event> events_;
  std::vector<Note> notes_;
  std::unordered_map<std::thread::id, ThreadState> threads_;
  std::vector<std::pair<int, void*>> gpu_tokens_;  // (event, timer token), resolved at stop()
  GpuTimer gpu_timer_;
};

}  // namespace mantissa::profiler
