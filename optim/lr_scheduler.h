// Learning-rate schedulers: the base class. A scheduler owns a step counter (last_epoch,
// PyTorch's name) and writes each group's lr into the optimizer when it steps. Concrete
// schedulers: StepLR (optim/step_lr.h), WarmupCosineLR (optim/warmup_cosine_lr.h),
// OneCycleLR (optim/one_cycle_lr.h).
//
//   mt::optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (int epoch = 0; epoch < 90; ++epoch) {
//     train_one_epoch(opt);   // opt.step() calls
//     sched.step();           // after the optimizer steps, as in PyTorch
//   }
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace mantissa::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances the schedule by one and writes the new learning rates into the optimizer.
  void step();
  // The learning rates (one per group) the last step() (or the constructor) set.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  // Steps taken; 0 right after construction.
  int64_t last_epoch() const { return last_epoch_; }
  // Each group's starting learning rate (the group's lr at construction, unless the
  // scheduler defines its own, as OneCycleLR does).
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return *optimizer_; }
  const std::string& name() const { return name_; }

  // Scalars "last_epoch", "base_lrs.<g>", "last_lr.<g>" and the scheduler's own settings
  // (e.g. "gamma"). Restoring it (with the optimizer's own state dict) resumes the schedule;
  // like PyTorch, loading does not write learning rates into the optimizer. Missing,
  // unknown or invalid keys throw mantissa::Error naming the key; nothing changes then.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 protected:
  // The optimizer must outlive the scheduler.
  LRScheduler(Optimizer& optimizer, std::string name);
  // Derived constructors call this last: last_epoch becomes 0 and the initial lrs apply.
  void initial_step();

  // The learning rates for last_epoch_ (one per group). May also set other group
  // hyper-parameters (OneCycleLR cycles the momentum).
  virtual std::vector<double> compute_lr() = 0;
  // Visits the scheduler's own state by name, for state_dict (read) and load (write).
  using Visitor = std::function<void(const std::string& key, double& value)>;
  virtual void visit_state(const Visitor& f) { (void)f; }
  // Throws mantissa::Error when the scheduler's settings are invalid (checked on load).
  virtual void check_state() const {}

  // Visits an integer setting through a double.
  static void visit_int(const Visitor& f, const std::string& key, int64_t& value);
  // The current lr of every group.
  std::vector<double> group_lrs() const;

  Optimizer* optimizer_;
  std::string name_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  std::vector<double> last_lr_;
};

}  // namespace mantissa::optim
