// The dropout mask on the CPU: the counter-based draw of core/philox.h, shared with CUDA.
#include <bit>
#include <cmath>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/philox.h"

namespace mantissa::cpu {

namespace {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
// Philox4x32-10 of the 16 blocks blk0 .. blk0 + 15 across the lanes of AVX-512 registers, and
// the keep test of their 64 words: bit 4 l + w of the result is (word w of block l) >> 8 <
// threshold. GCC's vectorization of math::philox_round widened every word to 64 bits and
// multiplied with vpmullq among permutes (1.3 ns per element); here a round is two
// 32 x 32 -> 64-bit multiplies per register (even and odd lanes) and a blend.
inline uint64_t philox_keep_bits(uint64_t blk0, uint32_t k0, uint32_t k1, uint32_t threshold) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i v0 = _mm512_add_epi32(_mm512_set1_epi32(int32_t(uint32_t(blk0))), lane);
  // The counter's high word, plus the carry where the low word wrapped (v0 < lane).
  __m512i v1 = _mm512_set1_epi32(int32_t(uint32_t(blk0 >> 32)));
  v1 = _mm512_mask_add_epi32(v1, _mm512_cmplt_epu32_mask(v0, lane), v1, _mm512_set1_epi32(1));
  __m512i v2 = _mm512_setzero_si512(), v3 = _mm512_setzero_si512();
  const __m512i m0 = _mm512_set1_epi32(int32_t(0xD2511F53u)), m1 = _mm512_set1_epi32(int32_t(0xCD9E8D57u));
  // The high 32 bits of each lane's 64-bit product v * m: even lanes' products shifted down,
  // odd lanes' (multiplied from the shifted words) already in place.
  auto mul_high = [](__m512i v, __m512i m) {
    const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(v, m), 32);
    const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(v, 32), m);
    return _mm512_mask_blend_epi32(__mmask16(0xAAAA), even, odd);
  };
  uint32_t r0 = k0, r1 = k1;
  for (int round = 0; round < 10; ++round) {  // as math::philox4x32_10
    if (round > 0) {
      r0 += math::kPhiloxW0;
      r1 += math::kPhiloxW1;
    }
    const __m512i hi0 = mul_high(v0, m0), hi2 = mul_high(v2, m1);
    const __m512i lo0 = _mm512_mullo_epi32(v0, m0), lo2 = _mm512_mullo_epi32(v2, m1);
    // 0x96: a ^ b ^ c
    v0 = _mm512_ternarylogic_epi32(hi2, v1, _mm512_set1_epi32(int32_t(r0)), 0x96);
    v2 = _mm512_ternarylogic_epi32(hi0, v3, _mm512_set1_epi32(int32_t(r1)), 0x96);
    v1 = lo2;
    v3 = lo0;
  }
  const __m512i t = _mm512_set1_epi32(int32_t(threshold));
  auto keep = [&](__m512i w) { return uint64_t(_mm512_cmplt_epu32_mask(_mm512_srli_epi32(w, 8), t)); };
  return _pdep_u64(keep(v0), 0x1111111111111111u) | _pdep_u64(keep(v1), 0x2222222222222222u) |
         _pdep_u64(keep(v2), 0x4444444444444444u) | _pdep_u64(keep(v3), 0x8888888888888888u);
}

// y[i] = bit i of keep ? kept : dropped for i in [first, last) of a 64-element chunk at y.
template <typename U>
void store_chunk(U* y, uint64_t keep, int64_t first, int64_t last, U kept, U dropped) {
  const uint64_t valid = (last - first == 64 ? ~uint64_t(0) : ((uint64_t(1) << (last - first)) - 1)) << first;
  if constexpr (sizeof(U) == 2) {
    const __m512i k = _mm512_set1_epi16(int16_t(kept)), d = _mm512_set1_epi16(int16_t(dropped));
    for (int h = 0; h < 2; ++h)
      _mm512_mask_storeu_epi16(y + 32 * h, __mmask32(valid >> (32 * h)),
                               _mm512_mask_blend_epi16(__mmask32(keep >> (32 * h)), d, k));
  } else if constexpr (sizeof(U) == 4) {
    const __m512i k = _mm512_set1_epi32(int32_t(kept)), d = _mm512_set1_epi32(int32_t(dropped));
    for (int q = 0; q < 4; ++q)
      _mm512_mask_storeu_epi32(y + 16 * q, __mmask16(valid >> (16 * q)),
                               _mm512_mask_blend_epi32(__mmask16(keep >> (16 * q)), d, k));
  } else {
    const __m512i k = _mm512_set1_epi64(int64_t(kept)), d = _mm512_set1_epi64(int64_t(dropped));
    for (int q = 0; q < 8; ++q)
      _mm512_mask_storeu_epi64(y + 8 * q, __mmask8(valid >> (8 * q)),
                               _mm512_mask_blend_epi64(__mmask8(keep >> (8 * q)), d, k));
  }
}
#endif

}  // namespace

// out: contiguous [n] (any shape), floating. Element i keeps philox_uniform(seed, i) < 1 - p,
// word i % 4 of Philox block i / 4: each block is drawn once for its four elements (drawing it
// per element did the 10 rounds four times), kLanes blocks at a time across vector lanes (16
// across AVX-512 registers by philox_keep_bits where the build has them).
void dropout_mask(const Tensor& out, double p, uint64_t seed) {
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    // philox_uniform(seed, i) < keep_prob, with u = (word >> 8) * 2^-24 exact: the same test on
    // the integer (word >> 8) against ceil(keep_prob * 2^24).
    const float keep_prob = float(1.0 - p);
    const uint32_t threshold = uint32_t(std::ceil(double(keep_prob) * 16777216.0));
    const T scale = cast_to<T>(1.0 / (1.0 - p)), zero = cast_to<T>(0.0);
    const uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    // Written as the values' bits (U: an unsigned type of T's size): Eigen's 16-bit float
    // structs made the select below scalar.
    using U = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
    U* y = static_cast<U*>(out.raw_data());
    const U scale_bits = std::bit_cast<U>(scale), zero_bits = std::bit_cast<U>(zero);
    parallel_for(0, out.numel(), kParallelGrain / 8, [&](int64_t b, int64_t e) {
      // Local copies: a captured reference in the select below made GCC gather from &scale / &zero.
      const U kept = scale_bits, dropped = zero_bits;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
      for (int64_t base = (b >> 2) * 4; base < e; base += 64) {
        const uint64_t keep = philox_keep_bits(uint64_t(base >> 2), k0, k1, threshold);
        store_chunk(y + base, keep, std::max(b, base) - base, std::min(e, base + 64) - base, kept, dropped);
      }
#else
      constexpr int64_t kLanes = 16;
      uint32_t v0[kLanes], v1[kLanes], v2[kLanes], v3[kLanes];
      for (int64_t blk0 = b >> 2; blk0 * 4 < e; blk0 += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) {  // the counters: block number, then zeros
          v0[l] = uint32_t(uint64_t(blk0 + l));
          v1[l] = uint32_t(uint64_t(blk0 + l) >> 32);
          v2[l] = v3[l] = 0;
        }
        uint32_t r0 = k0, r1 = k1;
        for (int round = 0; round < 10; ++round) {  // as math::philox4x32_10, a round across the lanes
          if (round > 0) {
            r0 += math::kPhiloxW0;
            r1 += math::kPhiloxW1;
          }
#pragma omp simd
          for (int64_t l = 0; l < kLanes; ++l) math::philox_round(v0[l], v1[l], v2[l], v3[l], r0, r1);
        }
        // Words in element order (element 4 l + w is word w of lane l), then a vector loop.
        uint32_t words[4 * kLanes];
        for (int64_t l = 0; l < kLanes; ++l) {
          words[4 * l] = v0[l];
          words[4 * l + 1] = v1[l];
          words[4 * l + 2] = v2[l];
          words[4 * l + 3] = v3[l];
        }
        const int64_t base = blk0 * 4, first = std::max(b, base), last = std::min(e, base + 4 * kLanes);
#pragma omp simd
        for (int64_t i = first; i < last; ++i) y[i] = (words[i - base] >> 8) < threshold ? kept : dropped;
      }
#endif
    });
  });
}

}  // namespace mantissa::cpu
