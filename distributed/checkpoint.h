// Checkpoints in data-parallel training: every rank holds the same model, so rank 0 alone
// writes the file (optim::save_checkpoint); the file is an ordinary checkpoint, loadable by
// any number of processes (each rank loads it, or rank 0 loads and DistributedDataParallel
// broadcasts). Saving is collective: the others wait for rank 0 and throw its error if the
// write failed, so no rank carries on believing a checkpoint exists.
#pragma once
#include <string>

#include "optim/checkpoint.h"

namespace mantissa::dist {

void save_checkpoint(const std::string& path, const optim::Checkpoint& parts, const optim::CheckpointInfo& info = {});

}  // namespace mantissa::dist
