#include "optim/lr_schedulers_extra.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mantissa::optim {

// ---------------------------------------------------------------- ExponentialLR

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma)
    : LRScheduler(optimizer, "ExponentialLR"), gamma_(gamma) {
  check_state();
  initial_step();
}
void ExponentialLR::check_state() const {
  MT_CHECK(std::isfinite(gamma_) && gamma_ >= 0, "ExponentialLR", "gamma must be finite and non-negative, got ",
           gamma_);
}
std::vector<double> ExponentialLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}
void ExponentialLR::visit_state(const Visitor& f) { f("gamma", gamma_); }

// ---------------------------------------------------------------- MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  check_state();
  initial_step();
}
void MultiStepLR::check_state() const {
  MT_CHECK(std::isfinite(gamma_) && gamma_ >= 0, "MultiStepLR", "gamma must be finite and non-negative, got ", gamma_);
  for (int64_t m : milestones_) MT_CHECK(m >= 0, "MultiStepLR", "milestones must be non-negative, got ", m);
}
std::vector<double> MultiStepLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  const auto k = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (k == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, double(k));
  return lrs;
}
void MultiStepLR::visit_state(const Visitor& f) {
  f("gamma", gamma_);
  for (size_t i = 0; i < milestones_.size(); ++i) visit_int(f, "milestones." + std::to_string(i), milestones_[i]);
}

// ---------------------------------------------------------------- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer, "CosineAnnealingLR"), t_max_(t_max), eta_min_(eta_min) {
  check_state();
  initial_step();
}
void CosineAnnealingLR::check_state() const {
  MT_CHECK(t_max_ >= 1, "CosineAnnealingLR", "t_max must be at least 1, got ", t_max_);
  MT_CHECK(std::isfinite(eta_min_) && eta_min_ >= 0, "CosineAnnealingLR",
           "eta_min must be finite and non-negative, got ", eta_min_);
}
std::vector<double> CosineAnnealingLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  const double pi = std::numbers::pi, t = double(last_epoch_), T = double(t_max_);
  const int64_t period = 2 * t_max_;
  const int64_t phase = (((last_epoch_ - 1 - t_max_) % period) + period) % period;  // Python's %
  for (size_t g = 0; g < lrs.size(); ++g) {
    if (phase == 0)
      lrs[g] = lrs[g] + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / T)) / 2;
    else
      lrs[g] = (1 + std::cos(pi * t / T)) / (1 + std::cos(pi * (t - 1) / T)) * (lrs[g] - eta_min_) + eta_min_;
  }
  return lrs;
}
void CosineAnnealingLR::visit_state(const Visitor& f) {
  visit_int(f, "t_max", t_max_);
  f("eta_min", eta_min_);
}

// ---------------------------------------------------------------- LambdaLR

LambdaLR::LambdaLR(Optimizer& optimizer, const Lambda& lr_lambda)
    : LambdaLR(optimizer, std::vector<Lambda>(optimizer.param_groups().size(), lr_lambda)) {}
LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler(optimizer, "LambdaLR"), lambdas_(std::move(lr_lambdas)) {
  MT_CHECK(lambdas_.size() == base_lrs_.size(), "LambdaLR", "expected ", base_lrs_.size(),
           " lr_lambdas (one per parameter group), got ", lambdas_.size());
  for (const Lambda& l : lambdas_) MT_CHECK(l != nullptr, "LambdaLR", "got an empty lr_lambda");
  initial_step();
}
std::vector<double> LambdaLR::compute_lr() {
  std::vector<double> lrs(base_lrs_.size());
  for (size_t g = 0; g < lrs.size(); ++g) {
    lrs[g] = base_lrs_[g] * lambdas_[g](last_epoch_);
    MT_CHECK(std::isfinite(lrs[g]) && lrs[g] >= 0, "LambdaLR", "lr_lambda of group ", g, " at step ", last_epoch_,
             " gives the learning rate ", lrs[g], " (must be finite and non-negative)");
  }
  return lrs;
}

// ---------------------------------------------------------------- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : LRScheduler(optimizer, "ReduceLROnPlateau"), o_(options) {
  if (o_.min_lr.size() == 1) o_.min_lr.assign(base_lrs_.size(), o_.min_lr[0]);
  MT_CHECK(o_.min_lr.size() == base_lrs_.size(), "ReduceLROnPlateau", "expected ", base_lrs_.size(),
           " min_lr values (one, or one per parameter group), got ", options.min_lr.size());
  best_ = o_.mode_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  check_state();
  initial_step();
}

void ReduceLROnPlateau::check_state() const {
  const char* op = "ReduceLROnPlateau";
  MT_CHECK(o_.factor >= 0 && o_.factor < 1, op, "factor must be in [0, 1), got ", o_.factor);
  MT_CHECK(o_.patience >= 0 && o_.cooldown >= 0, op, "patience and cooldown must be non-negative, got ", o_.patience,
           " and ", o_.cooldown);
  MT_CHECK(std::isfinite(o_.threshold) && o_.eps >= 0, op, "threshold must be finite and eps non-negative, got ",
           o_.threshold, " and ", o_.eps);
  for (double m : o_.min_lr) MT_CHECK(m >= 0, op, "min_lr must be non-negative, got ", m);
  MT_CHECK(num_bad_epochs_ >= 0 && cooldown_counter_ >= 0, op, "counters must be non-negative");
}

bool ReduceLROnPlateau::is_better(double a) const {
  const double t = o_.threshold;
  if (!o_.mode_max) return o_.threshold_abs ? a < best_ - t : a < best_ * (1 - t);
  return o_.threshold_abs ? a > best_ + t : a > best_ * (t + 1);
}

void ReduceLROnPlateau::step(double metric) {
  auto& groups = optimizer_->param_groups();
  MT_CHECK(groups.size() == base_lrs_.size(), name_, "the optimizer has ", groups.size(),
           " parameter groups but the scheduler was made for ", base_lrs_.size());
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;  // NaN is never better
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > o_.patience) {
    for (size_t g = 0; g < groups.size(); ++g) {
      const double old_lr = groups[g].get("lr");
      const double new_lr = std::max(old_lr * o_.factor, o_.min_lr[g]);
      if (old_lr - new_lr > o_.eps) groups[g].lr = new_lr;
    }
    cooldown_counter_ = o_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_ = group_lrs();
}

void ReduceLROnPlateau::visit_state(const Visitor& f) {
  f("best", best_);
  visit_int(f, "num_bad_epochs", num_bad_epochs_);
  visit_int(f, "cooldown_counter", cooldown_counter_);
  f("factor", o_.factor);
  visit_int(f, "patience", o_.patience);
  f("threshold", o_.threshold);
  visit_int(f, "cooldown", o_.cooldown);
  f("eps", o_.eps);
  double mode_max = o_.mode_max ? 1 : 0, abs = o_.threshold_abs ? 1 : 0;
  f("mode_max", mode_max);
  f("threshold_abs", abs);
  o_.mode_max = mode_max != 0;
  o_.threshold_abs = abs != 0;
  for (size_t g = 0; g < o_.min_lr.size(); ++g) f("min_lrs." + std::to_string(g), o_.min_lr[g]);
}

}  // namespace mantissa::optim
