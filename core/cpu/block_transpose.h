// Register transposes for the permuting copies (core/cpu/elementwise.cpp): dst[j][i] = src[i][j],
// rows `ss` and `ds` elements apart, elements of 2 or 4 bytes moved as bits (a NaN's payload is
// kept: only loads, shuffles and stores). Element by element, a 16 x 16 tile of a transpose ran
// at 9-17 % of memcpy on AVX2; the 8 x 8 ones are 8 loads, 24 shuffles and 8 stores per 64
// elements. has_block_transpose<U> / has_block64_transpose<U> say which this build has for U.
#pragma once
#include <cstdint>
#include <cstring>
#include <numeric>

#include "core/cpu/streaming_store.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace mantissa::cpu {

#if defined(__AVX2__)
template <typename U>
constexpr bool has_block_transpose = sizeof(U) == 2 || sizeof(U) == 4;

// src, dst: [8, 8] blocks with row strides ss, ds (in elements).
template <typename U>
inline void block_transpose_8x8(const U* src, int64_t ss, U* dst, int64_t ds) {
  if constexpr (sizeof(U) == 4) {
    const float* s = reinterpret_cast<const float*>(src);
    float* d = reinterpret_cast<float*>(dst);
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ss);
    for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {  // groups of four rows: columns within each 128-bit half
      r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; ++j) {  // the halves: columns 0-3 from the low lanes, 4-7 from the high
      _mm256_storeu_ps(d + j * ds, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
      _mm256_storeu_ps(d + (j + 4) * ds, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
    }
  } else {
    static_assert(sizeof(U) == 2);
    __m128i a[8], b[8];
    for (int i = 0; i < 8; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ss));
    for (int i = 0; i < 8; i += 2) {  // 16-bit pairs
      b[i] = _mm_unpacklo_epi16(a[i], a[i + 1]);
      b[i + 1] = _mm_unpackhi_epi16(a[i], a[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {  // 32-bit pairs: four rows' columns side by side
      a[i] = _mm_unpacklo_epi32(b[i], b[i + 2]);
      a[i + 1] = _mm_unpackhi_epi32(b[i], b[i + 2]);
      a[i + 2] = _mm_unpacklo_epi32(b[i + 1], b[i + 3]);
      a[i + 3] = _mm_unpackhi_epi32(b[i + 1], b[i + 3]);
    }
    for (int j = 0; j < 4; ++j) {  // 64-bit halves: rows 0-3 then 4-7 of columns 2j, 2j + 1
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * j) * ds), _mm_unpacklo_epi64(a[j], a[j + 4]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * j + 1) * ds), _mm_unpackhi_epi64(a[j], a[j + 4]));
    }
  }
}
#endif

#if defined(__AVX512F__)
// 64 x 64 blocks of 2- and 4-byte elements through stack buffers: the source's 64 row segments
// copied in, register transposes out of that buffer (rows 80 apart), and where the destination's
// rows are a power of two of 1 KiB or more apart, into a second buffer whose 64 rows are copied
// out. Transposing in place between power-of-two strides (a [1024, 1024] fp32 transpose: both
// sides 4 KB apart) ran 3-4x slower than with rows 4160 bytes apart, the lines of each tile
// contending for the same cache sets; the buffers keep every such strided access a whole
// 128- or 256-byte run.
template <typename U>
constexpr bool has_block64_transpose = sizeof(U) == 2 || sizeof(U) == 4;

// (GCC 12 reports its own unpack intrinsics' "undefined" operand as uninitialized: a false
// warning, silenced here only.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// r: 16 rows of 16 floats (clobbered); stores column j of them as row j of d, rows ds floats apart.
inline void transpose_16x16_store(__m512 r[16], float* d, int64_t ds) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  auto pd = [](__m512 v) { return _mm512_castps_pd(v); };
  for (int g = 0; g < 16; g += 4) {  // r[g + k]: column 4 j + k of rows g .. g + 3 in 128-bit lane j
    r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[g]), pd(t[g + 2])));
    r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[g]), pd(t[g + 2])));
    r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[g + 1]), pd(t[g + 3])));
    r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[g + 1]), pd(t[g + 3])));
  }
  for (int k = 0; k < 4; ++k) {  // columns k, k + 4, k + 8, k + 12 from the four row groups' lanes
    const __m512 lo_ab = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), hi_ab = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
    const __m512 lo_cd = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
    const __m512 hi_cd = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
    _mm512_storeu_ps(d + k * ds, _mm512_shuffle_f32x4(lo_ab, lo_cd, 0x88));
    _mm512_storeu_ps(d + (k + 4) * ds, _mm512_shuffle_f32x4(hi_ab, hi_cd, 0x88));
    _mm512_storeu_ps(d + (k + 8) * ds, _mm512_shuffle_f32x4(lo_ab, lo_cd, 0xDD));
    _mm512_storeu_ps(d + (k + 12) * ds, _mm512_shuffle_f32x4(hi_ab, hi_cd, 0xDD));
  }
}

// 16 x 16 floats: dst[j][i] = src[i][j], rows ss and ds floats apart.
inline void block_transpose_16x16(const float* s, int64_t ss, float* d, int64_t ds) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(s + i * ss);
  transpose_16x16_store(r, d, ds);
}

#if defined(__AVX512BW__)
// 32 x 16 two-byte elements: dst[j][i] = src[i][j] for i < 32, j < 16, rows ss and ds elements
// apart (ds even). Rows 2k and 2k + 1 interleaved by one vpermt2w make 16 dwords whose dword j is
// column j's pair; the 16 x 16 dword transpose of those 16 vectors puts column j's 32 elements,
// in row order, in dword row j. 16 + 56 operations per 512 elements where the 8 x 8 xmm
// transposes take 320.
inline void block_transpose_32x16(const uint16_t* s, int64_t ss, uint16_t* d, int64_t ds) {
  // word 2 j <- a's word j, word 2 j + 1 <- b's word j (index 32 + j)
  const __m512i pairs = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                         5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  __m512 r[16];
  for (int k = 0; k < 16; ++k) {
    const __m512i a = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 2 * k * ss)));
    const __m512i b =
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + (2 * k + 1) * ss)));
    r[k] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(a, pairs, b));
  }
  transpose_16x16_store(r, reinterpret_cast<float*>(d), ds / 2);
}
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// dst[j][i] = src[i][j] for a 64 x 64 block of 2- or 4-byte elements (moved as bits): 4-byte
// ones by 16 x 16 zmm transposes, 2-byte ones by the 32 x 16 ones (the 8 x 8 xmm ones without
// AVX512BW). `stream`: the rows go out by non-temporal stores where dst's rows are 64-byte
// aligned (no read of the destination lines first, which a transpose too large for the caches
// pays on every line; the caller issues _mm_sfence before the result is read).
template <typename U>
inline void block_transpose_64x64(const U* src, int64_t ss, U* dst, int64_t ds, bool stream = false) {
  static_assert(sizeof(U) == 4 || sizeof(U) == 2);
  constexpr int64_t kB = 64, kPitch = kB + 16;
  alignas(64) U a[kB * kPitch], b[kB * kPitch];
  for (int64_t i = 0; i < kB; ++i) std::memcpy(a + i * kPitch, src + i * ss, kB * sizeof(U));
  // The rows go out through b when streamed, or when dst's rows are 4 KiB (or 1-2 KiB) apart:
  // then 64 rows share a few cache sets and the tiles' partial lines evicted one another (fp32
  // [1024, 1024]: 43 -> 19 GB/s written directly). Other strides take the register transposes'
  // stores directly (fp32 [64, 1024]: 81 -> 90 GB/s, bf16 65 -> 78, one Zen 5 core).
  const int64_t row_bytes = ds * int64_t(sizeof(U));
  const bool streamed = stream && ((reinterpret_cast<uintptr_t>(dst) | uintptr_t(row_bytes)) & 63) == 0;
  // (2-byte rows go out as dwords: an odd stride, too, through b.)
  const bool buffered = streamed || std::gcd(row_bytes, int64_t(4096)) > 512 || row_bytes % 4 != 0;
  U* out = buffered ? b : dst;
  const int64_t os = buffered ? kPitch : ds;
  if constexpr (sizeof(U) == 4) {
    const float* fa = reinterpret_cast<const float*>(a);
    float* fb = reinterpret_cast<float*>(out);
    for (int64_t i = 0; i < kB; i += 16)
      for (int64_t j = 0; j < kB; j += 16) block_transpose_16x16(fa + i * kPitch + j, kPitch, fb + j * os + i, os);
  } else {
#if defined(__AVX512BW__)
    const uint16_t* ha = reinterpret_cast<const uint16_t*>(a);
    uint16_t* hb = reinterpret_cast<uint16_t*>(out);
    for (int64_t i = 0; i < kB; i += 32)
      for (int64_t j = 0; j < kB; j += 16) block_transpose_32x16(ha + i * kPitch + j, kPitch, hb + j * os + i, os);
#else
    for (int64_t i = 0; i < kB; i += 8)
      for (int64_t j = 0; j < kB; j += 8) block_transpose_8x8(a + i * kPitch + j, kPitch, out + j * os + i, os);
#endif
  }
  if (streamed) {
    for (int64_t j = 0; j < kB; ++j)
      for (int64_t x = 0; x < kB * int64_t(sizeof(U)) / 64; ++x)
        _mm512_stream_ps(reinterpret_cast<float*>(dst + j * ds) + 16 * x,
                         _mm512_loadu_ps(reinterpret_cast<const float*>(b + j * kPitch) + 16 * x));
  } else if (buffered) {
    for (int64_t j = 0; j < kB; ++j) std::memcpy(dst + j * ds, b + j * kPitch, kB * sizeof(U));
  }
}
#else
template <typename U>
constexpr bool has_block64_transpose = false;
template <typename U>
inline void block_transpose_64x64(const U*, int64_t, U*, int64_t, bool = false) {}
#endif

#if !defined(__AVX2__)
template <typename U>
constexpr bool has_block_transpose = false;
template <typename U>
inline void block_transpose_8x8(const U*, int64_t, U*, int64_t) {}
#endif

}  // namespace mantissa::cpu
