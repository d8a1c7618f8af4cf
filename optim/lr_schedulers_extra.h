// More learning-rate schedules, each following torch.optim.lr_scheduler (1.13) step for step
// (the recursive "chainable" forms, so a hand-set lr carries on from its new value):
// ExponentialLR, MultiStepLR, CosineAnnealingLR, LambdaLR, and ReduceLROnPlateau (stepped
// with a metric).
//
//   mt::optim::CosineAnnealingLR sched(opt, /*t_max=*/100, /*eta_min=*/1e-5);
//   ... opt.step(); sched.step();
#pragma once
#include <functional>
#include <limits>
#include <vector>

#include "optim/lr_scheduler.h"

namespace mantissa::optim {

// lr *= gamma every step.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> compute_lr() override;
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  double gamma_;
};

// lr *= gamma^k at each step that is a milestone (k: how often it is listed).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> compute_lr() override;
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// eta_min + (base - eta_min) (1 + cos(pi t / t_max)) / 2, in PyTorch's recursive form (it
// continues past t_max, rising again, as PyTorch's does).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);

 protected:
  std::vector<double> compute_lr() override;
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// lr = base_lr * lambda(t): one function for every group, or one per group. The functions are
// not part of the state dict (PyTorch saves only callable objects); construct the scheduler
// with the same functions before loading.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& optimizer, const Lambda& lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);

 protected:
  std::vector<double> compute_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

struct ReduceLROnPlateauOptions {
  bool mode_max = false;               // PyTorch's mode "max" (a larger metric is better); default "min"
  double factor = 0.1;                 // new lr = lr * factor
  int64_t patience = 10;               // bad steps tolerated before reducing
  double threshold = 1e-4;             // what counts as an improvement
  bool threshold_abs = false;          // PyTorch's threshold_mode "abs"; default "rel"
  int64_t cooldown = 0;                // steps to wait after a reduction before counting bad steps again
  std::vector<double> min_lr = {0.0};  // one value for all groups, or one per group
  double eps = 1e-8;                   // reductions smaller than this are skipped
};

// Reduces each group's lr by `factor` once the metric has not improved for more than
// `patience` steps, as torch.optim.lr_scheduler.ReduceLROnPlateau:
//   mt::optim::ReduceLROnPlateau sched(opt, {.patience = 2});
//   ... sched.step(validation_loss);
class ReduceLROnPlateau : public LRScheduler {
 public:
  ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options = {});
  void step(double metric);
  void step() = delete;  // needs the metric
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

 protected:
  std::vector<double> compute_lr() override { return group_lrs(); }
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  bool is_better(double a) const;
  ReduceLROnPlateauOptions o_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0;
};

}  // namespace mantissa::optim
