// Completes autograd::Methods, the key to the Tensor methods that autograd/ defines (sum,
// reshape, backward, add_, ... in core/tensor.h). autograd/node.h includes this header, so
// every autograd, nn, optim and amp header brings it; a translation unit on mantissa::core
// alone does not, and x.sum() there fails to compile, naming autograd/ops.h.
#pragma once
#include "core/tensor.h"

namespace mantissa::autograd {

struct Methods {};

}  // namespace mantissa::autograd
