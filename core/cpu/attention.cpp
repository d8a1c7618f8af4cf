// Scaled dot-product attention and tril/triu on the CPU (contracts in core/nn_kernels.h).
//
// Attention is computed one (problem, query tile) at a time: a tile of kTileRows queries
// against every visible key, so the scratch per thread is kTileRows x S scores, never the
// whole L x S matrix. A tile's products accumulate in fp32 (fp64 for fp64), as tensor cores
// do. Backward recomputes each tile's probabilities from the stored log-sum-exp (as flash
// attention does) and accumulates dK and dV of a problem in fp32. Where the build targets
// AVX512-BF16 the products run on tile_gemm.h: bf16 by bf16 dot products (forward_bf16,
// backward_bf16: P and dS enter their products rounded to bf16, as the forward's P always did
// and as tensor cores take them), fp32 and fp16 (widened once per problem) by FMA blocks
// (`product`); elsewhere, and for fp64, by Eigen.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // Eigen's AVX-512 GEMM, as in matmul.cpp
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/cpu/tile_gemm.h"
#include "core/cpu/vec_math.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"
#include "core/philox.h"

namespace mantissa::cpu {

namespace {

constexpr int64_t kTileRows = 64;
constexpr int64_t kExpChunk = 1024;  // a score row's exps summed from a 4 KiB stack buffer

template <typename A>
using RowMat = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// n elements of buf from a 64-byte boundary on: the tile GEMMs' B buffers (tile::packed_ld).
template <typename T>
T* aligned(std::vector<T>& buf, int64_t n) {
  buf.resize(size_t(n) + 64 / sizeof(T));
  const auto at = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + (64 - at % 64) % 64 / sizeof(T);
}

// rows x cols of T at p (contiguous) in A: p itself when T == A, else a widened copy.
template <typename A, typename T>
const A* widened(const T* p, int64_t rows, int64_t cols, std::vector<A>& buf) {
  if constexpr (std::is_same_v<A, T>) {
    return p;
  } else {
    buf.resize(size_t(rows * cols));
    for (int64_t i = 0; i < rows * cols; ++i) buf[size_t(i)] = load_acc<A>(p, i);
    return buf.data();
  }
}

// c [M, N] (leading dimension ldc) = alpha A B (+ c when accumulate), A(i, k) = a[i * ars + k *
// aks], B(k, j) = b[k * ldb + j]: the fp32 tile GEMM (tile_gemm.h) where the build has it (an
// Eigen product per tile paid its packing and dispatch on every call: fp32 attention ran at
// about half the GEMM rate), Eigen otherwise and for fp64.
template <typename A>
void product(const A* a, int64_t ars, int64_t aks, const A* b, int64_t ldb, int64_t M, int64_t N, int64_t K, A alpha,
             bool accumulate, A* c, int64_t ldc) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<A, float>) {
    tile::gemm(tile::StridedA{a, ars, aks}, tile::RowsB{b, ldb}, M, N, K, alpha, accumulate, c, ldc);
    return;
  }
#endif
  using Strides = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  const Eigen::Map<const RowMat<A>, 0, Strides> Am(a, M, K, Strides(ars, aks));
  const Eigen::Map<const RowMat<A>, 0, Eigen::OuterStride<>> Bm(b, K, N, Eigen::OuterStride<>(ldb));
  Eigen::Map<RowMat<A>, 0, Eigen::OuterStride<>> Cm(c, M, N, Eigen::OuterStride<>(ldc));
  if (!accumulate) Cm.setZero();
  if (K > 0) Cm.noalias() += alpha * (Am * Bm);
}

// X^T [cols, rows] of X [rows, cols] in A, into buf, leading dimension transposed_ld(rows): the
// B of a product by X's transpose.
template <typename A>
int64_t transposed_ld(int64_t rows) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<A, float>) return tile::packed_ld(rows);
#endif
  return rows;
}
template <typename A>
const A* transposed(const A* x, int64_t rows, int64_t cols, std::vector<A>& buf) {
  const int64_t ld = transposed_ld<A>(rows);
  A* t = aligned(buf, cols * ld);
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<A, float>) {
    tile::transpose(x, cols, rows, cols, t, ld);
    return t;
  }
#endif
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t k = 0; k < cols; ++k) t[k * ld + j] = x[j * cols + k];
  return t;
}

// The one problem (batch b, head h) and the parts of the geometry a tile needs.
template <typename A>
struct Problem {
  const AttentionGeometry& g;
  const A* mask;  // null: none
  int64_t index;  // b * H + h

  // The visible keys of queries [i0, i1): causal rows never see past i1 - 1.
  int64_t keys_for(int64_t i1) const { return g.causal ? std::min(g.S, i1) : g.S; }

  // scores (rows x nk, already scale * q.k) -> probabilities P in place, with the stored
  // log-sum-exp `known_lse` (backward) or, when it is null, computing it into new_lse.
  void softmax_rows(A* scores, int64_t i0, int64_t rows, int64_t nk, const A* known_lse, A* new_lse) const {
    const int64_t b = index / g.H, h = index % g.H;
    constexpr A kNegInf = -std::numeric_limits<A>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      A* s = scores + r * nk;
      if (mask) {
        const A* m = mask + b * g.mask_strides[0] + h * g.mask_strides[1] + i * g.mask_strides[2];
        for (int64_t j = 0; j < nk; ++j) s[j] += m[j * g.mask_strides[3]];
      }
      if (g.causal)
        for (int64_t j = i + 1; j < nk; ++j) s[j] = kNegInf;
      A row_lse;
      if (known_lse) {
        row_lse = known_lse[r];
      } else {
        A mx = kNegInf;
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < nk; ++j) mx = s[j] > mx ? s[j] : mx;  // not std::max (stays scalar)
        A sum = 0;
        if (mx != kNegInf) {
          if constexpr (std::is_same_v<A, float>) {
            alignas(64) float e[kExpChunk];
            for (int64_t j0 = 0; j0 < nk; j0 += kExpChunk) {
              const int64_t m = std::min(kExpChunk, nk - j0);
              sum += exp_floats<true, Fp32Result, true, true>(s + j0, e, m, mx);  // s - max <= 0
            }
          } else {
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < nk; ++j) sum += math::exp_shifted_acc(s[j] - mx);
          }
        }
        row_lse = mx == kNegInf ? kNegInf : mx + std::log(sum);
        // The max skips NaN, so a row of only NaN and -inf (a NaN query) looks fully masked:
        // its log-sum-exp is NaN instead, and so is every probability (as PyTorch's softmax).
        if (mx == kNegInf)
          for (int64_t j = 0; j < nk; ++j)
            if (std::isnan(s[j])) row_lse = std::numeric_limits<A>::quiet_NaN();
        new_lse[r] = row_lse;
      }
      if (row_lse == kNegInf) {  // every key masked: no attention at all
        for (int64_t j = 0; j < nk; ++j) s[j] = 0;
        continue;
      }
      // P = exp(s - lse), not the sum pass's exps over their sum: the backward recomputes P
      // from the saved lse, and this way both passes give the same bits.
      if constexpr (std::is_same_v<A, float>) {
        exp_floats<false, Fp32Result, true, true>(s, s, nk, row_lse);  // s - lse <= 0
      } else {
#pragma omp simd
        for (int64_t j = 0; j < nk; ++j) s[j] = math::exp_shifted_acc(s[j] - row_lse);
      }
      // A NaN row's probabilities are NaN for the keys it sees; the keys past a causal query
      // stay unseen (0), as on the GPU, whatever tile they share with it.
      if (g.causal && std::isnan(row_lse))
        for (int64_t j = i + 1; j < nk; ++j) s[j] = 0;
    }
  }

  // P (rows x nk) -> dropout(P) in place: kept entries scaled by 1 / (1 - p), the rest 0.
  void drop(A* p, int64_t i0, int64_t rows, int64_t nk) const {
    if (g.dropout_p <= 0) return;
    const math::DropoutKeep keep{g.dropout_seed, float(1.0 - g.dropout_p)};
    const A scale = A(1.0 / (1.0 - g.dropout_p));
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t base = uint64_t((index * g.L + i0 + r) * g.S);
      for (int64_t j = 0; j < nk; ++j) p[r * nk + j] = keep(base + uint64_t(j)) ? p[r * nk + j] * scale : A(0);
    }
  }
};

// dS = P * (dP - rowsum(P * dP)) for a tile's rows [rows, nk]: the softmax backward, in place in dP.
template <typename A>
void softmax_backward_rows(const A* p, A* dp, int64_t rows, int64_t nk) {
  for (int64_t r = 0; r < rows; ++r) {
    const A* pr = p + r * nk;
    A* dpr = dp + r * nk;
    A d = 0;
#pragma omp simd reduction(+ : d)
    for (int64_t j = 0; j < nk; ++j) d += pr[j] * dpr[j];
#pragma omp simd
    for (int64_t j = 0; j < nk; ++j) dpr[j] = pr[j] * (dpr[j] - d);
  }
}

template <typename A>
const A* mask_data(const Tensor& mask) {
  return mask.defined() ? static_cast<const A*>(mask.raw_data()) : nullptr;
}

template <typename T>
void forward_typed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                   const Tensor& lse, const AttentionGeometry& g) {
  using A = acc_t<T>;
  const int64_t G = g.B * g.H, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  const int64_t tiles = (L + kTileRows - 1) / kTileRows;
  const T* Q = q.data_ptr<T>();
  const T* K = k.data_ptr<T>();
  const T* V = v.data_ptr<T>();
  T* O = out.data_ptr<T>();
  A* LSE = lse.data_ptr<A>();
  const A* M = mask_data<A>(mask);
  // One task per (problem, tile); consecutive tasks share a problem, so a thread widens
  // each problem's k and v (and transposes k) once when it runs several of its tiles.
#pragma omp parallel
  {
    std::vector<A> kbuf, ktbuf, vbuf, qbuf, scores, obuf;
    int64_t widened_problem = -1;
    const A *kt = nullptr, *vp = nullptr;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < G * tiles; ++task) {
      const int64_t p = task / tiles, i0 = (task % tiles) * kTileRows, rows = std::min(kTileRows, L - i0);
      if (p != widened_problem) {
        kt = transposed(widened<A>(K + p * S * E, S, E, kbuf), S, E, ktbuf);  // [E, S]
        vp = widened<A>(V + p * S * Ev, S, Ev, vbuf);
        widened_problem = p;
      }
      const Problem<A> prob{g, M, p};
      const int64_t nk = prob.keys_for(i0 + rows);
      const A* qt = widened<A>(Q + (p * L + i0) * E, rows, E, qbuf);
      scores.resize(size_t(rows * nk));
      product(qt, E, 1, kt, transposed_ld<A>(S), rows, nk, E, A(g.scale), false, scores.data(), nk);
      prob.softmax_rows(scores.data(), i0, rows, nk, nullptr, LSE + p * L + i0);
      prob.drop(scores.data(), i0, rows, nk);
      if constexpr (!std::is_same_v<A, T>) {
        // The probabilities enter the second GEMM in T, as on tensor cores.
        for (auto& x : scores) x = cast_to<A>(cast_to<T>(x));
      }
      obuf.resize(size_t(rows * Ev));
      product(scores.data(), nk, 1, vp, Ev, rows, Ev, nk, A(1), false, obuf.data(), Ev);
      T* o = O + (p * L + i0) * Ev;
      for (int64_t i = 0; i < rows * Ev; ++i) store_acc(o, i, obuf[size_t(i)]);
    }
  }
}

template <typename T>
void backward_typed(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                    const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                    const AttentionGeometry& g) {
  using A = acc_t<T>;
  const int64_t G = g.B * g.H, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  const T* Q = q.data_ptr<T>();
  const T* K = k.data_ptr<T>();
  const T* V = v.data_ptr<T>();
  const T* GO = gout.data_ptr<T>();
  const A* LSE = lse.data_ptr<A>();
  const A* M = mask_data<A>(mask);
  T* GQ = gq.defined() ? gq.data_ptr<T>() : nullptr;
  T* GK = gk.defined() ? gk.data_ptr<T>() : nullptr;
  T* GV = gv.defined() ? gv.data_ptr<T>() : nullptr;
  // One task per problem: its dK and dV sum over every query tile.
#pragma omp parallel
  {
    std::vector<A> kbuf, ktbuf, vbuf, vtbuf, qbuf, gobuf, pbuf, pd, dpbuf, dqbuf, dk, dv;  // pd: dropout(P)
#pragma omp for schedule(static)
    for (int64_t p = 0; p < G; ++p) {
      const A* kp = widened<A>(K + p * S * E, S, E, kbuf);
      const A* kt = transposed(kp, S, E, ktbuf);                                        // [E, S]
      const A* vt = transposed(widened<A>(V + p * S * Ev, S, Ev, vbuf), S, Ev, vtbuf);  // [Ev, S]
      dk.assign(size_t(S * E), A(0));
      dv.assign(size_t(S * Ev), A(0));
      const Problem<A> prob{g, M, p};
      for (int64_t i0 = 0; i0 < L; i0 += kTileRows) {
        const int64_t rows = std::min(kTileRows, L - i0), nk = prob.keys_for(i0 + rows);
        const A* qt = widened<A>(Q + (p * L + i0) * E, rows, E, qbuf);
        const A* got = widened<A>(GO + (p * L + i0) * Ev, rows, Ev, gobuf);
        if (nk == 0) {
          if (GQ)
            for (int64_t i = 0; i < rows * E; ++i) GQ[(p * L + i0) * E + i] = cast_to<T>(0);
          continue;
        }
        // P: the probabilities, recomputed from the stored log-sum-exp.
        pbuf.resize(size_t(rows * nk));
        product(qt, E, 1, kt, transposed_ld<A>(S), rows, nk, E, A(g.scale), false, pbuf.data(), nk);
        prob.softmax_rows(pbuf.data(), i0, rows, nk, LSE + p * L + i0, nullptr);
        // dPd = dO V^T is the gradient of dropout(P); dP = dropout(dPd) with the same mask.
        dpbuf.resize(size_t(rows * nk));
        product(got, Ev, 1, vt, transposed_ld<A>(S), rows, nk, Ev, A(1), false, dpbuf.data(), nk);
        prob.drop(dpbuf.data(), i0, rows, nk);
        if (GV) {  // dV += dropout(P)^T dO
          const A* pv = pbuf.data();
          if (g.dropout_p > 0) {
            pd.assign(pbuf.begin(), pbuf.end());
            prob.drop(pd.data(), i0, rows, nk);
            pv = pd.data();
          }
          product(pv, 1, nk, got, Ev, nk, Ev, rows, A(1), true, dv.data(), Ev);
        }
        softmax_backward_rows(pbuf.data(), dpbuf.data(), rows, nk);
        if (GQ) {  // dQ = scale dS K
          dqbuf.resize(size_t(rows * E));
          product(dpbuf.data(), nk, 1, kp, E, rows, E, nk, A(g.scale), false, dqbuf.data(), E);
          T* o = GQ + (p * L + i0) * E;
          for (int64_t i = 0; i < rows * E; ++i) store_acc(o, i, dqbuf[size_t(i)]);
        }
        if (GK) product(dpbuf.data(), 1, nk, qt, E, nk, E, rows, A(g.scale), true, dk.data(), E);  // dK += scale dS^T Q
      }
      if (GK)
        for (int64_t i = 0; i < S * E; ++i) store_acc(GK + p * S * E, i, dk[size_t(i)]);
      if (GV)
        for (int64_t i = 0; i < S * Ev; ++i) store_acc(GV + p * S * Ev, i, dv[size_t(i)]);
    }
  }
}

#if defined(__AVX512BF16__)
// A row-major bf16 tile [rows, cols] (leading dimension cols) as a GEMM's A: in place when cols
// is even, else copied with a zero column so that no pair reads past the tensor's end.
tile::PairRows bf16_rows(const BFloat16* p, int64_t rows, int64_t cols, std::vector<uint16_t>& buf) {
  const auto* bits = reinterpret_cast<const uint16_t*>(p);
  if (cols % 2 == 0) return {bits, cols, 2};
  buf.assign(size_t(rows * (cols + 1)), uint16_t(0));
  for (int64_t i = 0; i < rows; ++i) std::copy(bits + i * cols, bits + (i + 1) * cols, buf.data() + i * (cols + 1));
  return {buf.data(), cols + 1, 2};
}

// An fp32 tile [rows, cols] rounded to bf16 as a GEMM's A (row-major) ...
tile::PairRows rounded_rows(const float* x, int64_t rows, int64_t cols, std::vector<uint16_t>& buf) {
  const int64_t ld = cols + (cols & 1);
  buf.resize(size_t(rows * ld));
  tile::round_rows(x, cols, rows, cols, buf.data(), ld);
  return {buf.data(), ld, 2};
}
// ... and transposed ([cols, rows], pairs along the tile's rows).
tile::PairRows rounded_transposed(const float* x, int64_t rows, int64_t cols, std::vector<uint32_t>& buf) {
  const int64_t ld = tile::padded_columns(cols);
  buf.resize(size_t((rows + 1) / 2 * ld));
  tile::pack_rows(x, cols, rows, cols, buf.data(), ld);
  return {reinterpret_cast<const uint16_t*>(buf.data()), 2, 2 * ld};  // an A: broadcasts, any alignment
}

// B = X^T (X [n, k], rows along k) and B = X (X [k, n]) packed into buf.
tile::PackedB packed_transposed(const BFloat16* x, int64_t n, int64_t k, std::vector<uint32_t>& buf) {
  const int64_t ld = tile::packed_ld(n);
  uint32_t* w = aligned(buf, (k + 1) / 2 * ld);
  tile::pack_transposed(reinterpret_cast<const uint16_t*>(x), k, n, k, w, ld);
  return {w, ld};
}
tile::PackedB packed_rows(const BFloat16* x, int64_t k, int64_t n, std::vector<uint32_t>& buf) {
  const int64_t ld = tile::packed_ld(n);
  uint32_t* w = aligned(buf, (k + 1) / 2 * ld);
  tile::pack_rows(reinterpret_cast<const uint16_t*>(x), n, k, n, w, ld);
  return {w, ld};
}

// forward_typed for bf16 by bf16 dot products: S = scale Q K^T and O = P V per tile, K^T and V
// packed once per problem a thread runs.
void forward_bf16(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                  const Tensor& lse, const AttentionGeometry& g) {
  const int64_t G = g.B * g.H, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  const int64_t tiles = (L + kTileRows - 1) / kTileRows;
  const BFloat16* Q = q.data_ptr<BFloat16>();
  const BFloat16* K = k.data_ptr<BFloat16>();
  const BFloat16* V = v.data_ptr<BFloat16>();
  BFloat16* O = out.data_ptr<BFloat16>();
  float* LSE = lse.data_ptr<float>();
  const float* M = mask_data<float>(mask);
#pragma omp parallel
  {
    std::vector<uint32_t> kbuf, vbuf;
    std::vector<uint16_t> qbuf, pbuf;
    std::vector<float> scores, obuf;
    tile::PackedB kt{}, vp{};
    int64_t packed_problem = -1;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < G * tiles; ++task) {
      const int64_t p = task / tiles, i0 = (task % tiles) * kTileRows, rows = std::min(kTileRows, L - i0);
      if (p != packed_problem) {
        kt = packed_transposed(K + p * S * E, S, E, kbuf);
        vp = packed_rows(V + p * S * Ev, S, Ev, vbuf);
        packed_problem = p;
      }
      const Problem<float> prob{g, M, p};
      const int64_t nk = prob.keys_for(i0 + rows);
      scores.resize(size_t(rows * nk));
      obuf.resize(size_t(rows * Ev));
      tile::gemm(bf16_rows(Q + (p * L + i0) * E, rows, E, qbuf), kt, rows, nk, E, float(g.scale), false, scores.data(),
                 nk);
      prob.softmax_rows(scores.data(), i0, rows, nk, nullptr, LSE + p * L + i0);
      prob.drop(scores.data(), i0, rows, nk);
      tile::gemm(rounded_rows(scores.data(), rows, nk, pbuf), vp, rows, Ev, nk, 1.0f, false, obuf.data(), Ev);
      BFloat16* o = O + (p * L + i0) * Ev;
      for (int64_t i = 0; i < rows * Ev; ++i) store_acc(o, i, obuf[size_t(i)]);
    }
  }
}

// backward_typed for bf16 by bf16 dot products, one problem per task: P = scale Q K^T,
// dP = dO V^T, dV += P^T dO, dQ = scale dS K, dK += scale dS^T Q.
void backward_bf16(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                   const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                   const AttentionGeometry& g) {
  const int64_t G = g.B * g.H, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  const BFloat16* Q = q.data_ptr<BFloat16>();
  const BFloat16* K = k.data_ptr<BFloat16>();
  const BFloat16* V = v.data_ptr<BFloat16>();
  const BFloat16* GO = gout.data_ptr<BFloat16>();
  const float* LSE = lse.data_ptr<float>();
  const float* M = mask_data<float>(mask);
  BFloat16* GQ = gq.defined() ? gq.data_ptr<BFloat16>() : nullptr;
  BFloat16* GK = gk.defined() ? gk.data_ptr<BFloat16>() : nullptr;
  BFloat16* GV = gv.defined() ? gv.data_ptr<BFloat16>() : nullptr;
#pragma omp parallel
  {
    std::vector<uint32_t> ktbuf, vtbuf, kbuf, pw, dow, qw, dsw;
    std::vector<uint16_t> qbuf, gobuf, dsbuf;
    std::vector<float> pbuf, pd, dpbuf, dqbuf, dk, dv;  // pd: dropout(P)
#pragma omp for schedule(static)
    for (int64_t p = 0; p < G; ++p) {
      const tile::PackedB kt = packed_transposed(K + p * S * E, S, E, ktbuf);
      const tile::PackedB vt = packed_transposed(V + p * S * Ev, S, Ev, vtbuf);
      const tile::PackedB kr = GQ ? packed_rows(K + p * S * E, S, E, kbuf) : tile::PackedB{};
      dk.assign(size_t(S * E), 0.0f);
      dv.assign(size_t(S * Ev), 0.0f);
      const Problem<float> prob{g, M, p};
      for (int64_t i0 = 0; i0 < L; i0 += kTileRows) {
        const int64_t rows = std::min(kTileRows, L - i0), nk = prob.keys_for(i0 + rows);
        const BFloat16* qt = Q + (p * L + i0) * E;
        const BFloat16* got = GO + (p * L + i0) * Ev;
        if (nk == 0) {
          if (GQ) std::fill(GQ + (p * L + i0) * E, GQ + (p * L + i0 + rows) * E, BFloat16(0.0f));
          continue;
        }
        pbuf.resize(size_t(rows * nk));
        tile::gemm(bf16_rows(qt, rows, E, qbuf), kt, rows, nk, E, float(g.scale), false, pbuf.data(), nk);
        prob.softmax_rows(pbuf.data(), i0, rows, nk, LSE + p * L + i0, nullptr);
        dpbuf.resize(size_t(rows * nk));
        tile::gemm(bf16_rows(got, rows, Ev, gobuf), vt, rows, nk, Ev, 1.0f, false, dpbuf.data(), nk);
        prob.drop(dpbuf.data(), i0, rows, nk);
        if (GV) {
          const float* pv = pbuf.data();
          if (g.dropout_p > 0) {
            pd.assign(pbuf.begin(), pbuf.end());
            prob.drop(pd.data(), i0, rows, nk);
            pv = pd.data();
          }
          tile::gemm(rounded_transposed(pv, rows, nk, pw), packed_rows(got, rows, Ev, dow), nk, Ev, rows, 1.0f, true,
                     dv.data(), Ev);
        }
        softmax_backward_rows(pbuf.data(), dpbuf.data(), rows, nk);
        if (GQ) {
          dqbuf.resize(size_t(rows * E));
          tile::gemm(rounded_rows(dpbuf.data(), rows, nk, dsbuf), kr, rows, E, nk, float(g.scale), false, dqbuf.data(),
                     E);
          BFloat16* o = GQ + (p * L + i0) * E;
          for (int64_t i = 0; i < rows * E; ++i) store_acc(o, i, dqbuf[size_t(i)]);
        }
        if (GK)
          tile::gemm(rounded_transposed(dpbuf.data(), rows, nk, dsw), packed_rows(qt, rows, E, qw), nk, E, rows,
                     float(g.scale), true, dk.data(), E);
      }
      if (GK)
        for (int64_t i = 0; i < S * E; ++i) store_acc(GK + p * S * E, i, dk[size_t(i)]);
      if (GV)
        for (int64_t i = 0; i < S * Ev; ++i) store_acc(GV + p * S * Ev, i, dv[size_t(i)]);
    }
  }
}
#endif

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                       const Tensor& lse, const AttentionGeometry& g) {
  if (g.B * g.H * g.L == 0) return;
#if defined(__AVX512BF16__)
  if (q.dtype() == DType::BFloat16) return forward_bf16(q, k, v, mask, out, lse, g);
#endif
  dispatch_floating(q.dtype(), "scaled_dot_product_attention",
                    [&]<typename T>() { forward_typed<T>(q, k, v, mask, out, lse, g); });
}

void attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        const Tensor& /*out*/, const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                        const AttentionGeometry& g) {
  if (g.B * g.H == 0) return;
#if defined(__AVX512BF16__)
  if (q.dtype() == DType::BFloat16) return backward_bf16(gout, q, k, v, mask, lse, gq, gk, gv, g);
#endif
  dispatch_floating(q.dtype(), "scaled_dot_product_attention",
                    [&]<typename T>() { backward_typed<T>(gout, q, k, v, mask, lse, gq, gk, gv, g); });
}

void triangle(const Tensor& in, const Tensor& out, int64_t diagonal, bool upper) {
  const int64_t G = in.size(0), R = in.size(1), C = in.size(2);
  dispatch_all(in.dtype(), [&]<typename T>() {
    const T* x = in.data_ptr<T>();
    T* y = out.data_ptr<T>();
    parallel_for(0, G * R, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        const int64_t r = row % R;
        for (int64_t c = 0; c < C; ++c) {
          const bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
          y[row * C + c] = keep ? x[row * C + c] : cast_to<T>(0);
        }
      }
    });
  });
}

}  // namespace mantissa::cpu
