// Parameter groups for weight decay that skips batch-norm / layer-norm parameters and
// biases (the usual recipe: decay only the weights of convs and linears).
//
//   auto groups = mt::optim::weight_decay_groups(net, 5e-4);   // {decayed, not decayed}
//   mt::optim::SGD opt(groups, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"

namespace mantissa::optim {

// Two groups over the module's trainable parameters: group 0 holds those with 2 or more
// dims (conv and linear weights) with `weight_decay`; group 1 the 0/1-dim ones (biases,
// norm weights and biases) with weight decay 0. Either group may be empty.
std::vector<ParamGroup> weight_decay_groups(const nn::Module& module, double weight_decay);

}  // namespace mantissa::optim
