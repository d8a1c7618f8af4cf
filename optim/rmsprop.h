// RMSprop (Hinton), optionally centered and with momentum, with L2 weight decay and maximize,
// following torch.optim.RMSprop step for step.
#pragma once
#include "optim/optimizer.h"

namespace mantissa::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;  // smoothing constant of the squared-gradient average
  double eps = 1e-8;
  double weight_decay = 0;  // L2 penalty added to the gradient
  double momentum = 0;
  bool centered = false;  // normalise by the variance estimate (subtract the mean gradient's square)
  bool maximize = false;
};

// RMSprop. Per element (g the unscaled gradient):
//   g += weight_decay * w;  v = alpha v + (1 - alpha) g^2
//   centered: a = alpha a + (1 - alpha) g;  d = sqrt(v - a^2) + eps   (else d = sqrt(v) + eps)
//   momentum > 0: buf = momentum buf + g / d;  w -= lr buf     (else w -= lr g / d)
// Groups may override lr and weight_decay, and "alpha", "eps", "momentum", "centered",
// "maximize" through ParamGroup::options. State: "square_avg", with momentum
// "momentum_buffer", centered "grad_avg" (all start at zero); plus the step count.
//
//   mt::optim::RMSprop opt(params, {.lr = 1e-3, .momentum = 0.9, .centered = true});
//   opt.zero_grad();  loss.backward();  opt.step();
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = {});
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults = {});

 protected:
  math::OptimizerHyper step_hyper(const ParamGroup& group) const override;
  std::vector<std::string> step_buffers(const ParamGroup& group) const override;
  void check_group(const ParamGroup& group) const override;
  std::vector<std::string> buffer_names() const override { return {"square_avg", "momentum_buffer", "grad_avg"}; }
  std::vector<std::string> required_buffers(const ParamGroup& group) const override;
};

}  // namespace mantissa::optim
