// Launch planning of the multi-tensor fused optimizer step (cuda/amp_step.cu), in plain C++
// so the CPU tests can check it against a brute-force enumeration without a GPU.
//
// A launch carries, by value, a list of up to kMaxTensors parameters cut into kChunk-element
// chunks, one chunk per block, up to kMaxBlocks blocks (as PyTorch's multi_tensor_apply). A
// tensor whose chunks do not fit in the current launch continues as slot 0 of the next one,
// as often as its size needs.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype_dispatch.h"  // MT_HOST_DEVICE

namespace mantissa::multi_tensor {

constexpr int kMaxTensors = 24;  // per launch: keeps TensorList under the 4 KB parameter limit
constexpr int kMaxBlocks = 320;  // chunks per launch
constexpr int64_t kChunk = 65536;
constexpr int kMaxSteps = 256;  // step counters per increment launch

// One parameter of the step: its buffers (device addresses, never dereferenced on the host).
struct TensorEntry {
  void* param = nullptr;
  const void* grad = nullptr;
  void* state[3] = {nullptr, nullptr, nullptr};
  void* working_copy = nullptr;
  const int64_t* step = nullptr;
  int64_t first_at_step = 0;
  int64_t numel = 0;
};

// The kernel parameters of one launch. Block b updates chunk block_chunk[b] of slot block_tensor[b].
struct TensorList {
  void* param[kMaxTensors];
  const void* grad[kMaxTensors];
  void* state[3][kMaxTensors];
  void* working_copy[kMaxTensors];
  const int64_t* step[kMaxTensors];
  int64_t first_at_step[kMaxTensors];
  int64_t numel[kMaxTensors];
  uint8_t block_tensor[kMaxBlocks];
  int32_t block_chunk[kMaxBlocks];
};
static_assert(sizeof(TensorList) < 4000, "kernel parameters are limited to 4 KB");

struct Launch {
  TensorList list;
  int tensors = 0;  // slots in use
  int blocks = 0;   // grid size
};

// Elements [begin, end) of block b of `list`: what the kernel updates and the tests enumerate.
MT_HOST_DEVICE void chunk_range(const TensorList& list, int b, int64_t chunk, int64_t& begin, int64_t& end) {
  begin = int64_t(list.block_chunk[b]) * chunk;
  const int64_t n = list.numel[list.block_tensor[b]];
  end = begin + chunk < n ? begin + chunk : n;
}

// The launches that update every element of every tensor exactly once, in order; empty tensors
// are skipped. The limits are parameters (at most the constants above) so tests can also use
// small ones.
std::vector<Launch> plan_launches(const std::vector<TensorEntry>& tensors, int max_tensors = kMaxTensors,
                                  int max_blocks = kMaxBlocks, int64_t chunk = kChunk);

// The step counters, kMaxSteps (or `max_steps`) per increment launch.
struct StepList {
  int64_t* step[kMaxSteps];
  int count;
};
std::vector<StepList> plan_step_lists(const std::vector<int64_t*>& steps, int max_steps = kMaxSteps);

}  // namespace mantissa::multi_tensor
