// Counts of what makes the host wait for a device: stream/device synchronisations and
// device-to-host copies issued by cuda/ (each d2h copy also synchronises its stream, and is
// counted once in each). A training step is meant to have none after warm-up
// (docs/design.md §4); tests and tools/gpu-check.sh read the counts around a step, as
// torch.cuda.set_sync_debug_mode would report them. Without a GPU every count stays 0.
//
//   mt::reset_host_sync_counts();
//   train_step();
//   auto c = mt::host_sync_counts(mt::Device::cuda(0));   // c.synchronizations, c.device_to_host_copies
#pragma once
#include <cstdint>

#include "core/device.h"

namespace mantissa {

struct HostSyncCounts {
  int64_t synchronizations = 0;       // the host waited for a stream or the whole device
  int64_t device_to_host_copies = 0;  // copies whose destination is host memory
};

// Since the start of the process or the last reset. CPU devices always report zeros; a
// CUDA index outside [0, 64) throws.
HostSyncCounts host_sync_counts(Device device);
void reset_host_sync_counts();

namespace detail {
// Called by device code paths (cuda/) where they make the host wait.
void count_host_sync(int cuda_index);
void count_device_to_host(int cuda_index);
}  // namespace detail

}  // namespace mantissa
