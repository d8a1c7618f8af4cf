// max_pool2d, avg_pool2d and adaptive_avg_pool2d.
//
// max_pool2d's backward scatters the gradient to the recorded argmax positions (one kernel per
// device), recorded as an op whose own backward gathers there again. The average pools are linear maps A: each is
// recorded as a pair of ops (A and its adjoint A^T) that are each other's backward, so every order of derivative is
// available.
#include "nn/functional_detail.h"

namespace mantissa::nn {

using namespace detail;

namespace {

Pool2dGeometry pool_geometry(const char* op, const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
                             bool ceil_mode) {
  if (stride == Size2(0)) stride = kernel;
  MT_CHECK(kernel.h >= 1 && kernel.w >= 1, op, "kernel_size must be >= 1, got ", kernel);
  MT_CHECK(stride.h >= 1 && stride.w >= 1, op, "stride must be >= 1, got ", stride);
  MT_CHECK(dilation.h >= 1 && dilation.w >= 1, op, "dilation must be >= 1, got ", dilation);
  MT_CHECK(padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w, op, "padding ",
           padding, " must be non-negative and at most half of the kernel size ", kernel);
  Pool2dGeometry g;
  g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3);
  g.KH = kernel.h, g.KW = kernel.w, g.SH = stride.h, g.SW = stride.w;
  g.PH = padding.h, g.PW = padding.w, g.DH = dilation.h, g.DW = dilation.w;
  g.OH = window_output_size(g.H, g.KH, g.SH, g.PH, g.DH, ceil_mode);
  g.OW = window_output_size(g.W, g.KW, g.SW, g.PW, g.DW, ceil_mode);
  MT_CHECK(g.OH > 0 && g.OW > 0, op, "input ", describe({x}), " is too small for kernel ", kernel, " with padding ",
           padding, " and dilation ", dilation, " (output would be ", g.OH, "x", g.OW, ")");
  return g;
}

// A linear pooling map and its adjoint, as two ops that are each other's backward.
enum class LinearPool { Avg, Adaptive };

Tensor pool_apply(LinearPool kind, const Tensor& x, const Pool2dGeometry& g, bool adjoint) {
  const char* op = kind == LinearPool::Avg ? "avg_pool2d" : "adaptive_avg_pool2d";
  Shape out = adjoint ? Shape{g.N, g.C, g.H, g.W} : Shape{g.N, g.C, g.OH, g.OW};
  Tensor y = make_tensor(out, x.dtype(), x.device());
  if (y.numel()) {
    auto entry = kind == LinearPool::Avg
                     ? (adjoint ? &NnKernels::avg_pool2d_backward : &NnKernels::avg_pool2d)
                     : (adjoint ? &NnKernels::adaptive_avg_pool2d_backward : &NnKernels::adaptive_avg_pool2d);
    kernel(x, op, entry)(launch::contiguous(x), y, g);
  }
  if (needs_grad({x}))
    record(op, {x}, y,
           [kind, g, adjoint](const Tensor& gy, auto&) { return Grads{pool_apply(kind, gy, g, !adjoint)}; });
  return y;
}

// gy: [N, C, OH, OW] -> gx: [N, C, H, W], max_pool2d's gradient: gy summed at the argmax
// positions `idx`. Linear in gy; its backward gathers gx's gradient at the same positions.
Tensor max_pool_scatter(const Tensor& gy, const Tensor& idx, const Pool2dGeometry& g) {
  Tensor gx = make_tensor({g.N, g.C, g.H, g.W}, gy.dtype(), gy.device());
  if (gx.numel()) kernel(gy, "max_pool2d", &NnKernels::max_pool2d_backward)(launch::contiguous(gy), idx, gx, g);
  if (needs_grad({gy}))
    record("max_pool2d_backward", {gy}, gx, [idx, g](const Tensor& ggx, auto&) {
      Tensor picked = gather(ggx.reshape({g.N, g.C, g.H * g.W}), 2, idx.reshape({g.N, g.C, g.OH * g.OW}));
      return Grads{picked.reshape({g.N, g.C, g.OH, g.OW})};
    });
  return gx;
}

}  // namespace

namespace functional {

ValuesIndices max_pool2d_with_indices(const Tensor& x0, Size2 kernel_size, const MaxPool2dFuncOptions& o) {
  bool unbatched;
  Tensor x = batched("max_pool2d", x0, unbatched);
  Pool2dGeometry g = pool_geometry("max_pool2d", x, kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
  Tensor y = make_tensor({g.N, g.C, g.OH, g.OW}, x.dtype(), x.device());
  Tensor idx = make_tensor({g.N, g.C, g.OH, g.OW}, DType::Int64, x.device());
  if (y.numel()) kernel(x, "max_pool2d", &NnKernels::max_pool2d)(launch::contiguous(x), y, idx, g);
  if (needs_grad({x})) {
    record("max_pool2d", {x}, y, [idx, g](const Tensor& gy, auto&) { return Grads{max_pool_scatter(gy, idx, g)}; });
  }
  if (unbatched) return {y.squeeze(0), idx.squeeze(0)};
  return {y, idx};
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, const MaxPool2dFuncOptions& o) {
  return max_pool2d_with_indices(x, kernel_size, o).values;
}

Tensor avg_pool2d(const Tensor& x0, Size2 kernel_size, const AvgPool2dFuncOptions& o) {
  bool unbatched;
  Tensor x = batched("avg_pool2d", x0, unbatched);
  MT_CHECK(o.divisor_override >= 0, "avg_pool2d", "divisor_override must be positive, got ", o.divisor_override);
  Pool2dGeometry g = pool_geometry("avg_pool2d", x, kernel_size, o.stride, o.padding, 1, o.ceil_mode);
  g.count_include_pad = o.count_include_pad;
  g.divisor_override = o.divisor_override;
  Tensor y = pool_apply(LinearPool::Avg, x, g, false);
  return unbatched ? y.squeeze(0) : y;
}

Tensor adaptive_avg_pool2d(const Tensor& x0, Size2 output_size) {
  bool unbatched;
  Tensor x = batched("adaptive_avg_pool2d", x0, unbatched);
  MT_CHECK(output_size.h >= 1 && output_size.w >= 1, "adaptive_avg_pool2d", "output_size must be >= 1, got ",
           output_size);
  MT_CHECK(x.size(2) > 0 && x.size(3) > 0, "adaptive_avg_pool2d", "input ", describe({x}),
           " has an empty spatial dimension");
  Pool2dGeometry g;
  g.N = x.size(0), g.C = x.size(1), g.H = x.size(2), g.W = x.size(3);
  g.OH = output_size.h, g.OW = output_size.w;
  Tensor y = pool_apply(LinearPool::Adaptive, x, g, false);
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace functional
}  // namespace mantissa::nn
