// Unary launcher: the dtype rules of core/elementwise_dispatch.h (shared with cpu::unary) over
// this device's loop.
#include "core/elementwise_dispatch.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
  const char* name = op_name(op);
  elementwise::run_unary<Dtypes>(op, in.dtype(), a, b, [&]<typename In, typename Out, typename Acc>(auto f) {
    launch_unary<In, Out, Acc>(in, out, f, name);
  });
}

}  // namespace mantissa::cuda
