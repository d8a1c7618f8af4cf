// Numerical gradient check: compares backward's Jacobian with central finite
// differences in float64, like torch.autograd.gradcheck.
//
//   auto x = mt::randn({3}, {.dtype = mt::kFloat64, .requires_grad = true});
//   std::string why;
//   bool ok = mt::autograd::gradcheck([](auto& in) { return mt::tanh(in[0]); }, {x}, {}, &why);
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mantissa::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

// `inputs` must be float64 CPU tensors; those that require grad are checked.
// Returns false (and explains in *why) at the first mismatching Jacobian entry.
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               const GradcheckOptions& opts = {}, std::string* why = nullptr);

// Checks second derivatives: gradcheck of the gradients of fn (taken with create_graph).
bool gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                   const GradcheckOptions& opts = {}, std::string* why = nullptr);

}  // namespace mantissa::autograd
