// The arithmetic of attention's rows on the GPU, written once as host-device code so the CPU
// tests run it: the scores' geometry (scale, additive mask, causal visibility, dropout,
// probabilities from the log-sum-exp) that cuda/attention.cu's row kernels read, and the
// per-row steps of cuda/attention_gemm.cu's GEMM path. A row is shared by a team of `width`
// lanes (a warp or a block on the GPU, one lane in the tests): lane l takes keys l, l + width, ..., and
// max_all / sum_all combine a value across the team.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/dtype_dispatch.h"  // MT_HOST_DEVICE
#include "core/philox.h"

namespace mantissa::attention_rows {

// The parts of AttentionGeometry the kernels read (A: the accumulation type).
template <typename A>
struct Scores {
  int64_t H, L, S, E, Ev;
  A scale;
  bool causal;
  float keep_prob;  // 1 - dropout_p
  A keep_scale;     // 1 / (1 - dropout_p)
  uint64_t seed;
  const A* mask;  // null: none
  int64_t ms0, ms1, ms2, ms3;

  // The score of query i and key j of problem p from their dot product: scaled, mask added.
  MT_HOST_DEVICE A masked(int64_t p, int64_t i, int64_t j, A dot) const {
    A s = dot * scale;
    if (mask) s += mask[(p / H) * ms0 + (p % H) * ms1 + i * ms2 + j * ms3];
    return s;
  }
  // Keys [0, visible(i)) are seen by query i.
  MT_HOST_DEVICE int64_t visible(int64_t i) const { return causal && i + 1 < S ? i + 1 : S; }
  // The dropout factor of P[p, i, j]: 0 or 1 / (1 - p).
  MT_HOST_DEVICE A drop(int64_t p, int64_t i, int64_t j) const {
    if (keep_prob >= 1.0f) return A(1);
    return math::DropoutKeep{seed, keep_prob}(uint64_t((p * L + i) * S + j)) ? keep_scale : A(0);
  }
  // exp(s - lse), 0 for a fully masked row (lse = -inf).
  MT_HOST_DEVICE A prob(A s, A lse) const {
    return lse == A(-INFINITY) || lse == A(INFINITY) ? A(0) : std::exp(s - lse);
  }
};

// Forward of query i of problem p from its dot products with the keys, dots[0, S): stores
// dropout(P)[j] through store(j, value) for every j < S (0 for keys it does not see) and
// returns the row's log-sum-exp (-inf when every key is masked, NaN when the visible scores are
// NaN and -inf).
template <typename Store, typename MaxAll, typename SumAll>
MT_HOST_DEVICE float forward_row(const Scores<float>& a, int64_t p, int64_t i, const float* dots, int lane, int width,
                                 Store store, MaxAll max_all, SumAll sum_all) {
  const int64_t nk = a.visible(i);
  float m = -INFINITY;
  for (int64_t j = lane; j < nk; j += width) {
    const float s = a.masked(p, i, j, dots[j]);
    m = s > m ? s : m;  // a NaN never replaces the running max; it reaches the sum below
  }
  m = max_all(m);
  // With m = -inf every score is -inf or NaN (a NaN query): l sums 0 for a fully masked row and
  // NaN otherwise, and the log-sum-exp is then NaN, as is every probability (PyTorch's softmax).
  float l = 0;
  for (int64_t j = lane; j < nk; j += width) {
    const float s = a.masked(p, i, j, dots[j]);
    if (s != -INFINITY) l += m == -INFINITY ? s : std::exp(s - m);
  }
  l = sum_all(l);
  const float lse = m == -INFINITY && l == 0 ? -INFINITY : m + std::log(l);
  for (int64_t j = lane; j < a.S; j += width)
    store(j, j < nk ? a.prob(a.masked(p, i, j, dots[j]), lse) * a.drop(p, i, j) : 0.0f);
  return lse;
}

// Backward of query i of problem p from its dot products with the keys, dots[0, S), the
// products gout[i] . v[j], grad_dots[0, S), and the forward's lse: stores, through
// store(j, pd, ds) for every j < S, dropout(P)[j] and dS[j] = P (dP - D) with
// dP = dropout(grad_dots) and D = sum_j P dP (0 for keys it does not see).
template <typename Store, typename SumAll>
MT_HOST_DEVICE void backward_row(const Scores<float>& a, int64_t p, int64_t i, float lse, const float* dots,
                                 const float* grad_dots, int lane, int width, Store store, SumAll sum_all) {
  const int64_t nk = a.visible(i);
  float d = 0;
  for (int64_t j = lane; j < nk; j += width)
    d += a.prob(a.masked(p, i, j, dots[j]), lse) * grad_dots[j] * a.drop(p, i, j);
  d = sum_all(d);
  for (int64_t j = lane; j < a.S; j += width) {
    float pd = 0, ds = 0;
    if (j < nk) {
      const float pij = a.prob(a.masked(p, i, j, dots[j]), lse), keep = a.drop(p, i, j);
      pd = pij * keep;
      ds = pij * (grad_dots[j] * keep - d);
    }
    store(j, pd, ds);
  }
}

}  // namespace mantissa::attention_rows
