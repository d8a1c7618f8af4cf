// What cuda/attention.cu's row kernels and cuda/attention_gemm.cu's GEMM path share: the
// geometry in device form (scores, mask, dropout, probabilities) and the GEMM path's entry
// points (chosen by core/attention_plan.h).
#pragma once
#include "core/nn_kernels.h"
#include "core/philox.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

// The parts of AttentionGeometry a device function reads, in device-friendly form.
template <typename A>
struct Attn {
  int64_t H, L, S, E, Ev;
  A scale;
  bool causal;
  float keep_prob;  // 1 - dropout_p
  A keep_scale;     // 1 / (1 - dropout_p)
  uint64_t seed;
  const A* mask;  // null: none
  int64_t ms0, ms1, ms2, ms3;

  // The masked, scaled score of query i and key j of problem p (q row qr and k row kr given).
  template <typename T>
  __device__ A score(int64_t p, int64_t i, int64_t j, const A* qr, const T* kr) const {
    A s = 0;
    for (int64_t e = 0; e < E; ++e) s += qr[e] * cast_to<A>(kr[e]);
    return masked(p, i, j, s);
  }
  // The score of query i and key j of problem p from their dot product: scaled, mask added.
  __device__ A masked(int64_t p, int64_t i, int64_t j, A dot) const {
    A s = dot * scale;
    if (mask) s += mask[(p / H) * ms0 + (p % H) * ms1 + i * ms2 + j * ms3];
    return s;
  }
  // Keys [0, visible(i)) are seen by query i.
  __device__ int64_t visible(int64_t i) const { return causal ? min(S, i + 1) : S; }
  // The dropout factor of P[p, i, j]: 0 or 1 / (1 - p).
  __device__ A drop(int64_t p, int64_t i, int64_t j) const {
    if (keep_prob >= 1.0f) return A(1);
    return math::DropoutKeep{seed, keep_prob}(uint64_t((p * L + i) * S + j)) ? keep_scale : A(0);
  }
  // exp(s - lse), 0 for a fully masked row.
  __device__ A prob(A s, A lse) const { return isinf(lse) ? A(0) : exp(s - lse); }
};

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
