// Training checkpoints in one safetensors file: the model's parameters and buffers
// (readable by any safetensors tool under their own names), the optimizer's state,
// the LR scheduler, the GradScaler, the RNG state and the epoch.
//
//   mt::optim::Checkpoint parts{.model = &net, .optimizer = &opt, .scheduler = &sched, .scaler = &scaler};
//   mt::optim::save_checkpoint("run.safetensors", parts, {.epoch = 3});
//   auto info = mt::optim::load_checkpoint("run.safetensors", parts);   // info.epoch == 3
//
// Saving writes a temporary file and renames it, so a crash mid-save keeps the previous
// checkpoint. Loading validates the file and every part (keys, shapes, dtypes) and, if
// anything is wrong, restores whatever it had already applied before throwing
// mantissa::Error: the model and optimizer are never left half-loaded.
#pragma once
#include <map>
#include <string>

#include "amp/grad_scaler.h"
#include "nn/module.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace mantissa::optim {

struct Checkpoint {
  nn::Module* model = nullptr;  // required
  Optimizer* optimizer = nullptr;
  LRScheduler* scheduler = nullptr;
  amp::GradScaler* scaler = nullptr;
  bool strict = true;  // model keys must match exactly
};

struct CheckpointInfo {
  int64_t epoch = 0;
  std::map<std::string, std::string> extra;  // caller-defined strings (e.g. data loader state)
};

void save_checkpoint(const std::string& path, const Checkpoint& parts, const CheckpointInfo& info = {});
// Restores every part present in `parts` (and the global RNG); returns the saved info.
CheckpointInfo load_checkpoint(const std::string& path, const Checkpoint& parts);

}  // namespace mantissa::optim
