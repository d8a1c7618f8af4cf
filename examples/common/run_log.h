// What the examples share for looking at a run: --profile FILE (a few steps after warmup,
// profiled: Chrome trace to FILE, tables to stdout and FILE.txt), --amp-report (the same
// steps' AMP report on stdout) and --metrics FILE (JSON lines: one record per logging step,
// one per evaluation; tools/plot_runs.py draws them).
//
//   examples::RunLogOptions log_opts;
//   examples::add_run_log_options(app, log_opts);
//   examples::StepProfiler profiler(log_opts);
//   examples::MetricsLog metrics(log_opts.metrics_path);
//   for (...) { profiler.begin_step(); train_step(); profiler.end_step(); metrics.train({...}); }
//   profiler.finish();  // if the run ended inside the profiled window
#pragma once
#include <mantissa.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace examples {

struct RunLogOptions {
  std::string profile_path;  // Chrome trace destination; empty: no trace
  bool amp_report = false;
  std::string metrics_path;  // JSON lines; empty: none
  int profile_warmup = 5;    // steps before the profiled window (caches, allocator, primitives)
  int profile_steps = 3;
};

inline void add_run_log_options(CLI::App& app, RunLogOptions& o) {
  app.add_option("--profile", o.profile_path,
                 "profile a few training steps after warmup: Chrome trace to this file (open in ui.perfetto.dev), "
                 "op/module/phase tables to stdout and FILE.txt");
  app.add_flag("--amp-report", o.amp_report, "print the AMP report of the profiled steps (precision per op and layer)");
  app.add_option("--metrics", o.metrics_path,
                 "write JSON-lines metrics (per logging step and evaluation) to this file");
  app.add_option("--profile-warmup", o.profile_warmup, "training steps before the profiled ones")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--profile-steps", o.profile_steps, "training steps to profile")->check(CLI::PositiveNumber);
}

// Profiles steps [warmup, warmup + steps) of a training loop when --profile or --amp-report asks.
class StepProfiler {
 public:
  // total_steps (when known): a shorter run moves the window earlier so that it is profiled.
  explicit StepProfiler(RunLogOptions o, bool print = true, int64_t total_steps = -1)
      : o_(std::move(o)), print_(print) {
    if (total_steps >= 0)
      o_.profile_warmup =
          int(std::max<int64_t>(0, std::min<int64_t>(o_.profile_warmup, total_steps - o_.profile_steps)));
  }
  bool wanted() const { return !o_.profile_path.empty() || o_.amp_report; }

  // The window opens when step `warmup` - 1 ends, so that it holds the data loading of the
  // steps it profiles (a range-for fetches the next batch before the loop body runs).
  // Each step is also an NVTX range "train_step" (for nsys and ncu --nvtx-include "train_step/";
  // free when NVTX is off).
  void begin_step() {
    if (wanted() && !profile_ && !done_ && step_ == o_.profile_warmup) start();
    step_range_.emplace("train_step");
  }
  void end_step() {
    step_range_.reset();
    ++step_;
    if (profile_) {
      profile_->step();
      if (profile_->steps() >= o_.profile_steps) finish();
    } else if (wanted() && !done_ && step_ == o_.profile_warmup) {
      start();
    }
  }
  // Stops and reports a profile still running (the run ended inside the window).
  void finish() {
    if (profile_ && profile_->steps() == 0) {  // opened at an epoch's end: reopen at the next step
      profile_.reset();                        // begin_step() opens it again
      return;
    }
    if (!profile_) {
      if (wanted() && !done_ && print_ && step_ > 0 && step_ <= o_.profile_warmup)
        std::cerr << "--profile: the run ended within the " << o_.profile_warmup << " warmup steps; nothing profiled\n";
      return;
    }
    profile_->stop();
    done_ = true;
    const std::string tables =
        profile_->summary_table() + "\n" + profile_->module_table(15) + "\n" + profile_->phase_table();
    if (!o_.profile_path.empty()) {
      profile_->write_chrome_trace(o_.profile_path);
      std::ofstream txt(o_.profile_path + ".txt");
      txt << tables;
      MT_CHECK(txt.good(), "--profile", "cannot write '", o_.profile_path, ".txt'");
      if (print_)
        std::cout << "\nprofile of " << profile_->steps() << " steps (after " << o_.profile_warmup
                  << " warmup steps); trace: " << o_.profile_path << "\n"
                  << tables;
    }
    if (o_.amp_report && print_) std::cout << "\n" << mantissa::amp::amp_report(*profile_).str();
    if (print_) std::cout << std::flush;
    profile_.reset();
  }

 private:
  std::optional<mantissa::profiler::Range> step_range_;  // the current step's "train_step" range
  RunLogOptions o_;
  bool print_;
  int step_ = 0;
  bool done_ = false;
  std::unique_ptr<mantissa::profiler::Profile> profile_;

  void start() { profile_ = std::make_unique<mantissa::profiler::Profile>(); }
};

// One training record per logging step.
struct TrainRecord {
  int64_t step = 0;  // optimizer steps taken (1-based)
  int epoch = 0;     // 1-based (the transformer: 0, it counts steps only)
  double loss = 0, lr = 0, loss_scale = 1;
  int64_t skipped_steps = 0;
  int64_t samples = 0;            // trained on so far; samples/s is logged over the interval since the last record
  int64_t peak_memory_bytes = 0;  // the allocator's high-water mark on the training device
};

// The allocator's high-water mark on `device`, for TrainRecord::peak_memory_bytes.
inline int64_t peak_memory(mantissa::Device device) {
  return int64_t(mantissa::allocator_for(device)->stats().peak_allocated);
}

class MetricsLog {
 public:
  // An empty path logs nothing; an unwritable one throws mantissa::Error.
  explicit MetricsLog(const std::string& path) {
    if (path.empty()) return;
    out_.open(path, std::ios::trunc);
    MT_CHECK(out_.good(), "--metrics", "cannot open '", path, "' for writing");
    mark_ = Clock::now();
  }
  bool enabled() const { return out_.is_open(); }

  void train(const TrainRecord& r) {
    if (!enabled()) return;
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - mark_).count();
    const double samples_per_s = seconds > 0 ? double(r.samples - samples_at_mark_) / seconds : 0;
    mark_ = now;
    samples_at_mark_ = r.samples;
    write({{"kind", "\"train\""},
           {"step", std::to_string(r.step)},
           {"epoch", std::to_string(r.epoch)},
           {"loss", number(r.loss)},
           {"lr", number(r.lr)},
           {"loss_scale", number(r.loss_scale)},
           {"skipped_steps", std::to_string(r.skipped_steps)},
           {"samples_per_s", number(samples_per_s)},
           {"peak_memory_mb", number(double(r.peak_memory_bytes) / 1e6)}});
  }
  // Evaluation results by name ("test_loss", "test_accuracy", "val_loss", ...).
  void eval(int64_t step, int epoch, const std::vector<std::pair<std::string, double>>& results) {
    if (!enabled()) return;
    std::vector<std::pair<std::string, std::string>> fields = {
        {"kind", "\"eval\""}, {"step", std::to_string(step)}, {"epoch", std::to_string(epoch)}};
    for (const auto& [name, value] : results) fields.emplace_back(name, number(value));
    write(fields);
    mark_ = Clock::now();  // the evaluation's time is not training throughput
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point mark_;  // of the last record
  int64_t samples_at_mark_ = 0;

  // JSON has no NaN or infinity: a diverged loss is written as null.
  static std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }
  void write(const std::vector<std::pair<std::string, std::string>>& fields) {
    out_ << "{";
    for (size_t i = 0; i < fields.size(); ++i)
      out_ << (i ? ", " : "") << "\"" << fields[i].first << "\": " << fields[i].second;
    out_ << "}\n";
    out_.flush();  // a crashed or interrupted run keeps what it logged
    MT_CHECK(out_.good(), "--metrics", "writing the metrics file failed");
  }
  std::ofstream out_;
};

}  // namespace examples
