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
#include <concepts>
#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "amp/grad_scaler.h"
#include "core/state_dict.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace mantissa::optim {

// The model of a checkpoint, held by its two state-dict calls: any nn::Module (or anything
// with state_dict() and load_state_dict(dict, strict)) converts to it, so optim/ needs no
// nn/ header (nn sits beside optim, not below it).
template <class M>
concept HasModelState = requires(M& m, const StateDict& dict, bool strict) {
  { m.state_dict() } -> std::convertible_to<StateDict>;
  m.load_state_dict(dict, strict);
};

class ModelState {
 public:
  ModelState() = default;
  ModelState(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): `.model = nullptr`
  template <HasModelState M>
  ModelState(M* m) {  // NOLINT(google-explicit-constructor): `.model = &net`, as a pointer would
    if (m == nullptr) return;
    save_ = [m] { return StateDict(m->state_dict()); };
    load_ = [m](const StateDict& d, bool strict) { m->load_state_dict(d, strict); };
  }
  explicit operator bool() const { return bool(save_); }
  StateDict state_dict() const { return save_(); }
  void load_state_dict(const StateDict& dict, bool strict) const { load_(dict, strict); }

 private:
  std::function<StateDict()> save_;
  std::function<void(const StateDict&, bool)> load_;
};

struct Checkpoint {
  ModelState model;  // required: &net
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
