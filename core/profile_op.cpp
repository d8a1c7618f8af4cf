// FLOPs and GEMM dims of the GEMM-shaped kernels, from their arguments (core/profile_op.h).
#include "core/profile_op.h"

#include <cstring>

namespace mantissa::profiler::detail {

namespace {

bool is(const char* a, const char* b) { return std::strcmp(a, b) == 0; }
bool defined_at(const OpInfo& info, size_t i) { return i < info.tensors.size() && info.tensors[i].defined; }

// a [B, M, K] @ b [B, K, N] -> out [B, M, N] (Backend::matmul's contract).
void matmul_flops(OpInfo& info) {
  if (!defined_at(info, 0) || !defined_at(info, 1)) return;
  const Shape& a = info.tensors[0].shape;
  const Shape& b = info.tensors[1].shape;
  if (a.size() < 2 || b.size() < 2) return;
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < a.size(); ++i) batch *= a[i];
  info.gemm_m = a[a.size() - 2];
  info.gemm_k = a.back();
  info.gemm_n = b.back();
  info.flops = 2.0 * double(batch) * double(info.gemm_m) * double(info.gemm_n) * double(info.gemm_k);
}

// As an implicit GEMM: [N*OH*OW, C/groups*KH*KW] @ [C/groups*KH*KW, Cout] per group.
void conv_flops(OpInfo& info, int passes) {
  const Conv2dGeometry& g = *info.conv;
  info.gemm_m = g.N * g.OH * g.OW;
  info.gemm_n = g.Cout;
  info.gemm_k = (g.groups > 0 ? g.C / g.groups : g.C) * g.KH * g.KW;
  info.flops = 2.0 * passes * double(info.gemm_m) * double(info.gemm_n) * double(info.gemm_k);
}

// Per (batch, head): scores q k^T [L, S] over E, then P v over S to [L, Ev]. Backward
// recomputes the scores and forms dV, dP, dQ, dK: 2 L S (3 E + 2 Ev).
void attention_flops(OpInfo& info, bool backward) {
  const AttentionGeometry& g = *info.attention;
  const double pairs = double(g.B) * double(g.H) * double(g.L) * double(g.S);
  info.gemm_m = g.L;
  info.gemm_n = g.S;
  info.gemm_k = g.E;
  info.flops = 2.0 * pairs * (backward ? 3.0 * double(g.E) + 2.0 * double(g.Ev) : double(g.E + g.Ev));
}

}  // namespace

void finish(const char* name, OpInfo& info) {
  bool found_device = false, found_float = false;
  for (const TensorInfo& t : info.tensors) {
    if (!t.defined) continue;
    if (!found_device) info.device = t.device, found_device = true;
    if (!found_float && is_floating(t.dtype)) info.compute = t.dtype, found_float = true;
  }
  if (!found_float)
    for (const TensorInfo& t : info.tensors)
      if (t.defined) {
        info.compute = t.dtype;
        break;
      }
  if (is(name, "matmul")) {
    matmul_flops(info);
  } else if (info.conv && is(name, "conv2d_forward")) {
    conv_flops(info, 1);
  } else if (info.conv && is(name, "conv2d_backward")) {
    conv_flops(info, int(defined_at(info, 3)) + int(defined_at(info, 4)));  // gx and gw wanted
  } else if (info.attention && (is(name, "attention_forward") || is(name, "attention_backward"))) {
    attention_flops(info, is(name, "attention_backward"));
  }
}

}  // namespace mantissa::profiler::detail
