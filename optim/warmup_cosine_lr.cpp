#include "optim/warmup_cosine_lr.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mantissa::optim {

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double min_lr)
    : LRScheduler(optimizer, "WarmupCosineLR"),
      warmup_steps_(warmup_steps),
      total_steps_(total_steps),
      min_lr_(min_lr) {
  check_state();
  initial_step();
}

void WarmupCosineLR::check_state() const {
  MT_CHECK(warmup_steps_ >= 0, "WarmupCosineLR", "warmup_steps must be non-negative, got ", warmup_steps_);
  MT_CHECK(total_steps_ >= 1 && total_steps_ >= warmup_steps_, "WarmupCosineLR",
           "total_steps must be at least 1 and at least warmup_steps (", warmup_steps_, "), got ", total_steps_);
  MT_CHECK(min_lr_ >= 0, "WarmupCosineLR", "min_lr must be non-negative, got ", min_lr_);
}

std::vector<double> WarmupCosineLR::compute_lr() {
  const double t = double(last_epoch_);
  std::vector<double> lrs;
  for (double base : base_lrs_) {
    if (last_epoch_ < warmup_steps_) {
      lrs.push_back(base * t / double(warmup_steps_));
    } else {
      const int64_t span = total_steps_ - warmup_steps_;
      const double p = span > 0 ? std::min(1.0, (t - double(warmup_steps_)) / double(span)) : 1.0;
      lrs.push_back(min_lr_ + (base - min_lr_) * 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
    }
  }
  return lrs;
}

void WarmupCosineLR::visit_state(const Visitor& f) {
  visit_int(f, "warmup_steps", warmup_steps_);
  visit_int(f, "total_steps", total_steps_);
  f("min_lr", min_lr_);
}

}  // namespace mantissa::optim
