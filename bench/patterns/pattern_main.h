// The frame shared by the pattern programs (bench/patterns/*.cpp): each builds its cases (a name
// and a closure running one forward + backward) and hands them to run_patterns, which prints each
// case's best time (5 rounds of 3 calls after a warm-up call) or, with PROF=1, its profiler
// table; AMP=1 runs every case under bf16 autocast; argv[1] keeps the cases whose name contains
// it. pattern_common.py is the PyTorch side of the same frame.
#pragma once
#include <mantissa.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/profile.h"

namespace patterns {

namespace mt = mantissa;

// A program's cases, in order.
struct Cases {
  std::vector<std::pair<std::string, std::function<void()>>> list;
  void add(const char* name, std::function<void()> f) { list.emplace_back(name, std::move(f)); }
};

// A float32 leaf of N(0, 1) values that requires grad.
inline mt::Tensor leaf(const mt::Shape& shape) { return mt::randn(shape).requires_grad_(true); }

// Keeps the last result of a case that computes without a graph (so the work is not dropped).
inline void keep_alive(const mt::Tensor& t) {
  static mt::Tensor kept;
  kept = t;
}

// The best time of f in microseconds: 5 rounds of `reps` calls after one warm-up call.
template <class Fn>
double best_us(Fn f, int reps) {
  f();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) f();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, us / reps);
  }
  return best;
}

inline int run_patterns(int argc, char** argv, const Cases& cases) {
  const char* filter = argc > 1 ? argv[1] : "";
  std::optional<mt::amp::Autocast> autocast;
  if (std::getenv("AMP")) autocast.emplace(mt::kBFloat16);
  const bool profile = std::getenv("PROF") != nullptr;
  for (const auto& [name, f] : cases.list) {
    if (!std::strstr(name.c_str(), filter)) continue;
    if (profile) {
      f();
      mt::profiler::Profile p;
      for (int i = 0; i < 5; ++i) {
        f();
        p.step();
      }
      p.stop();
      std::cout << name << "\n" << p.summary_table(12);
      continue;
    }
    std::printf("%-20s %9.1f us\n", name.c_str(), best_us(f, 3));
  }
  return 0;
}

}  // namespace patterns

// The pattern programs' shorthand.
namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
using patterns::keep_alive;
using patterns::leaf;
