// conv1d and the 1-D pools through their 2-D kernels (the length as a width, height 1), and
// the transposed convolutions as PyTorch computes them: the input through the weight's
// transpose into columns, summed back into the output by fold (col2im), so every device runs
// them and their gradients are those of matmul and fold.
#include "nn/functional_detail.h"

MT_DECLARE_CAST_POLICY(conv_transpose2d, LowerPrecision);

namespace mantissa::nn {

using namespace detail;

namespace {

// [N, C, L] (or [C, L]) as [N, C, 1, L]; `back` undoes it.
Tensor as_2d(const Tensor& x, const char* op) {
  MT_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3), op, "expected an input [N, C, L] or [C, L], got ",
           x.defined() ? x.shape_str() : "undefined");
  return x.unsqueeze(-2);
}
Tensor back(const Tensor& y) { return y.squeeze(-2); }

}  // namespace

namespace functional {

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv1dFuncOptions& o) {
  MT_CHECK(weight.defined() && weight.dim() == 3, "conv1d", "expected a weight [Cout, C / groups, K], got ",
           weight.defined() ? weight.shape_str() : "undefined");
  return back(
      conv2d(as_2d(x, "conv1d"), weight.unsqueeze(2), bias,
             {.stride = {1, o.stride}, .padding = {0, o.padding}, .dilation = {1, o.dilation}, .groups = o.groups}));
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight0, const Tensor& bias0,
                        const ConvTranspose2dFuncOptions& o) {
  const char* op = "conv_transpose2d";
  MT_CHECK(input.defined() && weight0.defined(), op, "got an undefined tensor");
  auto in = amp::autocast_many(autocast_conv_transpose2d, {input, weight0, bias0});
  const bool batched = in[0].dim() == 4;
  const Tensor x = batched ? in[0] : in[0].unsqueeze(0), &w = in[1], &b = in[2];
  MT_CHECK(x.dim() == 4, op, "expected an input [N, C, H, W] or [C, H, W], got ", describe({in[0]}));
  MT_CHECK(w.dim() == 4, op, "expected a weight [C, Cout / groups, KH, KW], got ", describe({w}));
  const int64_t g = o.groups, n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  MT_CHECK(g >= 1 && c % g == 0 && w.size(0) == c, op, "weight ", w.shape_str(), " must have the input's ", c,
           " channels in dim 0, divisible by groups ", g);
  MT_CHECK(is_floating(x.dtype()) && x.dtype() == w.dtype(), op,
           "expected floating input and weight of one dtype, got ", describe({x, w}));
  const Size2 s = o.stride, p = o.padding, op_ = o.output_padding, d = o.dilation;
  MT_CHECK(s.h > 0 && s.w > 0 && d.h > 0 && d.w > 0 && p.h >= 0 && p.w >= 0, op,
           "stride and dilation must be positive and padding non-negative");
  MT_CHECK(op_.h >= 0 && op_.w >= 0 && (op_.h < s.h || op_.h < d.h) && (op_.w < s.w || op_.w < d.w), op,
           "output_padding ", op_, " must be smaller than the stride ", s, " or the dilation ", d);
  const int64_t cout_g = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t oh = (h - 1) * s.h - 2 * p.h + d.h * (kh - 1) + op_.h + 1;
  const int64_t ow = (wd - 1) * s.w - 2 * p.w + d.w * (kw - 1) + op_.w + 1;
  MT_CHECK(oh > 0 && ow > 0, op, "the output would be empty (", oh, " x ", ow, ") for input ", x.shape_str());
  if (b.defined())
    MT_CHECK(b.dim() == 1 && b.size(0) == cout_g * g, op, "bias must have shape [", cout_g * g, "], got ",
             b.shape_str());
  // cols [N, g, Cout/g * KH * KW, H * W] = w_g^T [Cout/g * KH * KW, C/g] @ x_g [C/g, H * W]
  Tensor xg = x.reshape({n, g, c / g, h * wd});
  Tensor wg = w.reshape({g, c / g, cout_g * kh * kw}).transpose(1, 2);
  Tensor cols = matmul(wg.unsqueeze(0), xg).reshape({n, g * cout_g * kh * kw, h * wd});
  Tensor y = fold(cols, {oh, ow}, {kh, kw}, {.dilation = d, .padding = p, .stride = s});
  if (b.defined()) y = y + b.reshape({1, -1, 1, 1});
  return batched ? y : y.squeeze(0);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose1dFuncOptions& o) {
  MT_CHECK(weight.defined() && weight.dim() == 3, "conv_transpose1d", "expected a weight [C, Cout / groups, K], got ",
           weight.defined() ? weight.shape_str() : "undefined");
  return back(conv_transpose2d(as_2d(x, "conv_transpose1d"), weight.unsqueeze(2), bias,
                               {.stride = {1, o.stride},
                                .padding = {0, o.padding},
                                .output_padding = {0, o.output_padding},
                                .dilation = {1, o.dilation},
                                .groups = o.groups}));
}

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, const MaxPool1dFuncOptions& o) {
  return back(max_pool2d(as_2d(x, "max_pool1d"), {1, kernel_size},
                         {.stride = {1, o.stride ? o.stride : kernel_size},
                          .padding = {0, o.padding},
                          .dilation = {1, o.dilation},
                          .ceil_mode = o.ceil_mode}));
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, const AvgPool1dFuncOptions& o) {
  return back(avg_pool2d(as_2d(x, "avg_pool1d"), {1, kernel_size},
                         {.stride = {1, o.stride ? o.stride : kernel_size},
                          .padding = {0, o.padding},
                          .ceil_mode = o.ceil_mode,
                          .count_include_pad = o.count_include_pad}));
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  return back(adaptive_avg_pool2d(as_2d(x, "adaptive_avg_pool1d"), {1, output_size}));
}

}  // namespace functional
}  // namespace mantissa::nn
