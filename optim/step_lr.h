// StepLR: decays each group's lr by gamma every step_size steps (torch.optim.lr_scheduler.StepLR).
#pragma once
#include "optim/lr_scheduler.h"

namespace mantissa::optim {

// lr(t) = base_lr * gamma^(t / step_size) (integer division), applied recursively to the
// group's current lr as PyTorch does, so a hand-set lr carries on from its new value.
//
//   mt::optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   ... opt.step(); sched.step();
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> compute_lr() override;
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

}  // namespace mantissa::optim
