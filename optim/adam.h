// Adam (Kingma & Ba) with L2 weight decay, AMSGrad and maximize, following
// torch.optim.Adam step for step (bias correction included).
#pragma once
#include <array>

#include "optim/optimizer.h"

namespace mantissa::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled decay
  bool amsgrad = false;
  bool maximize = false;
};

// Adam. Per element, at step t (g the unscaled gradient):
//   g += weight_decay * w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Groups may override lr and weight_decay, and "beta1", "beta2", "eps", "amsgrad",
// "maximize" through ParamGroup::options. State: "exp_avg", "exp_avg_sq" and, with
// amsgrad, "max_exp_avg_sq"; plus the step count.
//
//   mt::optim::Adam opt(params, {.lr = 3e-4, .betas = {0.9, 0.98}});
//   opt.zero_grad();  loss.backward();  opt.step();
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults = {});

 protected:
  // For AdamW: `decoupled` decays the weight instead of adding to the gradient.
  Adam(std::string name, std::vector<ParamGroup> groups, const AdamOptions& defaults, bool decoupled);

  math::OptimizerHyper step_hyper(const ParamGroup& group) const override;
  std::vector<std::string> step_buffers(const ParamGroup& group) const override;
  void check_group(const ParamGroup& group) const override;
  std::vector<std::string> buffer_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
  std::vector<std::string> required_buffers(const ParamGroup& group) const override;

 private:
  bool decoupled_;
};

}  // namespace mantissa::optim
