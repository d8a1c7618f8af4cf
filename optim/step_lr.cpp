#include "optim/step_lr.h"

#include "core/error.h"

namespace mantissa::optim {

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer, "StepLR"), step_size_(step_size), gamma_(gamma) {
  check_state();
  initial_step();
}

void StepLR::check_state() const {
  MT_CHECK(step_size_ >= 1, "StepLR", "step_size must be at least 1, got ", step_size_);
  MT_CHECK(gamma_ >= 0, "StepLR", "gamma must be non-negative, got ", gamma_);
}

std::vector<double> StepLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

void StepLR::visit_state(const Visitor& f) {
  visit_int(f, "step_size", step_size_);
  f("gamma", gamma_);
}

}  // namespace mantissa::optim
