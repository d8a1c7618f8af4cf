// The CUDA backend's public knobs, in plain C++ (no CUDA headers): safe to include from
// any layer. Without CUDA (MANTISSA_WITH_CUDA undefined) every function is an inline
// fallback, so callers need no #ifdefs.
//
//   mt::cuda::set_allow_tf32(true);   // fp32 matmuls may use TF32 tensor cores
//   mt::cuda::synchronize(0);         // wait for all work on cuda:0 (e.g. before timing)
//   mt::cuda::set_attention_score_memory(256 << 20);  // attention through GEMMs (opt-in)
//
// The counts of host synchronisations and device-to-host copies are in core/host_sync.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace mantissa::cuda {

#ifdef MANTISSA_WITH_CUDA
// fp32 matmuls use TF32 tensor cores (10-bit mantissa inputs, fp32 accumulate) when on.
// Off by default so fp32 results match the CPU to fp32 rounding.
void set_allow_tf32(bool on);
bool allow_tf32();
// Blocks until every queued kernel and copy on `device` finished; surfaces async errors,
// including an out-of-range index found by a device-side check (core/index_check.h).
void synchronize(int device = 0);
// Makes `device` this thread's current GPU (as torch.cuda.set_device): work and page-locked
// allocations of the thread then create no context on GPU 0.
void set_device(int device);
std::string device_name(int device = 0);
int compute_capability(int device = 0);  // e.g. 90 for H100/H200
size_t total_memory(int device = 0);     // bytes
// Bytes of score-sized buffers attention may hold at once: within them,
// scaled_dot_product_attention runs as tensor-core GEMMs through its [L, S] score matrices,
// a chunk of (batch, head) problems at a time; rows too long for them, or a budget of 0, take
// the memory-lean kernels (O(L + S) memory, far slower). The default is 0, or
// MANTISSA_ATTENTION_SCORE_MEMORY's value; 256 MiB (attention_plan::kRecommendedScoreMemory)
// holds GPT-sized calls in one round. Negative values throw. See core/attention_plan.h.
void set_attention_score_memory(int64_t bytes);
int64_t attention_score_memory();
#else
inline void set_allow_tf32(bool) {}
inline bool allow_tf32() { return false; }
inline void synchronize(int = 0) {}
inline void set_device(int device) {
  MT_FAIL("cuda::set_device", "device cuda:", device, " is not available: mantissa was built without CUDA");
}
inline std::string device_name(int device = 0) {
  MT_FAIL("cuda::device_name", "device cuda:", device, " is not available: mantissa was built without CUDA");
}
inline int compute_capability(int = 0) { return 0; }
inline size_t total_memory(int = 0) { return 0; }
inline void set_attention_score_memory(int64_t) {}
inline int64_t attention_score_memory() { return 0; }
#endif

}  // namespace mantissa::cuda
