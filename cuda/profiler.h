// Named ranges for Nsight Systems (NVTX), in plain C++ (no CUDA headers): the CUDA-facing
// names of core/profiler.h's switch and ranges, kept for code written against cuda/.
// Ranges are recorded while profiling is on: by default whenever a CUDA device is present,
// or as MANTISSA_NVTX=0/1 or set_profiling() decide. Without CUDA they only count.
//
//   { mt::cuda::ProfileRange r("forward"); loss = net.forward(x); }
//   $ nsys profile ./train
#pragma once
#include <vector>

#include "core/profiler.h"

namespace mantissa::cuda {

inline void set_profiling(bool on) { profiler::set_enabled(on); }
inline bool profiling_enabled() { return profiler::enabled(); }
// Unpaired push/pop for code that cannot use a scope: pop_range() undoes exactly what the
// matching push_range() did, even if profiling was switched in between; an unbalanced pop
// is ignored.
namespace detail {
// One entry per open push_range on this thread: whether it really pushed.
inline thread_local std::vector<bool> t_pushed;
}  // namespace detail
inline void push_range(const char* name) {
  const bool on = profiler::enabled();
  if (on) profiler::push(name);
  detail::t_pushed.push_back(on);
}
inline void pop_range() {
  if (detail::t_pushed.empty()) return;  // unbalanced: ignore rather than corrupt the NVTX stack
  if (detail::t_pushed.back()) profiler::pop();
  detail::t_pushed.pop_back();
}

// RAII: a range over the enclosing scope.
class ProfileRange {
 public:
  explicit ProfileRange(const char* name) { push_range(name); }
  ~ProfileRange() { pop_range(); }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

}  // namespace mantissa::cuda
