// Products with a transposed operand, bf16 by AVX512-BF16 dot products over k-pairs and fp32 by
// FMAs. Attention's backward makes them: dV = P^T dY and dK^T = Q^T dS (the first operand
// transposed), dQ = dS K (the second operand a transposed view of K^T). oneDNN 2.x's brgemm runs
// these at about half its rate for the same products with plain operands (it reorders the
// transposed operand: bf16 [64, 512, 512]^T @ [64, 512, 32] took 2.8 ms here, 1.2 ms with the
// first operand plain; fp32 4.4 against 2.4 ms). Every form below computes
//
//   C[i, j] = sum_k X(k, i) * Y(k, j)
//
// with 16 lanes along i. bf16: vdpbf16ps multiplies a vector of (X(k, i), X(k+1, i)) word pairs
// by a broadcast (Y(k, j), Y(k+1, j)) pair: fp32 accumulation, one rounding per output (denormal
// inputs read as zero, as in oneDNN's bf16 kernels). fp32: one k at a time, X(k, i..) times a
// broadcast Y(k, j). The operand with at most 64 columns is packed once per batch (bf16 into
// pairs); the other is read where it lies:
//   rows:  X's rows k contiguous along i (bf16: two rows interleaved per k-pair; dV: X = P,
//          dK^T: X = dS);
//   words: Y's rows j contiguous along k, each step's value (bf16: a pair) one 32-bit word in
//          place (dQ: Y = dS).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/tile_gemm.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace mantissa::cpu {

#if defined(__AVX512BF16__)
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxPacked = 64;      // the packed operand's columns (at most K x 64 words)
constexpr int64_t kMaxBlock = 64 * 12;  // outputs of the largest block (V x 16 x P)
constexpr int64_t kAhead = 8;           // k-pairs between a bf16 row's prefetch and its use
constexpr int64_t kAheadFp32 = 4;       // times that for fp32 rows (twice the bytes, from memory: 3.1 -> 2.9 ms)

// An operand: element (k, c) at p[k * k_stride + c * c_stride]; T is uint16_t (bf16 bits) or float.
template <typename T>
struct Operand2 {
  const T* p;
  int64_t k_stride, c_stride;
};

// (Z(k, c..), Z(k+1, c..)) of two rows interleaved into 16 word pairs; lanes outside `mask` zero.
inline __m512i interleaved_rows(const uint16_t* row, int64_t k_stride, bool second, __mmask16 mask) {
  const __m512i order = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                         5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m256i r0 = _mm256_maskz_loadu_epi16(mask, row);
  const __m256i r1 = second ? _mm256_maskz_loadu_epi16(mask, row + k_stride) : _mm256_setzero_si256();
  return _mm512_permutex2var_epi16(_mm512_castsi256_si512(r0), order, _mm512_castsi256_si512(r1));
}

// packed[pair * width + c] = Z(2 pair, c) | Z(2 pair + 1, c) << 16, zero past K and C: by the
// tile GEMMs' packings (tile_gemm.h) where width is whole vectors, rows of Z contiguous along c
// (two rows interleaved) or columns contiguous along k (their 32-bit words transposed);
// otherwise element by element.
void pack(const Operand2<uint16_t>& z, int64_t K, int64_t C, int64_t width, std::vector<uint32_t>& packed) {
  const int64_t pairs = (K + 1) / 2;
  packed.assign(size_t(pairs * width), 0);
  if (width % kLanes == 0 && z.c_stride == 1) {
    tile::pack_rows(z.p, z.k_stride, K, C, packed.data(), width);
    return;
  }
  if (width % kLanes == 0 && z.k_stride == 1 && kLanes * z.c_stride + K < (int64_t(1) << 31)) {
    tile::pack_transposed(z.p, z.c_stride, C, K, packed.data(), width);
    return;
  }
  for (int64_t p = 0; p < pairs; ++p)
    for (int64_t c = 0; c < C; ++c) {
      const uint32_t lo = z.p[2 * p * z.k_stride + c * z.c_stride];
      const uint32_t hi = 2 * p + 1 < K ? z.p[(2 * p + 1) * z.k_stride + c * z.c_stride] : 0;
      packed[size_t(p * width + c)] = lo | hi << 16;
    }
}

// packed[k * width + c] = Z(k, c)'s bits (fp32: no pairs), zero past C. Rows contiguous along c
// by vectors; columns contiguous along k by tile::transpose; otherwise element by element.
void pack(const Operand2<float>& z, int64_t K, int64_t C, int64_t width, std::vector<uint32_t>& packed) {
  packed.assign(size_t(K * width), 0);
  float* out = reinterpret_cast<float*>(packed.data());
  if (width % kLanes == 0 && z.c_stride == 1) {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; c += kLanes) {
        const __mmask16 mask = __mmask16((1u << std::min(kLanes, C - c)) - 1);
        _mm512_storeu_ps(out + k * width + c, _mm512_maskz_loadu_ps(mask, z.p + k * z.k_stride + c));
      }
    return;
  }
  if (width % kLanes == 0 && z.k_stride == 1 && kLanes * z.c_stride + K < (int64_t(1) << 31)) {
    tile::transpose(z.p, z.c_stride, C, K, out, width);
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) out[k * width + c] = z.p[k * z.k_stride + c * z.c_stride];
}

// Where a block's outputs go: C(i, j) at c[i * ci + j * cj], within I x J.
template <typename T>
struct Out {
  T* c;
  int64_t ci, cj, I, J;
};

// Writes a block's fp32 sums (sums[j][i], row length `row`) into an fp32 C from (i0, j0).
void write_block(const float* sums, int64_t row, int64_t rows, const Out<float>& o, int64_t i0, int64_t j0) {
  const int64_t jn = std::min(rows, o.J - j0), in = std::min(row, o.I - i0);
  if (o.ci == 1) {
    for (int64_t j = 0; j < jn; ++j)
      for (int64_t v = 0; v * kLanes < in; ++v) {
        const __mmask16 mask = __mmask16((1u << std::min(kLanes, in - v * kLanes)) - 1);
        _mm512_mask_storeu_ps(o.c + i0 + v * kLanes + (j0 + j) * o.cj, mask,
                              _mm512_load_ps(sums + j * row + v * kLanes));
      }
    return;
  }
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < jn; ++j) o.c[(i0 + i) * o.ci + (j0 + j) * o.cj] = sums[j * row + i];
}

// Rounds a block's sums (sums[j][i], row length `row`) into a bf16 C from (i0, j0).
void write_block(const float* sums, int64_t row, int64_t rows, const Out<uint16_t>& o, int64_t i0, int64_t j0) {
  const int64_t jn = std::min(rows, o.J - j0), in = std::min(row, o.I - i0);
  if (o.ci == 1) {  // lanes run along C's rows: vector stores
    for (int64_t j = 0; j < jn; ++j)
      for (int64_t v = 0; v * kLanes < in; ++v) {
        uint16_t* dst = o.c + i0 + v * kLanes + (j0 + j) * o.cj;
        const __m512 s = _mm512_load_ps(sums + j * row + v * kLanes);
        const int64_t left = std::min(kLanes, in - v * kLanes);
        if (left == kLanes) {
          store_bf16x16(s, dst);
          continue;
        }
        alignas(64) uint16_t tmp[kLanes];
        store_bf16x16(s, tmp);
        _mm256_mask_storeu_epi16(dst, __mmask16((1u << left) - 1),
                                 _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp)));
      }
    return;
  }
  // Lanes run across C's rows (dV's case: j is C's contiguous dim): rounded by vectors, then
  // written element by element (a scalar rounding each cost as much as the block's products).
  alignas(64) uint16_t tile[kMaxBlock];
  for (int64_t j = 0; j < jn; ++j)
    for (int64_t v = 0; v * kLanes < in; ++v)
      store_bf16x16(_mm512_load_ps(sums + j * row + v * kLanes), tile + j * row + v * kLanes);
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < jn; ++j) o.c[(i0 + i) * o.ci + (j0 + j) * o.cj] = tile[j * row + i];
}

// One block of V x 16 outputs along i and P along j, K summed. Every index into acc is a
// constant (loops unrolled), so the V x P accumulators stay in registers. bf16 (T = uint16_t)
// steps over k-pairs with vdpbf16ps; fp32 over single k with FMAs.
//   Rows: x is read in place (rows k contiguous along i), y packed (pack[step * width + j]).
//   !Rows: x packed (pack[step * width + i], zero past I), y read in place (rows j contiguous along k).
template <typename T, int V, int P, bool Rows>
void block(const Operand2<T>& x, const Operand2<T>& y, const uint32_t* pack, int64_t width, int64_t K, const Out<T>& o,
           int64_t i0, int64_t j0) {
  constexpr bool bf16 = std::is_same_v<T, uint16_t>;
  constexpr int64_t kStep = bf16 ? 2 : 1;  // k per multiply-add
  __m512 acc[P][V];
#pragma GCC unroll 16
  for (int j = 0; j < P; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[j][v] = _mm512_setzero_ps();
  __mmask16 masks[V];
  for (int v = 0; v < V; ++v) {
    const int64_t left = std::clamp<int64_t>(o.I - i0 - v * kLanes, 0, kLanes);
    masks[v] = __mmask16((1u << left) - 1);
  }
  // y's rows for this block (!Rows), the last row repeated past J (those sums are not written).
  const T* yrow[P] = {};
  if constexpr (!Rows)
    for (int j = 0; j < P; ++j) yrow[j] = y.p + std::min(j0 + j, o.J - 1) * y.c_stride;
  for (int64_t k = 0; k < K; k += kStep) {
    __m512i xv[V];
    if constexpr (Rows) {
      // X is usually cold (attention's P: 33 MB): fetch the rows kAhead steps on, as far as the
      // block reads them, so the first pass over a strip streams instead of waiting on memory.
      constexpr int64_t ahead_k = kStep * kAhead * (bf16 ? 1 : kAheadFp32);
      const T* ahead = x.p + (k + ahead_k) * x.k_stride + i0;
      if (k + ahead_k + kStep - 1 < K)
#pragma GCC unroll 8
        for (int64_t e = 0; e < V * kLanes; e += 64 / int64_t(sizeof(T)))
#pragma GCC unroll 2
          for (int64_t r = 0; r < kStep; ++r)
            _mm_prefetch(reinterpret_cast<const char*>(ahead + r * x.k_stride + e), _MM_HINT_T0);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const T* at = x.p + k * x.k_stride + i0 + v * kLanes;
        if constexpr (bf16)
          xv[v] = interleaved_rows(at, x.k_stride, k + 1 < K, masks[v]);
        else
          xv[v] = _mm512_castps_si512(_mm512_maskz_loadu_ps(masks[v], at));
      }
    } else {
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) xv[v] = _mm512_loadu_si512(pack + (k / kStep) * width + i0 + v * kLanes);
    }
#pragma GCC unroll 16
    for (int j = 0; j < P; ++j) {
      uint32_t word;  // bf16: the pair (Y(k, j), Y(k+1, j)); fp32: Y(k, j)'s bits
      if constexpr (Rows) {
        word = pack[(k / kStep) * width + j0 + j];
      } else if (!bf16 || k + 1 < K) {
        std::memcpy(&word, yrow[j] + k, sizeof word);
      } else {
        word = uint32_t(yrow[j][k]);
      }
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        if constexpr (bf16)
          acc[j][v] = _mm512_dpbf16_ps(acc[j][v], __m512bh(xv[v]), __m512bh(_mm512_set1_epi32(int32_t(word))));
        else
          acc[j][v] = _mm512_fmadd_ps(_mm512_castsi512_ps(xv[v]), _mm512_castsi512_ps(_mm512_set1_epi32(int32_t(word))),
                                      acc[j][v]);
      }
    }
  }
  alignas(64) float sums[P][V * kLanes];
#pragma GCC unroll 16
  for (int j = 0; j < P; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_store_ps(sums[j] + v * kLanes, acc[j][v]);
  write_block(&sums[0][0], V * kLanes, P, o, i0, j0);
}

// All of C for B batches: blocks of V x 16 along i, P along j; tasks are (batch, run of i blocks,
// run of j blocks), each packing its batch's packed operand (a few KiB) once.
template <typename T, int V, int P, bool Rows>
void run(int64_t B, const Operand2<T>& x0, int64_t x_batch, const Operand2<T>& y0, int64_t y_batch, int64_t K, Out<T> o,
         int64_t out_batch) {
  const int64_t I = o.I, J = o.J;
  const int64_t i_step = V * kLanes, i_blocks = (I + i_step - 1) / i_step, j_step = 8 * P;
  const int64_t width = Rows ? (J + P - 1) / P * P : i_blocks * i_step;
  const int64_t i_run = std::min<int64_t>(i_blocks, 4), i_runs = (i_blocks + i_run - 1) / i_run;
  const int64_t j_runs = (J + j_step - 1) / j_step, per_batch = i_runs * j_runs;
  // One thread below about 4 M multiply-adds (microseconds: less than a fork costs).
  const int64_t task_work = i_run * i_step * std::min(J, j_step) * K;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(1, task_work));
  parallel_for(0, B * per_batch, grain, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<uint32_t> packed;
    int64_t packed_batch = -1;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bi = t / per_batch, ir = t % per_batch / j_runs, jr = t % j_runs;
      const Operand2<T> x{x0.p + bi * x_batch, x0.k_stride, x0.c_stride};
      const Operand2<T> y{y0.p + bi * y_batch, y0.k_stride, y0.c_stride};
      if (packed_batch != bi) {
        pack(Rows ? y : x, K, Rows ? J : I, width, packed);
        packed_batch = bi;
      }
      Out<T> ob = o;
      ob.c += bi * out_batch;
      for (int64_t ib = ir * i_run; ib < std::min(i_blocks, (ir + 1) * i_run); ++ib)
        for (int64_t j0 = jr * j_step; j0 < std::min(J, (jr + 1) * j_step); j0 += P)
          block<T, V, P, Rows>(x, y, packed.data(), width, K, ob, ib * i_step, j0);
    }
  });
}

// The three forms for element type T (see the top of the file); false where none applies.
template <typename T>
bool k_major(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  const auto* pa = static_cast<const T*>(a.raw_data());
  const auto* pb = static_cast<const T*>(b.raw_data());
  auto* pc = static_cast<T*>(out.raw_data());
  // A(k, m) = a[m, k], B(k, n) = b[k, n], as Operand2s (k first).
  const Operand2<T> A{pa, a.stride(2), a.stride(1)}, Bk{pb, b.stride(1), b.stride(2)};
  const int64_t MN = M * N;
  if (a.stride(1) == 1 && N <= kMaxPacked) {  // dV = P^T dY: i = m (A's rows), j = n (B packed)
    run<T, 3, 8, true>(B, A, a.stride(0), Bk, b.stride(0), K, Out<T>{pc, N, 1, M, N}, MN);
    return true;
  }
  if (a.stride(1) == 1 && M <= kMaxPacked && b.stride(2) == 1) {  // dK^T = Q^T dS: i = n (B's rows), j = m
    run<T, 3, 8, true>(B, Bk, b.stride(0), A, a.stride(0), K, Out<T>{pc, 1, N, N, M}, MN);
    return true;
  }
  if (a.stride(2) == 1 && b.stride(1) == 1 && N <= kMaxPacked) {  // dQ = dS K: i = n (B packed), j = m (A's words)
    if (N <= 32)
      run<T, 2, 12, false>(B, Bk, b.stride(0), A, a.stride(0), K, Out<T>{pc, 1, N, N, M}, MN);
    else
      run<T, 4, 6, false>(B, Bk, b.stride(0), A, a.stride(0), K, Out<T>{pc, 1, N, N, M}, MN);
    return true;
  }
  return false;
}

}  // namespace
#endif

bool matmul_k_major(const Tensor& a, const Tensor& b, const Tensor& out) {
#if defined(__AVX512BF16__)
  const DType t = a.dtype();
  if ((t != DType::BFloat16 && t != DType::Float32) || b.dtype() != t || out.dtype() != t) return false;
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  // Batched products only: 2-D ones (linear layers) stay with oneDNN, which runs their
  // transposed operands at its full rate.
  if (B < 2 || M == 1 || N == 1 || K < 2 || out.numel() == 0 || !out.is_contiguous()) return false;
  return t == DType::BFloat16 ? k_major<uint16_t>(a, b, out) : k_major<float>(a, b, out);
#else
  (void)a, (void)b, (void)out;
  return false;
#endif
}

}  // namespace mantissa::cpu
