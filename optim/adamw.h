// AdamW (Loshchilov & Hutter): Adam with weight decay decoupled from the gradient,
// following torch.optim.AdamW step for step.
#pragma once
#include "optim/adam.h"

namespace mantissa::optim {

// Adam's options with PyTorch's AdamW default weight_decay of 1e-2.
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;  // decoupled: w *= 1 - lr * weight_decay each step
  bool amsgrad = false;
  bool maximize = false;
};

// AdamW. Per element, at step t: w *= 1 - lr * weight_decay, then the Adam update
// without an L2 term. Same group options ("beta1", "beta2", "eps", "amsgrad",
// "maximize") and state as Adam.
//
//   mt::optim::AdamW opt(net.parameters(), {.lr = 1e-3});
//   opt.zero_grad();  loss.backward();  opt.step();
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = {});
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults = {});
};

}  // namespace mantissa::optim
