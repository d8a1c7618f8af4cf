// Adagrad (Duchi et al.) with learning-rate decay, L2 weight decay, an initial accumulator
// value and maximize, following torch.optim.Adagrad step for step (dense gradients).
#pragma once
#include "optim/optimizer.h"

namespace mantissa::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;  // L2 penalty added to the gradient
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
};

// Adagrad. Per element, at step t (g the unscaled gradient):
//   g += weight_decay * w;  sum += g^2;  w -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps)
// Groups may override lr and weight_decay, and "lr_decay", "initial_accumulator_value",
// "eps", "maximize" through ParamGroup::options. State: "sum" (starting at the group's
// initial_accumulator_value when the parameter's first step creates it); plus the step count.
//
//   mt::optim::Adagrad opt(params, {.lr = 0.1, .lr_decay = 1e-3});
//   opt.zero_grad();  loss.backward();  opt.step();
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& options = {});
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults = {});

 protected:
  math::OptimizerHyper step_hyper(const ParamGroup& group) const override;
  std::vector<std::string> step_buffers(const ParamGroup&) const override { return {"sum"}; }
  void check_group(const ParamGroup& group) const override;
  std::vector<std::string> buffer_names() const override { return {"sum"}; }
  std::vector<std::string> required_buffers(const ParamGroup&) const override { return {"sum"}; }
  double initial_buffer_value(const ParamGroup& group, const std::string&) const override {
    return *group.initial_accumulator_value;
  }
};

}  // namespace mantissa::optim
