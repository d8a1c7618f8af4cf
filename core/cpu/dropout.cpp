// Dropout on the CPU: the counter-based draw of core/philox.h, shared with CUDA, applied to x in
// the pass that draws it; the keep bits saved for backward.
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
// Philox4x32-10 of the 16 Words blocks from blk0, and the keep test of their words: bit 4 l + w
// of keep[q] is (word w of block 16 q + l) >> 8 < threshold. Each word of a block lives in
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
// Two words (32 blocks) at a time: a round's multiply, shift and xor are a chain of about 7
// cycles, and one word's two sets of 8 blocks left the vector units idle between rounds (fp32
// and bf16 dropout +17-19 %; four words at once spill registers and gain less).
template <int Words>
inline void philox_keep_bits(uint64_t blk0, uint32_t k0, uint32_t k1, uint32_t threshold, uint64_t* keep) {
  constexpr int kSets = 2 * Words;
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53), m1 = _mm512_set1_epi64(0xCD9E8D57);
  __m512i v0[kSets], v1[kSets], v2[kSets], v3[kSets];
  for (int h = 0; h < kSets; ++h) {  // the counter: the 64-bit block number, then zeros
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
    for (int h = 0; h < kSets; ++h) {
      const __m512i p0 = _mm512_mul_epu32(v0[h], m0), p2 = _mm512_mul_epu32(v2[h], m1);
      // 0x96: a ^ b ^ c
      v0[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p2, 32), v1[h], key0, 0x96);
      v2[h] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), v3[h], key1, 0x96);
      v1[h] = p2;
      v3[h] = p0;
    }
  }
  // The words' low halves in element order, then against the threshold: per set, vpermt2d puts
  // words 0 and 1 (2 and 3) of each block side by side, vpermt2q interleaves those pairs into
  // blocks 0-3 and 4-7, dword 4 l + w = word w of block l; one compare per 16 elements. (A
  // compare per word, its even bits gathered by pext and spread by pdep, was 48 operations per
  // set against these 8.)
  const __m512i t = _mm512_set1_epi32(int32_t(threshold));
  const __m512i pairs = _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
  const __m512i lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  for (int q = 0; q < Words; ++q) {
    keep[q] = 0;
    for (int h = 0; h < 2; ++h) {
      const int set = 2 * q + h;
      const __m512i w01 = _mm512_permutex2var_epi32(v0[set], pairs, v1[set]);
      const __m512i w23 = _mm512_permutex2var_epi32(v2[set], pairs, v3[set]);
      const __m512i first = _mm512_permutex2var_epi64(w01, lo, w23), second = _mm512_permutex2var_epi64(w01, hi, w23);
      const uint64_t bits = uint64_t(_mm512_cmplt_epu32_mask(_mm512_srli_epi32(first, 8), t)) |
                            uint64_t(_mm512_cmplt_epu32_mask(_mm512_srli_epi32(second, 8), t)) << 16;
      keep[q] |= bits << (32 * h);
    }
  }
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

// The keep bits of elements [c, c + 128) (c % 64 == 0) in keep[0] and keep[1]: bit k of keep[q]
// is element c + 64 q + k's philox_uniform(seed, .) < 1 - p, as integers: (word >> 8) < threshold
// = ceil((1 - p) 2^24). Element i is word i % 4 of Philox block i / 4, each block drawn once for
// its four elements; 32 blocks across AVX-512 registers by philox_keep_bits where the build has them.
void keep_word_pair(int64_t c, uint32_t k0, uint32_t k1, uint32_t threshold, uint64_t* keep) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
  philox_keep_bits<2>(uint64_t(c >> 2), k0, k1, threshold, keep);
#else
  constexpr int64_t kLanes = 16;  // 16 blocks: 64 elements
  for (int q = 0; q < 2; ++q) {
    uint32_t v0[kLanes], v1[kLanes], v2[kLanes], v3[kLanes];
    const int64_t blk0 = (c + 64 * q) >> 2;
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
    keep[q] = 0;
    for (int64_t l = 0; l < kLanes; ++l) {
      const uint32_t words[4] = {v0[l], v1[l], v2[l], v3[l]};
      for (int w = 0; w < 4; ++w) keep[q] |= uint64_t((words[w] >> 8) < threshold) << (4 * l + w);
    }
  }
#endif
}

// m[k] = bit k of keep ? kept : dropped for k < count (<= 64); kept and dropped are T's bits
// (U), written by vector stores on AVX-512 and as T values otherwise (never U stores read as T).
template <typename T, typename U>
void expand_keep(T* m, uint64_t keep, int64_t count, U kept, U dropped) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
  store_chunk(reinterpret_cast<U*>(m), keep, 0, count, kept, dropped);
#else
  const T k = std::bit_cast<T>(kept), d = std::bit_cast<T>(dropped);
  for (int64_t i = 0; i < count; ++i) m[i] = (keep >> i) & 1 ? k : d;
#endif
}

// y[k] = x[k] * m[k] for k < len (<= kChunk) of a chunk whose keep bits are keep[k / 64]; m[k]
// = keep ? kept : dropped, the product as the binary mul computes it. bf16 on AVX512-BF16: 32
// elements per step in registers (even and odd words, blended scale, one rounding; the binary
// mul's own form), else the mask into buf and map_acc (the mul's loop).
template <typename T, typename U>
void multiply_chunk(const T* x, T* y, int64_t len, const uint64_t* keep, T* buf, U kept, U dropped) {
  using A = acc_t<T>;
  int64_t done = 0;
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__BMI2__)
  if constexpr (std::is_same_v<T, BFloat16>) {
    const __m512 scale = _mm512_set1_ps(float(std::bit_cast<T>(kept))),
                 zero = _mm512_set1_ps(float(std::bit_cast<T>(dropped)));
    done = bf16_words_in_registers(len, reinterpret_cast<uint16_t*>(y), [&](int64_t i, __m512& even, __m512& odd) {
      __m512 xe, xo;
      bf16_words_as_floats(_mm512_loadu_si512(x + i), xe, xo);
      const uint32_t k = uint32_t(keep[i / 64] >> (i % 64));  // i % 32 == 0
      even = _mm512_mul_ps(xe, _mm512_mask_blend_ps(__mmask16(_pext_u32(k, 0x55555555u)), zero, scale));
      odd = _mm512_mul_ps(xo, _mm512_mask_blend_ps(__mmask16(_pext_u32(k, 0xAAAAAAAAu)), zero, scale));
    });
  }
#endif
  if (done == len) return;
  for (int64_t c = done / 64 * 64; c < len; c += 64)
    expand_keep(buf + c, keep[c / 64], std::min<int64_t>(64, len - c), kept, dropped);
  map_acc<A>(x + done, buf + done, y + done, len - done, [](A u, A v) { return u * v; });
}

// Runs body(chunk_begin, chunk_end, mask buffer, kept, dropped) over the 256-element chunks of
// [0, n), whole chunks per thread (so that each thread owns whole words of keep bits); kept and
// dropped are the bits of T(1 / (1 - p)) and T(0).
constexpr int64_t kChunk = 256;
template <typename T, typename F>
void for_each_chunk(int64_t n, double p, F&& body) {
  using U = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  // Written as the values' bits: Eigen's 16-bit float structs made the selects scalar.
  const U scale_bits = std::bit_cast<U>(cast_to<T>(1.0 / (1.0 - p))), zero_bits = std::bit_cast<U>(cast_to<T>(0.0));
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(0, chunks, std::max<int64_t>(1, kParallelGrain / 8 / kChunk), [&](int64_t cb, int64_t ce) {
    // Local copies: a captured reference in the selects made GCC gather from memory.
    const U kept = scale_bits, dropped = zero_bits;
    alignas(64) T buf[kChunk];
    for (int64_t c = cb; c < ce; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk), buf, kept, dropped);
  });
}

}  // namespace

// out = x * m (or m), m[i] = keep_i ? scale : 0 drawn 64 elements at a time; with x, each
// chunk's m stays in registers or a stack buffer and is multiplied as the binary mul does
// (multiply_chunk), so m never reaches memory. keep_bits (optional): word i / 64, bit i % 64.
void dropout(const Tensor& x_in, const Tensor& out, const Tensor& keep_bits, double p, uint64_t seed) {
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    const uint32_t threshold = uint32_t(std::ceil(double(float(1.0 - p)) * 16777216.0));
    const uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    const T* x = x_in.defined() ? static_cast<const T*>(x_in.raw_data()) : nullptr;
    T* y = static_cast<T*>(out.raw_data());
    uint64_t* bits = keep_bits.defined() ? static_cast<uint64_t*>(keep_bits.raw_data()) : nullptr;
    for_each_chunk<T>(out.numel(), p, [&](int64_t b, int64_t e, auto* buf, auto kept, auto dropped) {
      uint64_t keep[kChunk / 64];
      for (int64_t c = b; c < e; c += 128) {  // two words at a time (past e: drawn, not used)
        keep_word_pair(c, k0, k1, threshold, keep + (c - b) / 64);
        for (int64_t cq = c; cq < std::min(e, c + 128); cq += 64) {
          const int64_t count = std::min<int64_t>(64, e - cq);
          uint64_t& word = keep[(cq - b) / 64];
          word &= count == 64 ? ~uint64_t(0) : (uint64_t(1) << count) - 1;
          if (bits) bits[cq / 64] = word;
          if (!x) expand_keep(y + cq, word, count, kept, dropped);
        }
      }
      if (x) multiply_chunk(x + b, y + b, e - b, keep, buf, kept, dropped);
    });
  });
}

// out = g * m for the m whose keep bits dropout wrote.
void dropout_backward(const Tensor& g, const Tensor& keep_bits, const Tensor& out, double p) {
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    const T* gp = static_cast<const T*>(g.raw_data());
    T* y = static_cast<T*>(out.raw_data());
    const uint64_t* bits = static_cast<const uint64_t*>(keep_bits.raw_data());
    for_each_chunk<T>(out.numel(), p, [&](int64_t b, int64_t e, auto* buf, auto kept, auto dropped) {
      multiply_chunk(gp + b, y + b, e - b, bits + b / 64, buf, kept, dropped);
    });
  });
}

}  // namespace mantissa::cpu
