// What cuda/attention.cu's row kernels and cuda/attention_gemm.cu's GEMM path share: the
// geometry in device form (core/attention_rows.h: scores, mask, dropout, probabilities) and
// the GEMM path's entry points (chosen by core/attention_plan.h).
#pragma once
#include "core/attention_rows.h"
#include "core/nn_kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

// The parts of AttentionGeometry a kernel reads (core/attention_rows.h).
template <typename A>
using Attn = attention_rows::Scores<A>;

// The masked, scaled score of query i and key j of problem p (q row qr and k row kr given).
template <typename A, typename T>
__device__ A score(const Attn<A>& a, int64_t p, int64_t i, int64_t j, const A* qr, const T* kr) {
  A s = 0;
  for (int64_t e = 0; e < a.E; ++e) s += qr[e] * cast_to<A>(kr[e]);
  return a.masked(p, i, j, s);
}

template <typename T>
Attn<acc_t<T>> device_geometry(const AttentionGeometry& g, const Tensor& mask) {
  using A = acc_t<T>;
  return Attn<A>{g.H,
                 g.L,
                 g.S,
                 g.E,
                 g.Ev,
                 A(g.scale),
                 g.causal,
                 float(1.0 - g.dropout_p),
                 A(1.0 / (1.0 - g.dropout_p)),
                 g.dropout_seed,
                 mask.defined() ? dptr<const A>(mask) : nullptr,
                 g.mask_strides[0],
                 g.mask_strides[1],
                 g.mask_strides[2],
                 g.mask_strides[3]};
}

// Attention through batched GEMMs and score buffers, `chunk` problems per round (contracts
// of attention_forward / attention_backward in core/nn_kernels.h; fp32, fp16 and bf16).
void attention_forward_gemm(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                            const Tensor& lse, const AttentionGeometry& g, int64_t chunk);
void attention_backward_gemm(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                             const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                             const AttentionGeometry& g, int64_t chunk);
// Problems per GEMM round for this call, 0 for the row kernels (the budget of
// set_attention_score_memory).
int64_t attention_gemm_chunk(const AttentionGeometry& g, DType dtype);

}  // namespace mantissa::cuda
