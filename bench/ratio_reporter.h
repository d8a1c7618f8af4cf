// A console reporter that also prints, after all runs, the ratio of each Mantissa benchmark
// to its baseline measured in the same process: ratios stay meaningful on a loaded machine
// where absolute numbers do not.
#pragma once
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mantissa_bench {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  struct Pair {
    std::string ours, baseline, counter;  // benchmark names (with /args) and the counter compared
    double unit_scale = 1e9;              // the printed values are counter / unit_scale ...
    std::string unit = "G";               // ... followed by this
  };
  // Colours only on a terminal (a custom reporter does not see --benchmark_color).
  explicit RatioReporter(std::vector<Pair> pairs)
      : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular), pairs_(std::move(pairs)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      // With repetitions keep the median; otherwise the single run.
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      for (const auto& [name, c] : r.counters) values_[plain_name(r) + "#" + name] = c.value;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-40s %-32s %12s %12s %7s\n", "mantissa", "baseline", "ours", "baseline", "ratio");
    for (const Pair& p : pairs_) {
      auto a = values_.find(p.ours + "#" + p.counter), b = values_.find(p.baseline + "#" + p.counter);
      if (a == values_.end() || b == values_.end()) continue;  // filtered out
      std::printf("%-40s %-32s %10.2f %s %10.2f %s %7.2f\n", p.ours.c_str(), p.baseline.c_str(),
                  a->second / p.unit_scale, p.unit.c_str(), b->second / p.unit_scale, p.unit.c_str(),
                  a->second / b->second);
    }
  }

 private:
  // The run's name without "/repeats:N" (which --benchmark_repetitions adds), so that pairs
  // name benchmarks the same way with and without repetitions.
  static std::string plain_name(const Run& r) {
    std::string name = r.run_name.str();
    const size_t at = name.find("/repeats:");
    if (at != std::string::npos) {
      const size_t end = name.find('/', at + 1);
      name.erase(at, end == std::string::npos ? std::string::npos : end - at);
    }
    return name;
  }
  std::vector<Pair> pairs_;
  std::map<std::string, double> values_;
};

// main() body: runs the registered benchmarks with a RatioReporter over `pairs`.
inline int run(int argc, char** argv, std::vector<RatioReporter::Pair> pairs) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter(std::move(pairs));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace mantissa_bench
