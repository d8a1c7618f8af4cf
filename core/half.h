// Host-side 2-byte float storage types. Eigen's half/bfloat16 convert with
// round-to-nearest-even (and use F16C instructions when the compiler enables them).
#pragma once
#include <Eigen/Core>

namespace mantissa {
using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;
}  // namespace mantissa
