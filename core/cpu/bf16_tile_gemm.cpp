// The bf16 tile GEMM of bf16_tile_gemm.h and its packings.
#include "core/cpu/bf16_tile_gemm.h"

#include <string>

#include "core/error.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#endif

namespace mantissa::cpu::bf16_tile {

#if defined(__AVX512BF16__)
bool available() { return true; }

namespace {

// k-pairs per pass over B: a 64-column panel of them is 32 KiB, within L1 while the rows of A
// stream past it. Passes after the first add to C (alpha applied to each pass's sum).
constexpr int64_t kPairBlock = 128;

// Rows of C per block for V vectors of 16 columns: 12-16 accumulators, enough independent dot
// products in flight to cover vdpbf16ps's latency at two a cycle, with B's V vectors and a
// broadcast of A in the remaining registers.
template <int V>
constexpr int kRows = V == 4 ? 4 : V == 3 ? 5 : V == 2 ? 8 : 12;

// C[0..R, 0..16 V) of a block: a at A's row 0 and pair 0 of this pass, b at B's pair 0 and the
// block's first column. `last` masks the last vector's columns. An odd K's last pair (odd_last)
// is read with both high halves cleared.
template <int R, int V>
void block(const uint16_t* a, int64_t a_row, int64_t a_pair, const uint32_t* b, int64_t ldb, int64_t pairs,
           bool odd_last, float* c, int64_t ldc, float alpha, bool load_c, __mmask16 last) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  auto step = [&](int64_t p, uint32_t low_only) {
    __m512i bv[V];
    for (int v = 0; v < V; ++v) {
      bv[v] = _mm512_loadu_si512(b + p * ldb + 16 * v);
      if (low_only != ~0u) bv[v] = _mm512_and_si512(bv[v], _mm512_set1_epi32(int32_t(low_only)));
    }
    for (int r = 0; r < R; ++r) {
      uint32_t w;
      std::memcpy(&w, a + r * a_row + p * a_pair, sizeof w);
      const __m512bh aw = __m512bh(_mm512_set1_epi32(int32_t(w & low_only)));
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], aw, __m512bh(bv[v]));
    }
  };
  const int64_t full = pairs - (odd_last ? 1 : 0);
  for (int64_t p = 0; p < full; ++p) step(p, ~0u);
  if (odd_last) step(full, 0x0000FFFFu);
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      float* pc = c + r * ldc + 16 * v;
      const __mmask16 m = v == V - 1 ? last : __mmask16(0xFFFF);
      const __m512 sum = load_c ? _mm512_fmadd_ps(acc[r][v], scale, _mm512_maskz_loadu_ps(m, pc))
                                : _mm512_mul_ps(acc[r][v], scale);
      _mm512_mask_storeu_ps(pc, m, sum);
    }
}

// Every row of C for the columns [j0, j0 + width) (width <= 16 V) of one pass.
template <int V>
void column_panel(PairRows a, const uint32_t* b, int64_t ldb, int64_t M, int64_t width, int64_t pairs, bool odd_last,
                  float* c, int64_t ldc, float alpha, bool load_c) {
  const int64_t tail = width - 16 * (V - 1);
  const __mmask16 last = __mmask16(tail >= 16 ? 0xFFFF : (1u << tail) - 1);
  constexpr int R = kRows<V>;
  int64_t i = 0;
  for (; i + R <= M; i += R)
    block<R, V>(a.p + i * a.row, a.row, a.pair, b, ldb, pairs, odd_last, c + i * ldc, ldc, alpha, load_c, last);
  for (; i < M; ++i)
    block<1, V>(a.p + i * a.row, a.row, a.pair, b, ldb, pairs, odd_last, c + i * ldc, ldc, alpha, load_c, last);
}

}  // namespace

void gemm(PairRows a, PackedB b, int64_t M, int64_t N, int64_t K, float alpha, bool accumulate, float* c,
          int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty sum
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.0f);
    return;
  }
  const int64_t pairs = (K + 1) / 2;
  for (int64_t p0 = 0; p0 < pairs; p0 += kPairBlock) {
    const int64_t np = std::min(kPairBlock, pairs - p0);
    const bool odd_last = (K & 1) && p0 + np == pairs, load_c = accumulate || p0 > 0;
    const PairRows ap{a.p + p0 * a.pair, a.row, a.pair};
    const uint32_t* bp = b.w + p0 * b.ld;
    for (int64_t j0 = 0; j0 < N;) {
      const int64_t rem = N - j0, vectors = std::min<int64_t>(4, (rem + 15) / 16), width = std::min(rem, 16 * vectors);
      switch (vectors) {
        case 4:
          column_panel<4>(ap, bp + j0, b.ld, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
          break;
        case 3:
          column_panel<3>(ap, bp + j0, b.ld, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
          break;
        case 2:
          column_panel<2>(ap, bp + j0, b.ld, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
          break;
        default:
          column_panel<1>(ap, bp + j0, b.ld, M, width, np, odd_last, c + j0, ldc, alpha, load_c);
      }
      j0 += width;
    }
  }
}

void pack_transposed(const uint16_t* x, int64_t ld, int64_t N, int64_t K, uint32_t* dst, int64_t dld) {
  // 16 rows of X at a time, one gather of their words per pair (a scalar loop wrote one word
  // per cache line of dst: 15 % of a bf16 attention's time at head width 128).
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t j0 = 0; j0 < dld; j0 += 16) {
    const int64_t n = std::clamp<int64_t>(N - j0, 0, 16);
    const __mmask16 m = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1);
    const uint16_t* base = x + std::min(j0, N) * ld;
    __m512i at = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(int32_t(ld)));  // element offsets of the rows
    for (int64_t p = 0; p < K / 2; ++p, at = _mm512_add_epi32(at, _mm512_set1_epi32(2)))
      _mm512_storeu_si512(dst + p * dld + j0, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, at, base, 2));
    if (K == 1) {
      for (int64_t j = j0; j < j0 + 16; ++j) dst[j] = j < N ? x[j * ld] : 0u;
    } else if (K & 1) {  // the last pair's low half: the word ending at the row's last element, shifted
      const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, at, base - 1, 2);
      _mm512_storeu_si512(dst + (K / 2) * dld + j0, _mm512_srli_epi32(w, 16));
    }
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
      const int64_t n = std::clamp<int64_t>(N - j, 0, 16);
      const __mmask16 m = __mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1);
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
  throw Error(std::string("bf16_tile::") + entry + ": this build of Mantissa does not target AVX512-BF16");
}
}  // namespace

void gemm(PairRows, PackedB, int64_t, int64_t, int64_t, float, bool, float*, int64_t) { unavailable("gemm"); }
void pack_transposed(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*, int64_t) {
  unavailable("pack_transposed");
}
void pack_rows(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*, int64_t) { unavailable("pack_rows"); }
void pack_rows(const float*, int64_t, int64_t, int64_t, uint32_t*, int64_t) { unavailable("pack_rows"); }
void round_rows(const float*, int64_t, int64_t, int64_t, uint16_t*, int64_t) { unavailable("round_rows"); }
#endif

}  // namespace mantissa::cpu::bf16_tile
