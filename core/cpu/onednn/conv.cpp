// 2-D convolution through oneDNN's convolution primitives: forward (bias in the epilogue),
// backward data and backward weights (+ bias), each created once per geometry and dtype.
//
//   forward   y  [N, Cout, OH, OW] = conv(x [N, C, H, W], w [Cout, C/G, KH, KW]) + bias [Cout]
//   backward  gx [N, C, H, W], gw [Cout, C/G, KH, KW], gb [Cout] from gy [N, Cout, OH, OW]
//
// The primitives pick their own (blocked) layouts for activations and weights; operands are
// reordered from and to Mantissa's NCHW around each call (Operand / Call in context.h).
#include "core/cpu/onednn/context.h"

namespace mantissa::cpu::onednn {

namespace {

using dnnl::algorithm;
using dnnl::prop_kind;
using tag = memory::format_tag;

struct ConvDescs {
  memory::desc x, w, b, y;  // plain user layouts
  memory::desc x_any, w_any, y_any;
  Dims strides, dilates, pad_l, pad_r;
};

ConvDescs conv_descs(const Conv2dGeometry& g, memory::data_type dt, bool bias) {
  ConvDescs d;
  d.x = memory::desc({g.N, g.C, g.H, g.W}, dt, tag::nchw);
  d.y = memory::desc({g.N, g.Cout, g.OH, g.OW}, dt, tag::nchw);
  const Dims wdims =
      g.groups == 1 ? Dims{g.Cout, g.C, g.KH, g.KW} : Dims{g.groups, g.Cout / g.groups, g.C / g.groups, g.KH, g.KW};
  d.w = memory::desc(wdims, dt, g.groups == 1 ? tag::oihw : tag::goihw);
  if (bias) d.b = memory::desc({g.Cout}, dt, tag::a);
  d.x_any = memory::desc(d.x.dims(), dt, tag::any);
  d.y_any = memory::desc(d.y.dims(), dt, tag::any);
  d.w_any = memory::desc(wdims, dt, tag::any);
  d.strides = {g.SH, g.SW};
  d.dilates = {g.DH - 1, g.DW - 1};  // oneDNN counts the gaps
  d.pad_l = {g.PH, g.PW};
  // The right/bottom padding that makes the output exactly OH x OW.
  d.pad_r = {(g.OH - 1) * g.SH + (g.KH - 1) * g.DH + 1 - g.H - g.PH,
             (g.OW - 1) * g.SW + (g.KW - 1) * g.DW + 1 - g.W - g.PW};
  return d;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::convolution_forward::primitive_desc forward_pd(const ConvDescs& d, bool bias) {
  auto desc = bias
                  ? dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, d.x_any,
                                                    d.w_any, d.b, d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r)
                  : dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, d.x_any,
                                                    d.w_any, d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad(), engine());
}

std::vector<int64_t> geometry_key(int kind, DType t, const Conv2dGeometry& g, int64_t flags) {
  return {kind, int64_t(t), flags, g.N,  g.C,  g.H,  g.W,  g.Cout, g.groups, g.KH,
          g.KW, g.SH,       g.SW,  g.PH, g.PW, g.DH, g.DW, g.OH,   g.OW};
}

struct ForwardEntry {
  dnnl::convolution_forward prim;
  Operand x, w, y;
  memory::desc b, scratch;
};

struct BackwardEntry {
  std::optional<dnnl::convolution_backward_data> data;
  Operand gy_data, w, gx;
  memory::desc data_scratch;
  std::optional<dnnl::convolution_backward_weights> weights;
  Operand gy_weights, x, gw;
  memory::desc gb, weights_scratch;
};

}  // namespace

bool conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g) {
  const DType t = x.dtype();
  if (!use_onednn(OpKind::Conv, t) || x.numel() == 0 || y.numel() == 0) return false;
  const auto dt = data_type(t);
  if (!dt) return false;
  thread_local Cache<ForwardEntry> cache;
  const ForwardEntry* e = cache.get(geometry_key(0, t, g, bias.defined()), [&] {
    const ConvDescs d = conv_descs(g, *dt, bias.defined());
    auto pd = forward_pd(d, bias.defined());
    return ForwardEntry{dnnl::convolution_forward(pd),
                        Operand(d.x, pd.src_desc(), true),
                        Operand(d.w, pd.weights_desc(), true),
                        Operand(d.y, pd.dst_desc(), false),
                        d.b,
                        pd.scratchpad_desc()};
  });
  if (e == nullptr) return false;
  Call call;
  memory ym = call.output(e->y, y.raw_data());
  auto& args = call.args();
  args.emplace(DNNL_ARG_SRC, call.input(e->x, x.raw_data()));
  args.emplace(DNNL_ARG_WEIGHTS, call.input(e->w, w.raw_data()));
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, memory(e->b, engine(), bias.raw_data()));
  args.emplace(DNNL_ARG_DST, ym);
  call.execute(e->prim, e->scratch);
  call.finish(e->y, ym, y.raw_data());
  return true;
}

bool conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dGeometry& g) {
  const DType t = x.dtype();
  if (!use_onednn(OpKind::Conv, t) || x.numel() == 0 || gy.numel() == 0) return false;
  const auto dt = data_type(t);
  if (!dt) return false;
  const bool want_x = gx.defined(), want_w = gw.defined() || gb.defined(), want_b = gb.defined();
  thread_local Cache<BackwardEntry> cache;
  const int64_t flags = int64_t(want_x) | int64_t(want_w) << 1 | int64_t(want_b) << 2;
  const BackwardEntry* e = cache.get(geometry_key(1, t, g, flags), [&] {
    const ConvDescs d = conv_descs(g, *dt, want_b);
    auto fwd = forward_pd(d, want_b);
    BackwardEntry b;
    if (want_x) {
      dnnl::convolution_backward_data::desc desc(algorithm::convolution_direct, d.x_any, d.w_any, d.y_any, d.strides,
                                                 d.dilates, d.pad_l, d.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad(), engine(), fwd);
      b.data.emplace(pd);
      b.gy_data = Operand(d.y, pd.diff_dst_desc(), true);
      b.w = Operand(d.w, pd.weights_desc(), true);
      b.gx = Operand(d.x, pd.diff_src_desc(), false);
      b.data_scratch = pd.scratchpad_desc();
    }
    if (want_w) {
      auto desc = want_b
                      ? dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, d.x_any, d.w_any, d.b,
                                                                 d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r)
                      : dnnl::convolution_backward_weights::desc(algorithm::convolution_direct, d.x_any, d.w_any,
                                                                 d.y_any, d.strides, d.dilates, d.pad_l, d.pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), engine(), fwd);
      b.weights.emplace(pd);
      b.gy_weights = Operand(d.y, pd.diff_dst_desc(), true);
      b.x = Operand(d.x, pd.src_desc(), true);
      b.gw = Operand(d.w, pd.diff_weights_desc(), false);
      b.gb = d.b;
      b.weights_scratch = pd.scratchpad_desc();
    }
    return b;
  });
  if (e == nullptr) return false;
  Call call;
  // gy is reordered once when both primitives want the same layout.
  std::optional<memory> gy_data;
  if (e->data) {
    gy_data = call.input(e->gy_data, gy.raw_data());
    memory gxm = call.output(e->gx, gx.raw_data());
    auto& args = call.args();
    args.emplace(DNNL_ARG_DIFF_DST, *gy_data);
    args.emplace(DNNL_ARG_WEIGHTS, call.input(e->w, w.raw_data()));
    args.emplace(DNNL_ARG_DIFF_SRC, gxm);
    call.execute(*e->data, e->data_scratch);
    call.finish(e->gx, gxm, gx.raw_data());
  }
  if (e->weights) {
    // Without a wanted gw (only gb), the weight gradient goes to a throwaway buffer.
    void* gw_data = gw.defined() ? gw.raw_data() : call.scratch(e->gw.user.get_size());
    memory gwm = call.output(e->gw, gw_data);
    auto& args = call.args();
    args.emplace(DNNL_ARG_DIFF_DST, gy_data && e->gy_data.prim == e->gy_weights.prim
                                        ? *gy_data
                                        : call.input(e->gy_weights, gy.raw_data()));
    args.emplace(DNNL_ARG_SRC, call.input(e->x, x.raw_data()));
    args.emplace(DNNL_ARG_DIFF_WEIGHTS, gwm);
    if (want_b) args.emplace(DNNL_ARG_DIFF_BIAS, memory(e->gb, engine(), gb.raw_data()));
    call.execute(*e->weights, e->weights_scratch);
    call.finish(e->gw, gwm, gw_data);
  }
  return true;
}

bool has_direct_weight_grad(DType t, const Conv2dGeometry& g) {
  if (!use_onednn(OpKind::Conv, t)) return false;
  const auto dt = data_type(t);
  if (!dt) return false;
  struct Verdict {
    bool direct;
  };
  thread_local Cache<Verdict> cache;
  const Verdict* v = cache.get(geometry_key(2, t, g, 0), [&] {
    const ConvDescs d = conv_descs(g, *dt, false);
    dnnl::convolution_backward_weights::desc desc(algorithm::convolution_direct, d.x_any, d.w_any, d.y_any, d.strides,
                                                  d.dilates, d.pad_l, d.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad(), engine(), forward_pd(d, false));
    const std::string impl = pd.impl_info_str();  // "jit_dw:avx512_core", "x64:gemm:jit", "ref:any", ...
    return Verdict{impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos};
  });
  return v != nullptr && v->direct;
}

}  // namespace mantissa::cpu::onednn
