// Parameter groups for decoupled weight decay: decay the weight matrices, not the
// biases, norm scales or (if asked) embeddings, as GPT-style training does.
//
//   auto groups = mt::optim::weight_decay_groups(gpt.named_parameters(), 0.1,
//                                                {.exclude = {"tok_emb", "pos_emb"}});
//   mt::optim::AdamW opt(groups, {.lr = 3e-4});
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"

namespace mantissa::optim {

struct WeightDecayGroupOptions {
  // Parameters whose dotted name contains one of these substrings get no decay.
  std::vector<std::string> exclude = {};
  // Parameters with fewer dims than this get no decay (2: matrices and up decay; vectors not).
  int64_t min_dims = 2;
};

// Two groups: {decayed, .weight_decay = weight_decay} and {the rest, .weight_decay = 0}, in
// the order of `named` (frozen parameters are left out; an empty group is omitted).
std::vector<ParamGroup> weight_decay_groups(const std::vector<std::pair<std::string, Tensor>>& named,
                                            double weight_decay, const WeightDecayGroupOptions& options = {});

}  // namespace mantissa::optim
