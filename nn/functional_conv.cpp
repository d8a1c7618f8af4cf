// conv2d, unfold and fold.
//
// conv2d runs the device's fused kernel forward and backward (im2col + GEMM on the CPU).
// When a graph of the backward is requested (create_graph), the backward is instead
// written with differentiable ops — unfold, fold and matmul — so it can be
// differentiated again; unfold and fold are each other's backward.
#include "nn/functional_detail.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(conv2d, LowerPrecision);

namespace mantissa::nn {

using namespace detail;

namespace {

void check_at_least(const char* op, const char* what, Size2 v, int64_t min) {
  MT_CHECK(v.h >= min && v.w >= min, op, what, " must be >= ", min, ", got ", v);
}

Conv2dGeometry geometry(const char* op, const Shape& x4, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation) {
  check_at_least(op, "kernel_size", kernel, 1);
  check_at_least(op, "stride", stride, 1);
  check_at_least(op, "padding", padding, 0);
  check_at_least(op, "dilation", dilation, 1);
  Conv2dGeometry g;
  g.N = x4[0], g.C = x4[1], g.H = x4[2], g.W = x4[3];
  g.KH = kernel.h, g.KW = kernel.w, g.SH = stride.h, g.SW = stride.w;
  g.PH = padding.h, g.PW = padding.w, g.DH = dilation.h, g.DW = dilation.w;
  g.OH = window_output_size(g.H, g.KH, g.SH, g.PH, g.DH);
  g.OW = window_output_size(g.W, g.KW, g.SW, g.PW, g.DW);
  MT_CHECK(g.OH > 0 && g.OW > 0, op, "input of shape ", shape_str(x4), " is too small for kernel ", kernel,
           " with padding ", padding, " and dilation ", dilation, " (output would be ", g.OH, "x", g.OW, ")");
  return g;
}

Tensor fold_impl(const Tensor& cols, const Conv2dGeometry& g);

// im2col as a differentiable op; its backward is fold (col2im), and fold's is unfold.
Tensor unfold_impl(const Tensor& x, const Conv2dGeometry& g) {
  Tensor cols = make_tensor({g.N, g.C * g.KH * g.KW, g.OH * g.OW}, x.dtype(), x.device());
  if (cols.numel()) kernel(x, "unfold", &NnKernels::im2col)(launch::contiguous(x), cols, g);
  if (needs_grad({x})) record("unfold", {x}, cols, [g](const Tensor& gc, auto&) { return Grads{fold_impl(gc, g)}; });
  return cols;
}

Tensor fold_impl(const Tensor& cols, const Conv2dGeometry& g) {
  Tensor x = make_tensor({g.N, g.C, g.H, g.W}, cols.dtype(), cols.device());
  if (x.numel()) kernel(cols, "fold", &NnKernels::col2im)(launch::contiguous(cols), x, g);
  if (needs_grad({cols})) record("fold", {cols}, x, [g](const Tensor& gx, auto&) { return Grads{unfold_impl(gx, g)}; });
  return x;
}

// conv2d's gradients with differentiable ops (for create_graph). With K = C/G*KH*KW, L = OH*OW:
// gx = fold(W_g^T @ gy_g), gw = sum_n gy_g @ unfold(x)_g^T, gb = sum gy.
Grads conv2d_backward_composite(const Tensor& gy, const Tensor& x, const Tensor& w, const Conv2dGeometry& g,
                                const std::vector<bool>& need) {
  const int64_t G = g.groups, Cog = g.Cout / G, K = g.C / G * g.KH * g.KW, L = g.OH * g.OW;
  Tensor gy4 = gy.reshape({g.N, G, Cog, L});
  Tensor gx, gw, gb;
  if (need[0]) {
    Tensor dcols = matmul(w.reshape({G, Cog, K}).transpose(1, 2), gy4);  // [N, G, K, L]
    gx = fold_impl(dcols.reshape({g.N, G * K, L}), g);
  }
  if (need[1]) {
    Tensor cols = unfold_impl(x, g).reshape({g.N, G, K, L});
    gw = sum(matmul(gy4, cols.transpose(2, 3)), {0}).reshape(w.sizes());
  }
  if (need[2]) gb = sum(gy, {0, 2, 3});
  return Grads{gx, gw, gb};
}

}  // namespace

namespace functional {

Tensor unfold(const Tensor& x0, Size2 kernel_size, const UnfoldOptions& o) {
  bool unbatched;
  Tensor x = batched("unfold", x0, unbatched);
  Conv2dGeometry g = geometry("unfold", x.sizes(), kernel_size, o.stride, o.padding, o.dilation);
  Tensor cols = unfold_impl(x, g);
  return unbatched ? cols.squeeze(0) : cols;
}

Tensor fold(const Tensor& cols0, Size2 output_size, Size2 kernel_size, const UnfoldOptions& o) {
  MT_CHECK(cols0.defined() && (cols0.dim() == 2 || cols0.dim() == 3), "fold",
           "expected a 2-D [C*KH*KW, L] or 3-D [N, C*KH*KW, L] input, got ", describe({cols0}));
  MT_CHECK(is_floating(cols0.dtype()), "fold", "expected a floating-point input, got ", describe({cols0}));
  const bool unbatched = cols0.dim() == 2;
  Tensor cols = unbatched ? cols0.unsqueeze(0) : cols0;
  check_at_least("fold", "kernel_size", kernel_size, 1);
  const int64_t kk = kernel_size.h * kernel_size.w;
  MT_CHECK(cols.size(1) % kk == 0, "fold", "dimension 1 of the input (", cols.size(1),
           ") must be divisible by the kernel size ", kernel_size, " product ", kk, "; got ", describe({cols0}));
  Conv2dGeometry g = geometry("fold", {cols.size(0), cols.size(1) / kk, output_size.h, output_size.w}, kernel_size,
                              o.stride, o.padding, o.dilation);
  MT_CHECK(cols.size(2) == g.OH * g.OW, "fold", "input ", describe({cols0}), " has ", cols.size(2),
           " blocks, but output size ", output_size, " with kernel ", kernel_size, " gives ", g.OH, "x", g.OW);
  Tensor x = fold_impl(cols, g);
  return unbatched ? x.squeeze(0) : x;
}

Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Conv2dFuncOptions& o) {
  auto in = amp::autocast_many(autocast_conv2d, {x0, w0, b0});
  bool unbatched;
  Tensor x = batched("conv2d", in[0], unbatched);
  const Tensor &w = in[1], &b = in[2];
  MT_CHECK(w.defined() && w.dim() == 4, "conv2d", "weight must be 4-D [Cout, C / groups, KH, KW], got ", describe({w}));
  launch::check_same_device("conv2d", {x, w, b});
  MT_CHECK(x.dtype() == w.dtype() && (!b.defined() || b.dtype() == x.dtype()), "conv2d",
           "input, weight and bias must share one dtype, got ", describe({x, w, b}));
  MT_CHECK(o.groups >= 1, "conv2d", "groups must be >= 1, got ", o.groups);
  const int64_t Cout = w.size(0);
  MT_CHECK(Cout % o.groups == 0 && w.size(1) * o.groups == x.size(1), "conv2d", "input ", describe({x}), " and weight ",
           describe({w}), " do not match with groups = ", o.groups, " (expected ", w.size(1) * o.groups,
           " input channels and Cout divisible by groups)");
  MT_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == Cout), "conv2d", "bias must be [", Cout, "], got ",
           describe({b}));
  Conv2dGeometry g = geometry("conv2d", x.sizes(), {w.size(2), w.size(3)}, o.stride, o.padding, o.dilation);
  g.Cout = Cout;
  g.groups = o.groups;
  Tensor y = make_tensor({g.N, Cout, g.OH, g.OW}, x.dtype(), x.device());
  kernel(x, "conv2d", &NnKernels::conv2d_forward)(launch::contiguous(x), launch::contiguous(w),
                                                  b.defined() ? launch::contiguous(b) : b, y, g);
  if (needs_grad({x, w, b})) {
    record("conv2d", {x, w, b}, y, [sx = SavedTensor(x), sw = SavedTensor(w), g](const Tensor& gy, auto& need) {
      Tensor x = sx.unpack(), w = sw.unpack();
      if (GradMode::is_enabled()) return conv2d_backward_composite(gy, x, w, g, need);
      Tensor gx = need[0] ? make_tensor(x.sizes(), x.dtype(), x.device()) : Tensor();
      Tensor gw = need[1] ? make_tensor(w.sizes(), w.dtype(), w.device()) : Tensor();
      Tensor gb = need[2] ? make_tensor({g.Cout}, w.dtype(), w.device()) : Tensor();
      kernel(x, "conv2d", &NnKernels::conv2d_backward)(launch::cast(gy, x.dtype()), launch::contiguous(x),
                                                       launch::contiguous(w), gx, gw, gb, g);
      return Grads{gx, gw, gb};
    });
  }
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace functional
}  // namespace mantissa::nn
