// Binary and where launchers: the same dtype rules and functors (core/elementwise_math.h)
// as cpu::binary / cpu::where (core/cpu/elementwise.cpp).
#include "core/elementwise_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {
// cond, a, b: broadcast/strided to out's shape; out: any strides.
// out[i] = cond[i] ? a[i] : b[i]
template <typename T>
__global__ void where_kernel(Indexer<4> ix, int64_t n, const bool* c, const T* a, const T* b, T* y) {
  ix.for_each(n, [&](const Offsets<4>& o) { y[o.v[0]] = c[o.v[1]] ? a[o.v[2]] : b[o.v[3]]; });
}
}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = "binary";
  const bool compare = op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
                       op == BinaryOp::Gt || op == BinaryOp::Ge || op == BinaryOp::LogicalAnd ||
                       op == BinaryOp::LogicalOr;
  if (compare) {
    dispatch_all(a.dtype(), [&]<typename T>() {
      using Acc = acc_t<T>;
      switch (op) {
        case BinaryOp::Eq:
          return launch_binary<T, bool, Acc>(a, b, out, math::Eq{}, name);
        case BinaryOp::Ne:
          return launch_binary<T, bool, Acc>(a, b, out, math::Ne{}, name);
        case BinaryOp::Lt:
          return launch_binary<T, bool, Acc>(a, b, out, math::Lt{}, name);
        case BinaryOp::Le:
          return launch_binary<T, bool, Acc>(a, b, out, math::Le{}, name);
        case BinaryOp::Gt:
          return launch_binary<T, bool, Acc>(a, b, out, math::Gt{}, name);
        case BinaryOp::Ge:
          return launch_binary<T, bool, Acc>(a, b, out, math::Ge{}, name);
        case BinaryOp::LogicalAnd:
          return launch_binary<T, bool, Acc>(a, b, out, math::LogicalAnd{}, name);
        default:
          return launch_binary<T, bool, Acc>(a, b, out, math::LogicalOr{}, name);
      }
    });
    return;
  }
  const bool arithmetic = op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul || op == BinaryOp::Div ||
                          op == BinaryOp::Maximum || op == BinaryOp::Minimum;
  if (arithmetic && !is_floating(a.dtype())) {
    dispatch_all(a.dtype(), [&]<typename T>() {
      if constexpr (std::is_floating_point_v<acc_t<T>>) {
        MT_FAIL(name, "internal: floating dtype in the integer path");
      } else {
        using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
        switch (op) {
          case BinaryOp::Add:
            return launch_binary<T, T, Acc>(a, b, out, math::Add{}, name);
          case BinaryOp::Sub:
            return launch_binary<T, T, Acc>(a, b, out, math::Sub{}, name);
          case BinaryOp::Mul:
            return launch_binary<T, T, Acc>(a, b, out, math::Mul{}, name);
          case BinaryOp::Maximum:
            return launch_binary<T, T, Acc>(a, b, out, math::Maximum{}, name);
          case BinaryOp::Minimum:
            return launch_binary<T, T, Acc>(a, b, out, math::Minimum{}, name);
          default:
            return launch_binary<T, T, Acc>(a, b, out, math::FloorDivInt{}, name);
        }
      }
    });
    return;
  }
  dispatch_floating(a.dtype(), name, [&]<typename T>() {
    using Acc = acc_t<T>;
    switch (op) {
      case BinaryOp::Add:
        return launch_binary<T, T, Acc>(a, b, out, math::Add{}, name);
      case BinaryOp::Sub:
        return launch_binary<T, T, Acc>(a, b, out, math::Sub{}, name);
      case BinaryOp::Mul:
        return launch_binary<T, T, Acc>(a, b, out, math::Mul{}, name);
      case BinaryOp::Div:
        return launch_binary<T, T, Acc>(a, b, out, math::Div{}, name);
      case BinaryOp::Maximum:
        return launch_binary<T, T, Acc>(a, b, out, math::Maximum{}, name);
      case BinaryOp::Minimum:
        return launch_binary<T, T, Acc>(a, b, out, math::Minimum{}, name);
      case BinaryOp::Pow:
        return launch_binary<T, T, Acc>(a, b, out, math::Pow{}, name);
      case BinaryOp::ReluBackward:
        return launch_binary<T, T, Acc>(a, b, out, math::ReluBackward{}, name);
      case BinaryOp::GeluErfBackward:
        return launch_binary<T, T, Acc>(a, b, out, math::GeluErfBackward{}, name);
      case BinaryOp::GeluTanhBackward:
        return launch_binary<T, T, Acc>(a, b, out, math::GeluTanhBackward{}, name);
      case BinaryOp::SiluBackward:
        return launch_binary<T, T, Acc>(a, b, out, math::SiluBackward{}, name);
      case BinaryOp::SigmoidBackwardFromOutput:
        return launch_binary<T, T, Acc>(a, b, out, math::SigmoidBackwardFromOutput{}, name);
      case BinaryOp::TanhBackwardFromOutput:
        return launch_binary<T, T, Acc>(a, b, out, math::TanhBackwardFromOutput{}, name);
      default:
        MT_FAIL(name, "unknown binary op ", int(op));
    }
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MT_CHECK(cond.dtype() == DType::Bool, "where", "condition must be bool, got ", dtype_name(cond.dtype()));
  const int dev = out.device().index;
  dispatch_all(out.dtype(), [&]<typename T>() {
    DeviceGuard g(dev);
    const Shape& s = out.sizes();
    auto ix = make_indexer<4>(s, {out.strides(), bstrides(cond, s), bstrides(a, s), bstrides(b, s)}, "where");
    where_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(
        ix, n, dptr<const bool>(cond), dptr<const T>(a), dptr<const T>(b), dptr<T>(out));
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
