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
// Philox4x32-10 of the 16 blocks blk0 .. blk0 + 15, and the keep test of their 64 words: bit
// 4 l + w of the result is (word w of block l) >> 8 < threshold. Each word of a block lives in
// the low half of a 64-bit lane (8 blocks per register, two sets), so that one vpmuludq gives a
// round's whole 32 x 32 -> 64-bit product: its high half shifted down, its low half used in
// place (the high halves of the lanes carry junk that vpmuludq never reads). 6 operations per
// 8 blocks and round; with 16 blocks across 32-bit lanes a round took two vpmuludq, shifts and a
// blend for the high halves and a vpmulld for the low ones (about 8). GCC's vectorization of
// math::philox_round widened every word to 64 bits and multiplied with vpmullq among permutes
// (1.3 ns per element).
// (GCC 12 reports the "undefined" operand inside its own srli/mul_epu32 intrinsics as
// uninitialized: a false warning, silenced here only.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
inline uint64_t philox_keep_bits(uint64_t blk0, uint32_t k0, uint32_t k1, uint32_t threshold) {
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
  __m512i v0[2], v1[2], v2[2], v3[2];
  for (int h = 0; h < 2; ++h) {  // the counter: the 64-bit block number, then zeros
    const __m512i blk =
        _mm512_add_epi64(_mm512_set1_epi64(int64_t(blk0 + 8 * h)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    v0[h] = blk;
    v1[h] = _mm512_srli_epi64(blk, 32);
    v2[h] = v3[h] = _mm512_setzero_si512();
  }
  uint32_t r0 = k0, r1 = k1;
  for (int round = 0; round < 10; ++round) {  // as math::philox4x32_10
    if (round > 0) {
      r0 += math::kPhiloxW0;
      r1 += math::kPhiloxW1;
    }
    const __m512i key0 = _mm512_set1_epi64(r0), key1 = _mm512_set1_epi64(r1);
    for (int h = 0; h < 2; ++h) {
      const __m512i p0 = _mm512_mul_epu32(v0[h], m0), p2 = _mm512_mul_epu32(v2[h], m1);
      // 0x96: a ^ b ^ c
      v0[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p2, 32), v1[h], key0, 0x96);
      v2[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), v3[h], key1, 0x96);
      v1[h] = p2;
      v3[h] = p0;
    }
  }
  // The words' low halves against the threshold: bit 2 l of a compare is block l's (even
  // 32-bit lanes only), gathered by pext and spread to bits 4 l + w by pdep.
  const __m512i t = _mm512_set1_epi32(int32_t(threshold));
  uint64_t keep = 0;
  for (int h = 0; h < 2; ++h) {
    const __m512i words[4] = {v0[h], v1[h], v2[h], v3[h]};
    for (int w = 0; w < 4; ++w) {
      const uint32_t bits = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(words[w], 8), t);
      keep |= _pdep_u64(_pext_u32(bits, 0x5555u), 0x11111111ull << (32 * h + w));
    }
  }
  return keep;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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
