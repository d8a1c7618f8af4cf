#include "core/profile.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "amp/autocast_policy.h"
#include "core/allocator.h"
#include "core/error.h"

namespace mantissa::profiler {

namespace {

std::atomic<bool> g_profile_active{false};

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The phase of an outermost range (or of a range directly inside a "train_step" range).
Phase phase_of_root(const std::string& name, Kind kind) {
  if (kind == Kind::Module || name == "forward") return Phase::Forward;
  if (name == "backward") return Phase::Backward;
  if (ends_with(name, ".step") || name == "optimizer") return Phase::Optimizer;
  if (starts_with(name, "GradScaler") || name == "scaler") return Phase::Scaler;
  if (starts_with(name, "DataLoader") || name == "data") return Phase::Data;
  return Phase::Other;
}

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Nanoseconds as microseconds with three decimals: exact, so nesting survives the export.
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  return buf;
}

std::string shape_text(const TensorInfo& t) {
  if (!t.defined) return "-";
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(t.shape[i]);
  }
  s += ']';
  return s;
}

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Forward:
      return "forward";
    case Phase::Backward:
      return "backward";
    case Phase::Optimizer:
      return "optimizer";
    case Phase::Scaler:
      return "scaler";
    case Phase::Data:
      return "data";
    case Phase::Other:
      break;
  }
  return "other";
}

const char* Event::category() const {
  if (kind == Kind::Op) return "op";
  if (kind == Kind::Module) return "module";
  if (backward_node) return "backward";
  return "range";
}

double OpStats::gflops_per_s() const {
  const double ms = gpu_ms > 0 ? gpu_ms : total_ms;
  return ms > 0 ? flops / (ms * 1e6) : 0;
}

// ---------------------------------------------------------------- recording

Profile::Profile() {
  bool expected = false;
  MT_CHECK(g_profile_active.compare_exchange_strong(expected, true), "Profile",
           "another profiler::Profile is already recording (one at a time)");
  origin_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  gpu_timer_ = gpu_timer();
  // The first CPU op on each thread is charged what was allocated since the start, as every later
  // op is charged what was allocated since the previous one ended: the output its caller made
  // before the kernel's range opened (a linear's) counts for the first op too.
  start_cpu_alloc_ = int64_t(allocator_stats(Device::cpu()).allocated_total);
  recording_ = true;
  set_recorder(this);
}

Profile::~Profile() { stop(); }

int64_t Profile::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
             .count() -
         origin_;
}

AllocatorStats Profile::allocator_stats(Device d) {
  const AllocatorStats s = allocator_for(d)->stats();
  peak_seen_ = std::max(peak_seen_, int64_t(s.allocated));
  return s;
}

Profile::ThreadState& Profile::thread_state() {
  auto [it, inserted] = threads_.try_emplace(std::this_thread::get_id());
  if (inserted) it->second.id = int(threads_.size()) - 1;
  return it->second;
}

void Profile::begin(const char* name, Kind kind, const OpInfo* op) {
  ThreadState& ts = thread_state();
  Event e;
  e.name = name;
  e.kind = kind;
  e.thread = ts.id;
  e.depth = int(ts.open.size());
  e.parent = ts.open.empty() ? -1 : ts.open.back();
  // A step range ("train_step", the examples') is transparent: its children start the phases.
  const bool in_step = e.parent >= 0 && events_[size_t(e.parent)].name == "train_step";
  e.phase = e.parent < 0 || in_step ? phase_of_root(e.name, kind) : events_[size_t(e.parent)].phase;
  // The engine opens one range per node directly inside its "backward" range.
  if (kind == Kind::Range && e.parent >= 0 && events_[size_t(e.parent)].kind == Kind::Range &&
      events_[size_t(e.parent)].name == "backward") {
    e.backward_node = true;  // named <Op>Backward by the node itself (autograd/node.h)
  }
  if (op) {
    e.op = *op;
    e.op.conv = nullptr;
    e.op.attention = nullptr;
    last_device_ = op->device;
    for (int p = e.parent; p >= 0; p = events_[size_t(p)].parent)
      if (events_[size_t(p)].kind == Kind::Op) e.nested_op = true;
    const amp::AutocastState& ac = amp::autocast_state();
    e.autocast = ac.enabled && amp::autocast_applies(op->device.type);
    if (e.autocast) {
      e.autocast_op = ts.autocast_op;
      e.autocast_policy = ts.autocast_policy;
    }
    if (ts.alloc_mark < 0 && op->device.is_cpu()) {
      ts.alloc_mark = start_cpu_alloc_;
      ts.alloc_device = op->device;
    } else if (ts.alloc_mark < 0 || ts.alloc_device != op->device) {
      ts.alloc_mark = int64_t(allocator_stats(op->device).allocated_total);
      ts.alloc_device = op->device;
    }
  }
  const int index = int(events_.size());
  if (op && !e.nested_op && op->device.is_cuda() && gpu_timer_.start)
    if (void* token = gpu_timer_.start(op->device.index)) gpu_tokens_.emplace_back(index, token);
  e.start_ns = now_ns();
  events_.push_back(std::move(e));
  ts.open.push_back(index);
}

void Profile::end() {
  const int64_t t = now_ns();
  ThreadState& ts = thread_state();
  if (ts.open.empty()) return;  // a range opened before the profile started
  Event& e = events_[size_t(ts.open.back())];
  ts.open.pop_back();
  e.end_ns = t;
  if (e.kind == Kind::Op) {
    const auto total = int64_t(allocator_stats(e.op.device).allocated_total);
    if (ts.alloc_mark >= 0 && ts.alloc_device == e.op.device) e.alloc_bytes = total - ts.alloc_mark;
    ts.alloc_mark = total;
    ts.alloc_device = e.op.device;
    const int index = int(&e - events_.data());
    for (auto it = gpu_tokens_.rbegin(); it != gpu_tokens_.rend(); ++it)
      if (it->first == index) {
        gpu_timer_.stop(it->second);
        break;
      }
  }
}

void Profile::note(const char* name, const char* detail, double value) {
  ThreadState& ts = thread_state();
  notes_.push_back({name, detail ? detail : "", value, ts.id, now_ns()});
  // The autocast policy an op consulted applies to the kernels that follow on this thread.
  if (std::strcmp(name, "autocast") == 0) {
    ts.autocast_op = detail ? detail : "";
    ts.autocast_policy = int(value);
  }
}

void Profile::step() {
  if (!recording_) return;
  ++steps_;
  profiler::note("step", nullptr, steps_);
}

void Profile::stop() {
  if (!recording_) return;
  set_recorder(nullptr);  // from here on no thread calls begin/end/note
  recording_ = false;
  stop_ns_ = now_ns();
  for (auto& [id, ts] : threads_) {
    for (int i : ts.open) {
      events_[size_t(i)].end_ns = stop_ns_;
      events_[size_t(i)].truncated = true;
    }
    ts.open.clear();
  }
  // The GPU times: waits once for the last event of each op, long after it was queued.
  for (auto& [index, token] : gpu_tokens_) {
    Event& e = events_[size_t(index)];
    if (e.truncated) gpu_timer_.stop(token);
    e.gpu_ms = gpu_timer_.elapsed_ms(token);
  }
  gpu_tokens_.clear();
  allocator_peak_ = int64_t(allocator_for(last_device_)->stats().peak_allocated);
  g_profile_active.store(false);
}

// ---------------------------------------------------------------- reading

void Profile::require_stopped(const char* what) const {
  MT_CHECK(!recording_, "Profile", what, " needs a stopped profile: call stop() first");
}

const std::vector<Event>& Profile::events() const {
  require_stopped("events()");
  return events_;
}

const std::vector<Note>& Profile::notes() const {
  require_stopped("notes()");
  return notes_;
}

std::vector<OpStats> Profile::stats_by_name(bool modules) const {
  std::vector<double> child_ms(events_.size(), 0.0);
  for (const Event& e : events_)
    if (e.parent >= 0) child_ms[size_t(e.parent)] += e.ms();
  std::map<std::string, OpStats> by_name;
  std::map<std::string, std::set<std::string>> dtypes;
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    if (e.kind != (modules ? Kind::Module : Kind::Op)) continue;
    OpStats& s = by_name[e.name];
    s.name = e.name;
    ++s.calls;
    s.total_ms += e.ms();
    s.self_ms += e.ms() - child_ms[i];
    if (e.gpu_ms > 0) s.gpu_ms += e.gpu_ms;
    if (e.kind == Kind::Op) {
      if (!e.nested_op) s.flops += e.op.flops;
      if (!e.nested_op) s.alloc_bytes += e.alloc_bytes;
      dtypes[e.name].insert(dtype_name(e.op.compute));
    }
  }
  std::vector<OpStats> out;
  for (auto& [name, s] : by_name) {
    for (const std::string& d : dtypes[name]) s.dtypes += (s.dtypes.empty() ? "" : "/") + d;
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const OpStats& a, const OpStats& b) {
    return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.name < b.name;
  });
  return out;
}

std::vector<OpStats> Profile::op_stats() const {
  require_stopped("op_stats()");
  return stats_by_name(false);
}

std::vector<OpStats> Profile::module_stats() const {
  require_stopped("module_stats()");
  return stats_by_name(true);
}

std::map<Phase, double> Profile::phase_ms() const {
  require_stopped("phase_ms()");
  std::map<Phase, double> out;
  for (const Event& e : events_) {
    const bool top = e.parent < 0 ? e.name != "train_step" : events_[size_t(e.parent)].name == "train_step";
    if (top) out[e.phase] += e.ms();
  }
  return out;
}

std::string Profile::summary_table(size_t max_rows) const {
  const std::vector<OpStats> stats = op_stats();
  const bool gpu = std::any_of(stats.begin(), stats.end(), [](const OpStats& s) { return s.gpu_ms > 0; });
  const double wall = wall_ms() > 0 ? wall_ms() : 1;
  std::ostringstream os;
  os << "ops over " << fixed(wall_ms(), 2) << " ms"
     << (steps_ ? " (" + std::to_string(steps_) + " steps)" : std::string()) << ", by total time\n";
  os << pad("op", 24, true) << pad("dtype", 18, true) << pad("calls", 8) << pad("total ms", 11) << pad("mean us", 11)
     << pad("% step", 8) << pad("GFLOP/s", 10) << pad("alloc MB", 10) << (gpu ? pad("GPU ms", 10) : "") << "\n";
  double total = 0;
  for (const OpStats& s : stats) total += s.self_ms;
  for (size_t i = 0; i < stats.size() && (max_rows == 0 || i < max_rows); ++i) {
    const OpStats& s = stats[i];
    os << pad(s.name, 24, true) << pad(s.dtypes, 18, true) << pad(std::to_string(s.calls), 8)
       << pad(fixed(s.total_ms, 3), 11) << pad(fixed(s.mean_us(), 1), 11) << pad(fixed(100 * s.total_ms / wall, 1), 8)
       << pad(s.flops > 0 ? fixed(s.gflops_per_s(), 2) : "-", 10) << pad(fixed(double(s.alloc_bytes) / 1e6, 2), 10)
       << (gpu ? pad(fixed(s.gpu_ms, 3), 10) : "") << "\n";
  }
  if (max_rows && stats.size() > max_rows) os << "  ... " << stats.size() - max_rows << " more ops\n";
  os << "time in ops: " << fixed(total, 3) << " ms of " << fixed(wall_ms(), 3) << " ms; allocator peak "
     << fixed(double(allocator_peak_) / 1e6, 2)
     << " MB (seen during the profile: " << fixed(double(peak_seen_) / 1e6, 2) << " MB)\n";
  return os.str();
}

std::string Profile::module_table(size_t max_rows) const {
  const std::vector<OpStats> stats = module_stats();
  std::ostringstream os;
  os << pad("module", 32, true) << pad("calls", 8) << pad("total ms", 11) << pad("self ms", 11) << pad("mean us", 11)
     << "\n";
  for (size_t i = 0; i < stats.size() && (max_rows == 0 || i < max_rows); ++i) {
    const OpStats& s = stats[i];
    os << pad(s.name, 32, true) << pad(std::to_string(s.calls), 8) << pad(fixed(s.total_ms, 3), 11)
       << pad(fixed(s.self_ms, 3), 11) << pad(fixed(s.mean_us(), 1), 11) << "\n";
  }
  return os.str();
}

std::string Profile::phase_table() const {
  const std::map<Phase, double> phases = phase_ms();
  const double wall = wall_ms() > 0 ? wall_ms() : 1;
  std::ostringstream os;
  os << pad("phase", 12, true) << pad("total ms", 11) << pad("% step", 8) << (steps_ ? pad("ms/step", 10) : "") << "\n";
  for (const auto& [phase, ms] : phases)
    os << pad(phase_name(phase), 12, true) << pad(fixed(ms, 3), 11) << pad(fixed(100 * ms / wall, 1), 8)
       << (steps_ ? pad(fixed(ms / steps_, 3), 10) : "") << "\n";
  return os.str();
}

std::string Profile::chrome_trace() const {
  require_stopped("chrome_trace()");
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  os << R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"mantissa"}})";
  std::set<int> threads;
  for (const Event& e : events_) threads.insert(e.thread);
  for (const Note& n : notes_) threads.insert(n.thread);
  for (int t : threads)
    os << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << t << ",\"args\":{\"name\":\""
       << (t == 0 ? std::string("main") : "thread " + std::to_string(t)) << "\"}}";
  for (const Event& e : events_) {
    os << ",\n{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"" << e.category() << "\",\"ph\":\"X\",\"pid\":1,"
       << "\"tid\":" << e.thread << ",\"ts\":" << us(e.start_ns) << ",\"dur\":" << us(e.end_ns - e.start_ns)
       << ",\"args\":{\"phase\":\"" << phase_name(e.phase) << "\"";
    if (e.truncated) os << ",\"truncated\":true";
    if (e.kind == Kind::Op) {
      os << ",\"device\":\"" << e.op.device.str() << "\",\"compute_dtype\":\"" << dtype_name(e.op.compute)
         << "\",\"shapes\":\"";
      for (size_t i = 0; i < e.op.tensors.size(); ++i) os << (i ? " " : "") << shape_text(e.op.tensors[i]);
      os << "\",\"dtypes\":\"";
      for (size_t i = 0; i < e.op.tensors.size(); ++i)
        os << (i ? " " : "") << (e.op.tensors[i].defined ? dtype_name(e.op.tensors[i].dtype) : "-");
      os << "\"";
      if (e.op.flops > 0) os << ",\"flops\":" << fixed(e.op.flops, 0);
      os << ",\"alloc_bytes\":" << e.alloc_bytes;
      if (e.autocast) os << ",\"autocast_op\":\"" << json_escape(e.autocast_op) << "\"";
      if (e.gpu_ms >= 0) os << ",\"gpu_ms\":" << fixed(e.gpu_ms, 6);
    }
    os << "}}";
  }
  for (const Note& n : notes_)
    os << ",\n{\"name\":\"" << json_escape(n.name)
       << "\",\"cat\":\"note\",\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":" << n.thread << ",\"ts\":" << us(n.time_ns)
       << ",\"args\":{\"detail\":\"" << json_escape(n.detail) << "\",\"value\":" << fixed(n.value, 6) << "}}";
  os << "\n]}\n";
  return os.str();
}

void Profile::write_chrome_trace(const std::string& path) const {
  const std::string text = chrome_trace();
  std::ofstream f(path, std::ios::binary);
  MT_CHECK(f.good(), "Profile::write_chrome_trace", "cannot open '", path, "' for writing");
  f << text;
  f.close();
  MT_CHECK(f.good(), "Profile::write_chrome_trace", "writing '", path, "' failed");
}

}  // namespace mantissa::profiler
