// OneCycleLR: the 1cycle policy (Smith & Topin), as torch.optim.lr_scheduler.OneCycleLR.
#pragma once
#include <string>
#include <vector>

#include "optim/lr_scheduler.h"

namespace mantissa::optim {

struct OneCycleOptions {
  double pct_start = 0.3;               // fraction of the cycle spent increasing the lr
  std::string anneal_strategy = "cos";  // "cos" or "linear"
  bool cycle_momentum = true;           // cycle "momentum" (SGD) or "beta1" (Adam) inversely
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;         // initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min_lr = initial_lr / final_div_factor
  bool three_phase = false;       // warm up, anneal back to initial_lr, then to min_lr
};

// The lr rises from max_lr / div_factor to max_lr over the first pct_start of total_steps,
// then anneals to initial_lr / final_div_factor; with cycle_momentum the momentum (or
// Adam's beta1) moves the opposite way between max_momentum and base_momentum. Step it
// once per optimizer step; stepping past total_steps throws, as in PyTorch.
//
//   mt::optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9});
//   mt::optim::OneCycleLR sched(opt, /*max_lr=*/0.1, /*total_steps=*/epochs * steps_per_epoch);
//   for (...) { opt.step(); sched.step(); }
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, const OneCycleOptions& options = {});
  // One max_lr per parameter group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
             const OneCycleOptions& options = {});

 protected:
  std::vector<double> compute_lr() override;
  void visit_state(const Visitor& f) override;
  void check_state() const override;

 private:
  int64_t total_steps_;
  double pct_start_;
  double anneal_cos_;      // 1: cosine, 0: linear (a number so it round-trips through state_dict)
  double cycle_momentum_;  // 0 or 1
  double three_phase_;     // 0 or 1
  std::vector<double> initial_lrs_, max_lrs_, min_lrs_, max_momentums_, base_momentums_;
};

}  // namespace mantissa::optim
