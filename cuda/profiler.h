// Named ranges for Nsight Systems (NVTX), in plain C++ (no CUDA headers): upper layers
// mark forward/backward/optimizer phases without knowing about CUDA. Ranges are recorded
// only while profiling is on (set_profiling(true), or MANTISSA_NVTX=1 in the environment);
// otherwise, and in builds without CUDA, they cost a branch.
//
//   { mt::cuda::ProfileRange r("forward"); loss = net.forward(x); }
//   $ MANTISSA_NVTX=1 nsys profile ./train
#pragma once

namespace mantissa::cuda {

#ifdef MANTISSA_WITH_CUDA
void set_profiling(bool on);
bool profiling_enabled();
void push_range(const char* name);  // no-op while profiling is off
void pop_range();                   // pops only ranges that push_range actually pushed
#else
inline void set_profiling(bool) {}
inline bool profiling_enabled() { return false; }
inline void push_range(const char*) {}
inline void pop_range() {}
#endif

// RAII: push on construction, pop on destruction.
class ProfileRange {
 public:
  explicit ProfileRange(const char* name) { push_range(name); }
  ~ProfileRange() { pop_range(); }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

}  // namespace mantissa::cuda
