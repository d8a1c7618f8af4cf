// 8 x 8 transposes in registers for the permuting copies (core/cpu/elementwise.cpp): dst[j][i]
// = src[i][j], rows `ss` and `ds` elements apart, elements of 2 or 4 bytes moved as bits (a NaN's
// payload is kept: only loads, shuffles and stores). Element by element, a 16 x 16 tile of a
// transpose ran at 9-17 % of memcpy on AVX2; these are 8 loads, 24 shuffles and 8 stores per 64
// elements. has_block_transpose<U> says whether this build has one for U's size.
#pragma once
#include <cstdint>

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
#else
template <typename U>
constexpr bool has_block_transpose = false;
template <typename U>
inline void block_transpose_8x8(const U*, int64_t, U*, int64_t) {}
#endif

}  // namespace mantissa::cpu
