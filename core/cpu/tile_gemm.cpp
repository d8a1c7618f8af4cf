// The tile GEMMs of tile_gemm.h and their packings.
#include "core/cpu/tile_gemm.h"

#include <string>

#include "core/error.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cpu/block_transpose.h"
#endif

namespace mantissa::cpu::tile {

#if defined(__AVX512BF16__)
bool available() { return true; }

namespace {

// Steps along k per pass over B (k-pairs for bf16, k for fp32): a 64-column panel of them is
// 32 KiB, within L1 while the rows of A stream past it. Passes after the first add to C (alpha
// applied to each pass's sum).
constexpr int64_t kStepBlock = 64;

// Rows of C per block for V vectors of 16 columns: 12-16 accumulators, enough independent dot
// products or FMAs in flight to cover their latency at two a cycle, with B's V vectors and a
// broadcast of A in the remaining registers.
template <int V>
constexpr int kRows = V == 4   ? 4
                      : V == 3 ? 5
                      : V == 2 ? 8
                               : 12;

// The element types of each form: bf16 reads A's pairs as 32-bit words from 16-bit elements and
// B as packed words; fp32 reads both as floats.
template <bool Fp32>
struct Form {
  using A = uint16_t;
  using B = uint32_t;
};
template <>
struct Form<true> {
  using A = float;
  using B = float;
};

// C[0..R, 0..16 V) of a block: a at A's row 0 and step 0 of this pass, b at B's step 0 and the
// block's first column. `last` masks the last vector's columns (B's too for fp32, which has no
// padding). bf16: an odd K's last pair (odd_last) is read with both high halves cleared.
template <bool Fp32, int R, int V>
void block(const typename Form<Fp32>::A* a, int64_t a_row, int64_t a_step, const typename Form<Fp32>::B* b, int64_t ldb,
           int64_t steps, bool odd_last, float* c, int64_t ldc, float alpha, bool load_c, __mmask16 last) {
  // Every loop over r and v unrolled (GCC 12 otherwise kept acc in memory as well, a store
  // after every FMA: fp32 at 93 GFLOP/s).
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  if constexpr (Fp32) {
    for (int64_t p = 0; p < steps; ++p) {
      __m512 bv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        bv[v] = _mm512_maskz_loadu_ps(v == V - 1 ? last : __mmask16(0xFFFF), b + p * ldb + 16 * v);
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(a[r * a_row + p * a_step]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
  } else {
    auto step = [&](int64_t p, uint32_t low_only) {
      __m512i bv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        bv[v] = _mm512_loadu_si512(b + p * ldb + 16 * v);
        if (low_only != ~0u) bv[v] = _mm512_and_si512(bv[v], _mm512_set1_epi32(int32_t(low_only)));
      }
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        uint32_t w;
        std::memcpy(&w, a + r * a_row + p * a_step, sizeof w);
        const __m512bh aw = __m512bh(_mm512_set1_epi32(int32_t(w & low_only)));
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], aw, __m512bh(bv[v]));
      }
    };
    const int64_t full = steps - (odd_last ? 1 : 0);
    for (int64_t p = 0; p < full; ++p) step(p, ~0u);
    if (odd_last) step(full, 0x0000FFFFu);
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* pc = c + r * ldc + 16 * v;
      const __mmask16 m = v == V - 1 ? last : __mmask16(0xFFFF);
      const __m512 sum =
          load_c ? _mm512_fmadd_ps(acc[r][v], scale, _mm512_maskz_loadu_ps(m, pc)) : _mm512_mul_ps(acc[r][v], scale);
      _mm512_mask_storeu_ps(pc, m, sum);
    }
}

// Every row of C for the columns [0, width) (width <= 16 V) at b and c, one pass.
template <bool Fp32, int V>
void column_panel(const typename Form<Fp32>::A* a, int64_t a_row, int64_t a_step, const typename Form<Fp32>::B* b,
                  int64_t ldb, int64_t M, int64_t width, int64_t steps, bool odd_last, float* c, int64_t ldc,
                  float alpha, bool load_c) {
  const int64_t tail = width - 16 * (V - 1);
  const __mmask16 last = __mmask16(tail >= 16 ? 0xFFFF : (1u << tail) - 1);
  constexpr int R = kRows<V>;
  int64_t i = 0;
  for (; i + R <= M; i += R)
    block<Fp32, R, V>(a + i * a_row, a_row, a_step, b, ldb, steps, odd_last, c + i * ldc, ldc, alpha, load_c, last);
  for (; i < M; ++i)
    block<Fp32, 1, V>(a + i * a_row, a_row, a_step, b, ldb, steps, odd_last, c + i * ldc, ldc, alpha, load_c, last);
}

// Both forms' passes over k and panels of 64 columns. steps: K (fp32) or K's pairs (bf16).
template <bool Fp32>
void run(const typename Form<Fp32>::A* a, int64_t a_row, int64_t a_step, const typename Form<Fp32>::B* b, int64_t ldb,
         int64_t M, int64_t N, int64_t K, float alpha, bool accumulate, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.0f);
    return;
  }
  const int64_t steps = Fp32 ? K : (K + 1) / 2;
  for (int64_t p0 = 0; p0 < steps; p0 += kStepBlock) {
    const int64_t np = std::min(kStepBlock, steps - p0);
    const bool odd_last = !Fp32 && (K & 1) && p0 + np == steps, load_c = accumulate || p0 > 0;
    const auto* ap = a + p0 * a_step;
    const auto* bp = b + p0 * ldb;
    for (int64_t j0 = 0; j0 < N;) {
      const int64_t rem = N - j0, vectors = std::min<int64_t>(4, (rem + 15) / 16), width = std::min(rem, 16 * vectors);
      switch (vectors) {
        case 4:
          column_panel<Fp32, 4>(ap, a_row, a_step, bp + j0, ldb, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
          break;
        case 3:
          column_panel<Fp32, 3>(ap, a_row, a_step, bp + j0, ldb, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
          break;
        case 2:
          column_panel<Fp32, 2>(ap, a_row, a_step, bp + j0, ldb, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
          break;
        default:
          column_panel<Fp32, 1>(ap, a_row, a_step, bp + j0, ldb, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
      }
      j0 += width;
    }
  }
}

inline __mmask16 first_lanes(int64_t n) { return __mmask16(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1); }

// dst[w * dld + j] = the 32-bit word w of row j of x (element j * ld + w * Step; T: 16- or
// 32-bit elements) for w in [w0, words), j in [j0, j0 + 16) below N; zero for j in [N, dld):
// one gather of 16 rows' words per w, for the edges of the 16 x 16 register transposes (and
// rows whose words are not 4-byte aligned). A scalar loop wrote one word per cache line of dst:
// 15 % of a bf16 attention's time at head width 128. Returns the element offsets of the 16 rows'
// word `words`.
template <int Step, typename T>
__m512i gather_transposed(const T* x, int64_t ld, int64_t N, int64_t w0, int64_t words, uint32_t* dst, int64_t dld,
                          int64_t j0) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __mmask16 m = first_lanes(N - j0), inside = first_lanes(dld - j0);  // never past dst's row
  const T* base = x + std::min(j0, N) * ld;
  __m512i at = _mm512_add_epi32(_mm512_mullo_epi32(lanes, _mm512_set1_epi32(int32_t(ld))),
                                _mm512_set1_epi32(int32_t(w0 * Step)));
  for (int64_t w = w0; w < words; ++w, at = _mm512_add_epi32(at, _mm512_set1_epi32(Step)))
    _mm512_mask_storeu_epi32(dst + w * dld + j0, inside,
                             _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, at, base, int(sizeof(T))));
  return at;
}

// The words of X's rows [N, words) transposed into dst [words, dld) (as gather_transposed), 16 x 16
// blocks by register transposes (block_transpose.h) where the words are 4-byte aligned
// (x32: x's words as floats' bits, rows ld32 apart; null when they are not).
template <int Step, typename T>
void transpose_words(const T* x, int64_t ld, const float* x32, int64_t ld32, int64_t N, int64_t words, uint32_t* dst,
                     int64_t dld) {
  const int64_t n16 = x32 ? N / 16 * 16 : 0, w16 = x32 ? words / 16 * 16 : 0;
  auto* d = reinterpret_cast<float*>(dst);
  for (int64_t j0 = 0; j0 < n16; j0 += 16) {
    for (int64_t w = 0; w < w16; w += 16) block_transpose_16x16(x32 + j0 * ld32 + w, ld32, d + w * dld + j0, dld);
    if (w16 < words) gather_transposed<Step>(x, ld, N, w16, words, dst, dld, j0);
  }
  for (int64_t j0 = n16; j0 < dld; j0 += 16) gather_transposed<Step>(x, ld, N, 0, words, dst, dld, j0);
}

}  // namespace

void gemm(PairRows a, PackedB b, int64_t M, int64_t N, int64_t K, float alpha, bool accumulate, float* c, int64_t ldc) {
  run<false>(a.p, a.row, a.pair, b.w, b.ld, M, N, K, alpha, accumulate, c, ldc);
}

void gemm(StridedA a, RowsB b, int64_t M, int64_t N, int64_t K, float alpha, bool accumulate, float* c, int64_t ldc) {
  run<true>(a.p, a.row, a.step, b.p, b.ld, M, N, K, alpha, accumulate, c, ldc);
}

void transpose(const float* x, int64_t ld, int64_t N, int64_t K, float* dst, int64_t dld) {
  transpose_words<1>(x, ld, x, ld, N, K, reinterpret_cast<uint32_t*>(dst), dld);
}

void pack_transposed(const uint16_t* x, int64_t ld, int64_t N, int64_t K, uint32_t* dst, int64_t dld) {
  // Rows of even length starting on 4-byte boundaries: their words are 32-bit elements.
  const bool words_aligned = ld % 2 == 0 && reinterpret_cast<uintptr_t>(x) % 4 == 0;
  transpose_words<2>(x, ld, words_aligned ? reinterpret_cast<const float*>(x) : nullptr, ld / 2, N, K / 2, dst, dld);
  if (K % 2 == 0) return;
  // An odd K: the last pair's low half, the word ending at each row's last element shifted down
  // (never a read past a row); K == 1 has no such word.
  for (int64_t j0 = 0; j0 < dld; j0 += 16) {
    uint32_t* out = dst + (K / 2) * dld;
    if (K == 1) {
      for (int64_t j = j0; j < std::min(j0 + 16, dld); ++j) out[j] = j < N ? x[j * ld] : 0u;
      continue;
    }
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i at =
        _mm512_add_epi32(_mm512_mullo_epi32(lanes, _mm512_set1_epi32(int32_t(ld))), _mm512_set1_epi32(int32_t(K - 2)));
    const __m512i w =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), first_lanes(N - j0), at, x + std::min(j0, N) * ld, 2);
    _mm512_mask_storeu_epi32(out + j0, first_lanes(dld - j0), _mm512_srli_epi32(w, 16));
  }
}

namespace {

// 16 words (lo(j), hi(j)) from 16 bf16 values of two rows (hi zero for a missing row).
inline __m512i interleave(__m256i lo, __m256i hi) {
  return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

inline __m256i rounded(const float* row, __mmask16 m) {
  return __m256i(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, row)));
}

template <typename T, typename Load>
void pack_rows_with(const T* x, int64_t ld, int64_t K, int64_t N, uint32_t* dst, int64_t dld, Load load) {
  for (int64_t p = 0; p < (K + 1) / 2; ++p) {
    const T* r0 = x + 2 * p * ld;
    const bool second = 2 * p + 1 < K;
    for (int64_t j = 0; j < dld; j += 16) {
      const __mmask16 m = first_lanes(N - j);
      const __m256i lo = load(r0 + j, m), hi = second ? load(r0 + ld + j, m) : _mm256_setzero_si256();
      _mm512_storeu_si512(dst + p * dld + j, interleave(lo, hi));
    }
  }
}

}  // namespace

void pack_rows(const uint16_t* x, int64_t ld, int64_t K, int64_t N, uint32_t* dst, int64_t dld) {
  pack_rows_with(x, ld, K, N, dst, dld,
                 [](const uint16_t* row, __mmask16 m) { return _mm256_maskz_loadu_epi16(m, row); });
}

void pack_rows(const float* x, int64_t ld, int64_t K, int64_t N, uint32_t* dst, int64_t dld) {
  pack_rows_with(x, ld, K, N, dst, dld, rounded);
}

void round_rows(const float* x, int64_t ld, int64_t M, int64_t K, uint16_t* dst, int64_t dld) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t k = 0; k < K; k += 16) {
      const int64_t n = std::min<int64_t>(16, K - k);
      const __mmask16 m = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1);
      _mm256_mask_storeu_epi16(dst + i * dld + k, m, rounded(x + i * ld + k, m));
    }
    std::fill(dst + i * dld + K, dst + (i + 1) * dld, uint16_t(0));
  }
}

#else
bool available() { return false; }

namespace {
[[noreturn]] void unavailable(const char* entry) {
  throw Error(std::string("tile::") + entry + ": this build of Mantissa does not target AVX512-BF16");
}
}  // namespace

void gemm(PairRows, PackedB, int64_t, int64_t, int64_t, float, bool, float*, int64_t) { unavailable("gemm"); }
void pack_transposed(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*, int64_t) { unavailable("pack_transposed"); }
void pack_rows(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*, int64_t) { unavailable("pack_rows"); }
void pack_rows(const float*, int64_t, int64_t, int64_t, uint32_t*, int64_t) { unavailable("pack_rows"); }
void round_rows(const float*, int64_t, int64_t, int64_t, uint16_t*, int64_t) { unavailable("round_rows"); }
void gemm(StridedA, RowsB, int64_t, int64_t, int64_t, float, bool, float*, int64_t) { unavailable("gemm"); }
void transpose(const float*, int64_t, int64_t, int64_t, float*, int64_t) { unavailable("transpose"); }
#endif

}  // namespace mantissa::cpu::tile
