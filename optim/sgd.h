// Stochastic gradient descent with momentum, dampening, Nesterov momentum, weight decay
// and maximize, following torch.optim.SGD step for step.
#pragma once
#include "optim/optimizer.h"

namespace mantissa::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2 penalty added to the gradient
  bool nesterov = false;    // needs momentum > 0 and dampening == 0
  bool maximize = false;    // ascend instead of descend
};

// SGD. Per element (g the unscaled gradient, first step: buf = g):
//   g += weight_decay * w;  buf = momentum * buf + (1 - dampening) * g;
//   g = nesterov ? g + momentum * buf : buf;  w -= lr * g
// Groups may override lr and weight_decay, and "momentum", "dampening", "nesterov",
// "maximize" through ParamGroup::options. State: "momentum_buffer" (with momentum).
//
//   mt::optim::SGD opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
//   opt.zero_grad();  loss.backward();  opt.step();
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults);

 protected:
  math::OptimizerHyper step_hyper(const ParamGroup& group) const override;
  std::vector<std::string> step_buffers(const ParamGroup& group) const override;
  void check_group(const ParamGroup& group) const override;
  std::vector<std::string> buffer_names() const override { return {"momentum_buffer"}; }
  std::vector<std::string> required_buffers(const ParamGroup&) const override { return {}; }
};

}  // namespace mantissa::optim
