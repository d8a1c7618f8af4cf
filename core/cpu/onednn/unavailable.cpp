// Built without oneDNN (libdnnl-dev not found): every entry leaves the work to Eigen.
#include "core/cpu/onednn.h"

namespace mantissa::cpu::onednn {

bool use_onednn(OpKind, DType) { return false; }
CacheCounts thread_cache_counts() { return {}; }
std::string describe() { return "oneDNN not built in (libdnnl-dev not found at configure time): Eigen"; }
bool matmul(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { return false; }
bool conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dGeometry&) { return false; }
bool conv2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                     const Conv2dGeometry&) {
  return false;
}

bool has_direct_weight_grad(DType, const Conv2dGeometry&) { return false; }

}  // namespace mantissa::cpu::onednn
