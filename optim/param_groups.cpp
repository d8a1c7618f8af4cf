#include "optim/param_groups.h"

namespace mantissa::optim {

std::vector<ParamGroup> weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named,
                                            double weight_decay, const WeightDecayGroupOptions& options) {
  ParamGroup decay{.weight_decay = weight_decay}, no_decay{.weight_decay = 0.0};
  for (const auto& [name, p] : named) {
    if (!p.defined() || !p.requires_grad()) continue;
    bool excluded = p.dim() < options.min_dims;
    for (const std::string& s : options.exclude) excluded = excluded || name.find(s) != std::string::npos;
    (excluded ? no_decay : decay).params.push_back(p);
  }
  std::vector<ParamGroup> groups;
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  return groups;
}

}  // namespace mantissa::optim
