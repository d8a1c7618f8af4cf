#include "optim/param_groups.h"

namespace mantissa::optim {

std::vector<ParamGroup> weight_decay_groups(const nn::Module& module, double weight_decay) {
  ParamGroup decayed{.weight_decay = weight_decay}, not_decayed{.weight_decay = 0.0};
  for (const Tensor& p : module.parameters()) {
    if (!p.requires_grad()) continue;
    (p.dim() >= 2 ? decayed : not_decayed).params.push_back(p);
  }
  return {decayed, not_decayed};
}

}  // namespace mantissa::optim
