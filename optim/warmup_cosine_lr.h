// WarmupCosineLR: linear warmup, then cosine annealing down to a floor.
#pragma once
#include "optim/lr_scheduler.h"

namespace mantissa::optim {

// At step t (last_epoch), for each group's base lr:
//   t <  warmup_steps:                lr = base_lr * t / warmup_steps      (0 at t = 0)
//   warmup_steps <= t <= total_steps: lr = min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2,
//                                     p = (t - warmup_steps) / (total_steps - warmup_steps)
//   t >  total_steps:                 lr = min_lr
// The warmup matches Hugging Face's get_cosine_schedule_with_warmup; min_lr = 0 gives
// exactly that schedule. Step it once per optimizer step.
//
//   mt::optim::WarmupCosineLR sched(opt, /*warmup_steps=*/500, /*total_steps=*/20000, /*min_lr=*/1e-5);
//   for (...) { opt.step(); sched.step(); }
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr = 0);

 protected:
  std::vector<double> compute_lr() override;
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  int64_t warmup_steps_, total_steps_;
  double min_lr_;
};

}  // namespace mantissa::optim
