// Must NOT compile: a translation unit on mantissa::core alone calls x.sum(), which autograd/
// defines. core_standalone.AutogradMethodsDoNotCompileOnCore builds it and expects the error
// of core/tensor.h that names autograd/ops.h (not a link error, not success).
#include "core/tensor.h"

int main() {
  mantissa::Tensor x = mantissa::ones({2, 3});
  return int(x.sum().numel());
}
