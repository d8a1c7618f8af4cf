// How the CUDA attention kernels (cuda/attention.cu) run one call, in plain C++ so the CPU
// tests can check it without a GPU.
//
// Attention over G = B x H problems of L queries and S keys runs as batched tensor-core GEMMs
// through score-sized buffers in memory ([chunk, L, S]: scores and dP in fp32, P and dS in the
// input's dtype) when one problem's buffers fit the byte budget, `chunk` problems per round so
// that every round's buffers fit it too; otherwise (very long rows, a budget of 0, fp64, an
// empty dimension) through the memory-lean row kernels, which keep O(L + S) per problem but
// reach a few percent of the GEMM rate.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "core/gemm_args.h"

namespace mantissa::attention_plan {

// A budget that holds GPT-sized calls in one round: 256 MiB, about 16 M score elements in
// flight. The default is 0 (the row kernels) unless MANTISSA_ATTENTION_SCORE_MEMORY or
// cuda::set_attention_score_memory says otherwise (docs/cuda.md, "Not yet").
constexpr int64_t kRecommendedScoreMemory = int64_t(256) << 20;

// Bytes of score-sized buffers per problem in backward, the larger pass: fp32 scores and
// dP, then P and dS in the element type (elem bytes).
inline int64_t score_bytes_per_problem(int64_t L, int64_t S, int64_t elem) { return L * S * (2 * 4 + 2 * elem); }

// Problems per round of GEMMs, 0 for the row kernels. elem: the element size of q, k, v
// (2 or 4; fp64's 8 keeps the row kernels).
inline int64_t gemm_chunk(int64_t G, int64_t L, int64_t S, int64_t E, int64_t Ev, int64_t elem, int64_t budget) {
  if (G <= 0 || L <= 0 || S <= 0 || E <= 0 || Ev <= 0 || (elem != 2 && elem != 4) || budget <= 0) return 0;
  // cuBLAS takes int dimensions and leading dimensions.
  constexpr int64_t kIntMax = 2147483647;
  if (std::max({L, S, E, Ev}) > kIntMax) return 0;
  const int64_t per_element = 2 * 4 + 2 * elem;
  if (L > budget / per_element / S) return 0;  // one problem does not fit (no overflow in L * S)
  return std::min({G, budget / score_bytes_per_problem(L, S, elem), kIntMax});
}

// The GEMM path's buffers: the call's tensors ([G, rows, cols], contiguous) and the round's
// score-sized ones ([chunk, L, S]: Scores and GradP fp32, P and GradS in the input's dtype).
enum class Buffer { Q, K, V, Gout, Out, GradQ, GradK, GradV, Scores, GradP, P, GradS };

struct Gemm {
  RowMajorGemm gemm;
  Buffer a, b, c;
};

namespace detail {
// Matrices g0.. of a [G, R, C] buffer (a round buffer: g0 = 0), as stored or transposed.
inline RowMajorOperand matrices(int64_t g0, int64_t R, int64_t C, bool transposed) {
  return {g0 * R * C, transposed, C, R * C};
}
inline Gemm gemm(int64_t n, int64_t M, int64_t N, int64_t K, float alpha, Buffer a, RowMajorOperand ao, Buffer b,
                 RowMajorOperand bo, Buffer c, int64_t c_g0) {
  return {{n, M, N, K, alpha, ao, bo, c_g0 * M * N, N, M * N}, a, b, c};
}
}  // namespace detail

// Round [g0, g0 + n) of the forward: [0] Scores = q k^T, then the row kernel (P, lse), then
// [1] out = P v.
inline std::array<Gemm, 2> forward_gemms(int64_t L, int64_t S, int64_t E, int64_t Ev, int64_t g0, int64_t n) {
  using detail::gemm, detail::matrices;
  return {
      gemm(n, L, S, E, 1, Buffer::Q, matrices(g0, L, E, false), Buffer::K, matrices(g0, S, E, true), Buffer::Scores, 0),
      gemm(n, L, Ev, S, 1, Buffer::P, matrices(0, L, S, false), Buffer::V, matrices(g0, S, Ev, false), Buffer::Out,
           g0)};
}

// Round [g0, g0 + n) of the backward: [0] Scores = q k^T and [1] GradP = gout v^T, then the
// row kernel (P with dropout into P, dS into GradS), then [2] gv = P^T gout,
// [3] gq = scale dS k, [4] gk = scale dS^T q.
inline std::array<Gemm, 5> backward_gemms(int64_t L, int64_t S, int64_t E, int64_t Ev, float scale, int64_t g0,
                                          int64_t n) {
  using detail::gemm, detail::matrices;
  return {
      gemm(n, L, S, E, 1, Buffer::Q, matrices(g0, L, E, false), Buffer::K, matrices(g0, S, E, true), Buffer::Scores, 0),
      gemm(n, L, S, Ev, 1, Buffer::Gout, matrices(g0, L, Ev, false), Buffer::V, matrices(g0, S, Ev, true),
           Buffer::GradP, 0),
      gemm(n, S, Ev, L, 1, Buffer::P, matrices(0, L, S, true), Buffer::Gout, matrices(g0, L, Ev, false), Buffer::GradV,
           g0),
      gemm(n, L, E, S, scale, Buffer::GradS, matrices(0, L, S, false), Buffer::K, matrices(g0, S, E, false),
           Buffer::GradQ, g0),
      gemm(n, S, E, L, scale, Buffer::GradS, matrices(0, L, S, true), Buffer::Q, matrices(g0, L, E, false),
           Buffer::GradK, g0)};
}

}  // namespace mantissa::attention_plan
