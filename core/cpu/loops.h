// CPU launch helpers: dtype dispatch, compute types, an OpenMP parallel_for, and a
// strided row iterator that walks any number of broadcast/strided operands.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#if defined(__AVX512F__) || defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/dtype.h"
#include "core/dtype_dispatch.h"
#include "core/error.h"
#include "core/half.h"
#include "core/shape.h"

namespace mantissa::cpu {

// f rounded to bf16 (round to nearest even; NaN: the quiet NaN of f's sign), as Eigen's
// bfloat16(f) gives, in the top 16 bits of the result, the low 16 zero. Without a branch, so
// loops over it vectorize; all in 32-bit masks: with the NaN case as a 16-bit select GCC 12 kept
// the loop scalar and branching (a bf16 relu ran at a tenth of the fp32 one's speed).
inline uint32_t bf16_high_rne(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  const uint32_t nan = (u & 0x80000000u) | 0x7FC00000u;
  const uint32_t is_nan = uint32_t(0) - uint32_t((u & 0x7FFFFFFFu) > 0x7F800000u);
  return (nan & is_nan) | (rounded & ~is_nan);
}
// The bf16 bits of f (bf16_high_rne's top half).
inline uint16_t bf16_bits_rne(float f) { return uint16_t(bf16_high_rne(f) >> 16); }

// bf16 data read as 32-bit words of two elements: the even element is the word shifted left by
// 16, the odd one the word with its low half cleared. Two integer operations and no shuffle
// (widening element by element is a lane-crossing vpmovzxwd), for loops that vectorize over words.
template <typename T>
inline uint32_t bf16_word(const T* p, int64_t i) {  // elements 2i and 2i + 1
  uint32_t w;
  std::memcpy(&w, reinterpret_cast<const uint16_t*>(p) + 2 * i, sizeof(w));
  return w;
}
inline float bf16_even(uint32_t w) { return std::bit_cast<float>(w << 16); }
inline float bf16_odd(uint32_t w) { return std::bit_cast<float>(w & 0xFFFF0000u); }

// The CPU's fp16/bf16 conversions. bf16 goes through its bits: Eigen's constructor branches on
// NaN, which kept every loop that stores bf16 scalar.
struct Float16Convert {
  MT_HOST_DEVICE static float to_float(Half v) { return static_cast<float>(v); }
  MT_HOST_DEVICE static float to_float(BFloat16 v) {
    return std::bit_cast<float>(uint32_t(std::bit_cast<uint16_t>(v)) << 16);  // exact, vectorizes
  }
  MT_HOST_DEVICE static Half to_fp16(float f) { return Half(f); }
  MT_HOST_DEVICE static BFloat16 to_bf16(float f) { return std::bit_cast<BFloat16>(bf16_bits_rne(f)); }
};

// This device's dtype dispatch and conversions, and the dtype policy of the shared elementwise
// rules (core/elementwise_dispatch.h).
using Dtypes = DtypeDispatch<Half, BFloat16, Float16Convert>;
// The type arithmetic happens in: fp32 for every float type narrower than fp64.
template <typename T>
using acc_t = Dtypes::acc<T>;

template <typename To, typename From>
MT_HOST_DEVICE To cast_to(From v) {
  return Dtypes::cast<To>(v);
}

// Element i of p read as / written from float, for loops that must vectorize: Eigen's bf16 is
// a struct, and GCC 12 vectorizes no loop that copies one; its bits go through uint16_t.
template <typename T>
inline float load_float(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, BFloat16>)
    return std::bit_cast<float>(uint32_t(reinterpret_cast<const uint16_t*>(p)[i]) << 16);
  else
    return cast_to<float>(p[i]);
}
template <typename T>
inline void store_float(T* p, int64_t i, float v) {
  if constexpr (std::is_same_v<T, BFloat16>)
    reinterpret_cast<uint16_t*>(p)[i] = bf16_bits_rne(v);
  else
    p[i] = cast_to<T>(v);
}

// n fp16 values to float and back (round to nearest even), 16 or 8 at a time with the
// CPU's conversion instructions where the build targets them: GCC 12 vectorizes no scalar
// fp16 conversion, and Eigen's per element made fp16 autocast 5x slower than fp32.
inline void half_to_float(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
#elif defined(__F16C__)
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
#endif
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
inline void float_to_half(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i] = Half(src[i]);
}

// Element i of p as the accumulation type Acc and back (float through load_float/store_float).
template <typename Acc, typename T>
inline Acc load_acc(const T* p, int64_t i) {
  if constexpr (std::is_same_v<Acc, float>)
    return load_float(p, i);
  else
    return cast_to<Acc>(p[i]);
}
template <typename T, typename Acc>
inline void store_acc(T* p, int64_t i, Acc v) {
  if constexpr (std::is_same_v<Acc, float>)
    store_float(p, i, v);
  else
    p[i] = cast_to<T>(v);
}

// bf16 and fp16 loops run in fp32 blocks: widen, compute, round, each a separate vectorized
// loop. Converting per element in one fused loop keeps it scalar (Eigen's bf16 rounding
// branches on NaN; GCC 12 vectorizes no fp16 conversion): a bf16 relu ran 25x slower than fp32.
constexpr int64_t kAccBlock = 256;
template <typename T>
constexpr bool kBlockType = std::is_same_v<T, float> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;
// Whether a loop reading In and writing Out, computing in Acc, goes through fp32 blocks.
template <typename In, typename Out, typename Acc>
constexpr bool kUseAccBlocks = std::is_same_v<Acc, float>&& kBlockType<In>&& kBlockType<Out> &&
                               !(std::is_same_v<In, float> && std::is_same_v<Out, float>);

template <typename T>
void widen_block(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(src);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(bits[i]) << 16);
  } else if constexpr (std::is_same_v<T, Half>) {
    half_to_float(src, dst, n);
  } else {
    std::copy(src, src + n, dst);
  }
}

// n floats to bf16 bits, 16 at a time on AVX2: bf16_bits_rne's formula on 8 lanes, the two
// halves packed with one saturating pack (the values fit in 16 bits). GCC's own vectorization of
// the scalar formula took 0.33 ns per element on Zen 3, this 0.2 (AVX-512 builds keep GCC's).
inline int64_t float_to_bf16_bits_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && !defined(__AVX512F__)
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
  const __m256i sign16 = _mm256_set1_epi32(0x8000), quiet = _mm256_set1_epi32(0x7FC0);
  auto round8 = [&](__m256i u) {
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(hi, one)), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);  // signed compare: |u| < 2^31
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_and_si256(hi, sign16), quiet), is_nan);
  };
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = round8(_mm256_castps_si256(_mm256_loadu_ps(src + i)));
    const __m256i hi = round8(_mm256_castps_si256(_mm256_loadu_ps(src + i + 8)));
    // packus interleaves 128-bit lanes (lo0 hi0 lo1 hi1); the permute restores the order.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), _MM_SHUFFLE(3, 1, 2, 0)));
  }
#endif
  (void)src;
  (void)dst;
  (void)n;
  return i;
}

#if defined(__AVX512F__)
// bf16_even / bf16_odd on 16 words at once: the even elements by a shift, the odd ones by a mask
// (one operation each, no shuffle), for the AVX-512 loops over bf16 that need no element order.
inline void bf16_words_as_floats(__m512i w, __m512& even, __m512& odd) {
  even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int32_t(0xFFFF0000u))));
}
#endif

#if defined(__AVX512BF16__)
// 16 floats to bf16 bits at dst, rounding to nearest even, with one vcvtneps2bf16 (8 integer
// operations and a lane shuffle otherwise). The instruction flushes denormal inputs to zero;
// a vector holding one rounds lane by lane instead, keeping bf16's denormals as torch does.
inline void store_bf16x16(__m512 f, uint16_t* dst) {
  const __m512i u = _mm512_castps_si512(f);
  const __mmask16 denormal = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000)) &
                             _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x007FFFFF));
  if (denormal == 0) [[likely]] {
    const __m256bh r = _mm512_cvtneps_pbh(f);
    std::memcpy(dst, &r, sizeof(r));
    return;
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, f);
  for (int k = 0; k < 16; ++k) dst[k] = bf16_bits_rne(lanes[k]);
}

// 32 floats (lo: the first 16) to bf16 bits at dst: one vcvtne2ps2bf16 and one 64-byte store
// when neither vector holds a denormal (one vfpclassps each), else store_bf16x16 twice. Per 16,
// store_bf16x16's two tests, a mask and, a convert and a 32-byte store took a fifth of a bf16
// layer norm.
inline void store_bf16x32(__m512 lo, __m512 hi, uint16_t* dst) {
  if ((_mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20)) == 0) [[likely]] {
    _mm512_storeu_si512(dst, __m512i(_mm512_cvtne2ps_pbh(hi, lo)));
    return;
  }
  store_bf16x16(lo, dst);
  store_bf16x16(hi, dst + 16);
}
#endif

#if defined(__AVX512BF16__)
// 32 floats held as their even and odd elements (bf16_words_as_floats' halves) to bf16 bits at
// y in element order: one vcvtne2ps2bf16 and one vpermw, or lane by lane where one holds a
// denormal (the instruction flushes them; torch keeps them).
inline void store_bf16_even_odd(__m512 even, __m512 odd, uint16_t* y) {
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  if ((_mm512_fpclass_ps_mask(even, 0x20) | _mm512_fpclass_ps_mask(odd, 0x20)) == 0) [[likely]] {
    const __m512i packed = __m512i(_mm512_cvtne2ps_pbh(odd, even));  // even in words 0-15, odd in 16-31
    _mm512_storeu_si512(y, _mm512_permutexvar_epi16(order, packed));
    return;
  }
  alignas(64) float e[16], o[16];
  _mm512_store_ps(e, even);
  _mm512_store_ps(o, odd);
  for (int k = 0; k < 16; ++k) {
    y[2 * k] = bf16_bits_rne(e[k]);
    y[2 * k + 1] = bf16_bits_rne(o[k]);
  }
}

// bf16 -> bf16 through an AVX-512 form in registers, 32 elements per step: read as 16 words (the
// even elements by a shift, the odd ones by a mask: one operation each), f on both halves,
// rounded by one vcvtne2ps2bf16 and put back in order by one vpermw. Returns the elements done
// (a multiple of 32; the rest go through the fp32 blocks). A step whose results hold a denormal
// rounds lane by lane (the instruction flushes denormals; torch keeps them). Through the blocks
// (widen, f, round: separate passes over a buffer) the conversions took a quarter of bf16
// exp's time; this is 25-40 % faster for every bf16 op with a vector form, forward and backward.
template <typename Body>
int64_t bf16_words_in_registers(int64_t n, uint16_t* y, Body&& body) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 even, odd;
    body(i, even, odd);
    store_bf16_even_odd(even, odd, y + i);
  }
  return i;
}
#endif

template <typename T>
void narrow_block(const float* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    uint16_t* bits = reinterpret_cast<uint16_t*>(dst);
    int64_t done = float_to_bf16_bits_avx2(src, bits, n);
#if defined(__AVX512BF16__)
    for (; done + 32 <= n; done += 32)
      store_bf16x32(_mm512_loadu_ps(src + done), _mm512_loadu_ps(src + done + 16), bits + done);
    for (; done + 16 <= n; done += 16) store_bf16x16(_mm512_loadu_ps(src + done), bits + done);
#endif
#pragma omp simd
    for (int64_t i = done; i < n; ++i) bits[i] = bf16_bits_rne(src[i]);
  } else if constexpr (std::is_same_v<T, Half>) {
    float_to_half(src, dst, n);
  } else {
    std::copy(src, src + n, dst);
  }
}

// bf16 -> bf16 loops in fp32 run in one pass over words of two bf16 (bf16_word), and the results
// round back the same way (the odd one's rounded bits stay in the top half). Purely vertical
// integer operations, no buffer: fp32 blocks widened in order (vpmovzxwd) and rounded back
// (packus and a lane permute) held bf16 relu and mul at a quarter to a third of memcpy on
// AVX2; this is 1.3-1.7x faster (transcendental f: 7 % slower, within their compute bound).
template <typename In, typename Out>
constexpr bool kSplitBf16 = std::is_same_v<In, BFloat16>&& std::is_same_v<Out, BFloat16>;

// The elements map_acc hands to one `omp simd` loop of constant length: a whole number of
// vectors at any width GCC picks (4-16 floats, 2-8 doubles).
inline constexpr int64_t kSimdChunk = 16;

// in_simd_chunks' last m < W elements, through copies padded with the last one. Out of line:
// inlined, it kept the short-row callers (rows of 16 at a constant length) from inlining map_acc
// (rotate_half 15 % slower).
template <int64_t W, typename Out, typename Chunk, typename... In>
[[gnu::noinline]] void padded_simd_chunk(Chunk chunk, Out* y, int64_t m, const In*... x) {
  auto padded = [m](const auto* p) {
    std::array<std::remove_cvref_t<decltype(*p)>, W> c;
    for (int64_t j = 0; j < W; ++j) c[j] = p[std::min(j, m - 1)];
    return c;
  };
  std::array<Out, W> out;
  [&](const auto&... c) { chunk(out.data(), c.data()...); }(padded(x)...);
  std::copy(out.data(), out.data() + m, y);
}

// chunk(y, x...) (a constant-length `omp simd` loop over W elements) over [0, n): whole chunks in
// place, the rest through copies padded with its last element, so that every element goes
// through the same vector code wherever it falls. A loop over n elements runs its tail on scalar
// code, and GCC calls libmvec's vector expf / logf / sinf / tanhf / powf in a loop's body and
// the scalar libm ones in its tail, which round differently: an element's last bit depended on
// its position (sin of a transposed view differed from sin of its contiguous copy).
template <int64_t W, typename Out, typename Chunk, typename... In>
void in_simd_chunks(Chunk chunk, Out* y, int64_t n, const In*... x) {
  int64_t i = 0;
  for (; i + W <= n; i += W) chunk(y + i, (x + i)...);
  if (i < n) padded_simd_chunk<W>(chunk, y + i, n - i, (x + i)...);
}

// out[i] = f(a[i]) (or f(a[i], b[i])) for i in [0, n), computed in Acc, vectorized in simd
// chunks (in_simd_chunks): through fp32 blocks when In or Out is bf16/fp16, bf16 to bf16 by word
// pairs (kSplitBf16).
template <typename Acc, typename In, typename Out, typename F>
void map_acc(const In* a, Out* out, int64_t n, F f) {
  if constexpr (kSplitBf16<In, Out> && std::is_same_v<Acc, float>) {
    in_simd_chunks<2 * kSimdChunk>(
        [f](Out* o, const In* x) {
          uint16_t* y = reinterpret_cast<uint16_t*>(o);
#pragma omp simd
          for (int64_t i = 0; i < kSimdChunk; ++i) {
            const uint32_t w = bf16_word(x, i);
            const float e = float(f(bf16_even(w))), od = float(f(bf16_odd(w)));
            const uint32_t r = (bf16_high_rne(e) >> 16) | bf16_high_rne(od);
            std::memcpy(y + 2 * i, &r, sizeof(r));
          }
        },
        out, n, a);
  } else if constexpr (kUseAccBlocks<In, Out, Acc>) {
    alignas(64) float buf[kAccBlock];
    for (int64_t s = 0; s < n; s += kAccBlock) {
      const int64_t m = std::min(kAccBlock, n - s);
      widen_block(a + s, buf, m);
      in_simd_chunks<kSimdChunk>(
          [f](float* y, const float* x) {
#pragma omp simd
            for (int64_t i = 0; i < kSimdChunk; ++i) y[i] = float(f(x[i]));
          },
          buf, m, static_cast<const float*>(buf));
      narrow_block(buf, out + s, m);
    }
  } else {
    in_simd_chunks<kSimdChunk>(
        [f](Out* y, const In* x) {
#pragma omp simd
          for (int64_t i = 0; i < kSimdChunk; ++i) y[i] = cast_to<Out>(f(cast_to<Acc>(x[i])));
        },
        out, n, a);
  }
}
template <typename Acc, typename In, typename Out, typename F>
void map_acc(const In* a, const In* b, Out* out, int64_t n, F f) {
  if constexpr (kSplitBf16<In, Out> && std::is_same_v<Acc, float>) {
    in_simd_chunks<2 * kSimdChunk>(
        [f](Out* o, const In* xa, const In* xb) {
          uint16_t* y = reinterpret_cast<uint16_t*>(o);
#pragma omp simd
          for (int64_t i = 0; i < kSimdChunk; ++i) {
            const uint32_t wa = bf16_word(xa, i), wb = bf16_word(xb, i);
            const float e = float(f(bf16_even(wa), bf16_even(wb))), od = float(f(bf16_odd(wa), bf16_odd(wb)));
            const uint32_t r = (bf16_high_rne(e) >> 16) | bf16_high_rne(od);
            std::memcpy(y + 2 * i, &r, sizeof(r));
          }
        },
        out, n, a, b);
  } else if constexpr (kUseAccBlocks<In, Out, Acc>) {
    alignas(64) float ba[kAccBlock], bb[kAccBlock];
    for (int64_t s = 0; s < n; s += kAccBlock) {
      const int64_t m = std::min(kAccBlock, n - s);
      widen_block(a + s, ba, m);
      widen_block(b + s, bb, m);
      in_simd_chunks<kSimdChunk>(
          [f](float* y, const float* x, const float* z) {
#pragma omp simd
            for (int64_t i = 0; i < kSimdChunk; ++i) y[i] = float(f(x[i], z[i]));
          },
          ba, m, static_cast<const float*>(ba), static_cast<const float*>(bb));
      narrow_block(ba, out + s, m);
    }
  } else {
    in_simd_chunks<kSimdChunk>(
        [f](Out* y, const In* xa, const In* xb) {
#pragma omp simd
          for (int64_t i = 0; i < kSimdChunk; ++i) y[i] = cast_to<Out>(f(cast_to<Acc>(xa[i]), cast_to<Acc>(xb[i])));
        },
        out, n, a, b);
  }
}

// The sum over i in [0, n) of f(a[i]) in Acc, vectorized the same way.
template <typename Acc, typename T, typename F>
Acc sum_acc(const T* a, int64_t n, F f) {
  Acc total = 0;
  if constexpr (kUseAccBlocks<T, float, Acc>) {
    alignas(64) float buf[kAccBlock];
    for (int64_t s = 0; s < n; s += kAccBlock) {
      const int64_t m = std::min(kAccBlock, n - s);
      widen_block(a + s, buf, m);
#pragma omp simd reduction(+ : total)
      for (int64_t i = 0; i < m; ++i) total += f(buf[i]);
    }
  } else {
#pragma omp simd reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += f(cast_to<Acc>(a[i]));
  }
  return total;
}

// Calls f.template operator()<T>() with T the C++ type of `t` (core/dtype_dispatch.h).
template <typename F>
void dispatch_all(DType t, F&& f) {
  Dtypes::all(t, std::forward<F>(f));
}
template <typename F>
void dispatch_floating(DType t, const char* op, F&& f) {
  Dtypes::floating(t, op, std::forward<F>(f));
}

// Below this many elements a loop runs on one thread: fork/join costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  if (n <= grain) {
    f(begin, end);
    return;
  }
#pragma omp parallel
  {
#ifdef _OPENMP
    int nt = omp_get_num_threads(), tid = omp_get_thread_num();
#else
    int nt = 1, tid = 0;
#endif
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = begin + tid * chunk, e = std::min(end, b + chunk);
    if (b < e) f(b, e);
  }
}

// `shape` with size-1 dims dropped and adjacent dims that are contiguous with each other in
// every operand merged (at least one dim: [1] with stride 0 for a single element).
template <size_t N>
void coalesce_dims(const Shape& shape_in, const std::array<Shape, N>& strides_in, Shape& shape,
                   std::array<Shape, N>& st) {
  for (size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides_in[k][d] * shape_in[d];
    if (merge) {
      shape.back() *= shape_in[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides_in[k][d];
    } else {
      shape.push_back(shape_in[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides_in[k][d]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
}

// Walks `shape` row by row for N operands with element strides; calls
// body(offsets, inner_size, inner_strides) once per innermost row, with offsets in elements.
// Rows are spread over threads when the total work is large; `step_work`: the elements one
// step along a row stands for (for_each_short_rows' steps are whole rows).
template <size_t N, typename F>
void for_each_row(const Shape& shape_in, const std::array<Shape, N>& strides_in, F&& body, int64_t step_work = 1) {
  Shape shape;
  std::array<Shape, N> st;
  coalesce_dims(shape_in, strides_in, shape, st);
  const int64_t nd = int64_t(shape.size());
  const int64_t inner = shape.back(), row_work = inner * step_work;
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) inner_st[k] = st[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d < nd - 1; ++d) rows *= shape[d];
  // Fewer rows than threads while a row is long (operands that coalesce to one row: a where of
  // contiguous tensors, a gradient accumulated into a leaf): the rows split into pieces the
  // threads share, else one thread took the whole op.
  if (rows < 8 && row_work >= 2 * kParallelGrain) {
    const int64_t pieces = std::min(inner, row_work / kParallelGrain);
    parallel_for(0, rows * pieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t rem = t / pieces;
        std::array<int64_t, N> off{};
        for (int64_t d = nd - 2; d >= 0; --d) {
          const int64_t i = rem % shape[d];
          rem /= shape[d];
          for (size_t k = 0; k < N; ++k) off[k] += i * st[k][d];
        }
        const int64_t begin = t % pieces * inner / pieces, end = (t % pieces + 1) * inner / pieces;
        for (size_t k = 0; k < N; ++k) off[k] += begin * inner_st[k];
        body(off, end - begin, inner_st);
      }
    });
    return;
  }
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(row_work, 1));
  parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
    // The multi-index of row b by one division chain per task, then an odometer: a chain of
    // 64-bit divisions per row cost more than a short row's copy (a [B, T, H, E] -> [B, H, T, E]
    // head split moves rows of E = 32 elements). The index lives on the stack; only a layout
    // of more than 16 outer dims after coalescing (none in practice) allocates it.
    std::array<int64_t, 16> small{};
    Shape deep;
    int64_t* idx = small.data();
    if (nd - 1 > int64_t(small.size())) {
      deep.assign(size_t(nd - 1), 0);
      idx = deep.data();
    }
    std::array<int64_t, N> off{};
    int64_t rem = b;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * st[k][d];
    }
    for (int64_t r = b; r < e; ++r) {
      body(off, inner, inner_st);
      for (int64_t d = nd - 2; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += st[k][d];
        if (++idx[d] < shape[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= shape[d] * st[k][d];
        idx[d] = 0;
      }
    }
  });
}

// Walks `shape` in runs of short rows where, after coalescing, every operand's innermost dim
// has unit stride and at most max_inner elements (a narrow of the last dim: rotary embeddings'
// halves of 16-64 elements, a head split's rows): body(offsets, rows, inner, row_strides) once
// per run of `rows` rows of `inner` contiguous elements, row i at offsets + i * row_strides.
// A caller handles a run as whole blocks of rows, or row by row with the row length a
// constant, not a vector kernel's run-time set-up and tail per row. Returns false, calling
// nothing, for other layouts and for rows of no elements.
template <size_t N, typename F>
bool for_each_short_rows(const Shape& shape_in, const std::array<Shape, N>& strides_in, int64_t max_inner, F&& body) {
  Shape shape;
  std::array<Shape, N> st;
  coalesce_dims(shape_in, strides_in, shape, st);
  if (shape.size() < 2 || shape.back() > max_inner || shape.back() == 0) return false;
  for (size_t k = 0; k < N; ++k)
    if (st[k].back() != 1) return false;
  const int64_t inner = shape.back();
  shape.pop_back();
  for (size_t k = 0; k < N; ++k) st[k].pop_back();
  for_each_row<N>(
      shape, st, [&](auto off, int64_t rows, auto row_st) { body(off, rows, inner, row_st); }, inner);
  return true;
}

// Walks `shape` in runs of rows, as for_each_short_rows, for rows of any length and strides:
// body(offsets, rows, inner, row_strides, inner_strides) once per run of `rows` rows of `inner`
// elements, row i at offsets + i * row_strides. A caller dispatches on the rows' strides once
// per run and loops over its rows inline: through for_each_row's call per row, a binary op of
// rows of 256 (a mask column over [B, T, E], a narrow times a tensor) ran at 1.5-1.7x PyTorch's
// time. Returns false, calling nothing, for a layout of one row (for_each_row splits that one
// among the threads).
template <size_t N, typename F>
bool for_each_row_run(const Shape& shape_in, const std::array<Shape, N>& strides_in, F&& body) {
  Shape shape;
  std::array<Shape, N> st;
  coalesce_dims(shape_in, strides_in, shape, st);
  if (shape.size() < 2 || shape.back() == 0) return false;
  const int64_t inner = shape.back();
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) {
    inner_st[k] = st[k].back();
    st[k].pop_back();
  }
  shape.pop_back();
  for_each_row<N>(
      shape, st, [&](auto off, int64_t rows, auto row_st) { body(off, rows, inner, row_st, inner_st); }, inner);
  return true;
}

// The element types load16 reads: float, and bf16 widened through its bits.
template <typename T>
constexpr bool kLoad16Type = std::is_same_v<T, float> || std::is_same_v<T, BFloat16>;

#if defined(__AVX512F__)
// 16 elements of p as floats (masked-off lanes 0); float or bf16 (widened through its bits).
template <typename T>
inline __m512 load16(const T* p, __mmask16 m = 0xFFFF) {
  if constexpr (std::is_same_v<T, float>)
    return _mm512_maskz_loadu_ps(m, p);
  else
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(p))), 16));
}
#endif

// Row sums in kSumLanes partial sums (four AVX-512 registers of floats): a row's reduction as
// one vector add chain (`omp simd reduction`) waited on each add's latency (the fp32 layer norm
// at 40 % of memcpy, bf16 at 15 %; var over rows at 30 %).
constexpr int64_t kSumLanes = 64;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // GCC 12 flags the "undefined" operand inside _mm512_reduce_add_ps
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// acc[0] + ... + acc[kSumLanes - 1], as a tree: on AVX-512 four vectors and one in-register tree
// (GCC's loop over halving widths went scalar below 16 lanes, and a plain loop is a chain).
template <typename A>
A add_lanes(A* acc) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<A, float>) {
    const __m512 s01 = _mm512_add_ps(_mm512_load_ps(acc), _mm512_load_ps(acc + 16));
    const __m512 s23 = _mm512_add_ps(_mm512_load_ps(acc + 32), _mm512_load_ps(acc + 48));
    return _mm512_reduce_add_ps(_mm512_add_ps(s01, s23));
  }
#endif
  for (int64_t w = kSumLanes / 2; w > 0; w /= 2) {
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
  }
  return acc[0];
}

#if defined(__AVX512F__)
template <typename F>
constexpr bool kTakes16Floats = requires(F f, __m512 v) {
  _mm512_add_ps(v, f(v));
};
#endif

// sum of f(a[i]) for i < n in kSumLanes partial sums. With `copy`, a[i] (bf16/fp16 widened) is
// also written to copy[i]: a narrow row is widened in the pass that sums it.
template <typename T, typename F>
float sum_wide(const T* a, int64_t n, F f, float* copy = nullptr) {
  alignas(64) float acc[kSumLanes] = {};
  int64_t i = 0;
#if defined(__AVX512F__)
  // The same lanes in four registers when f also takes 16 floats at once (a generic lambda):
  // GCC kept the array above in memory for some f (layer norm's centred squares), and each
  // iteration then waited on a store and a reload of the sums.
  if constexpr (kLoad16Type<T> && kTakes16Floats<F>) {
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (; i + kSumLanes <= n; i += kSumLanes) {
      for (int k = 0; k < 4; ++k) {
        const __m512 v = load16(a + i + 16 * k);
        if (copy) _mm512_storeu_ps(copy + i + 16 * k, v);
        s[k] = _mm512_add_ps(s[k], f(v));
      }
    }
    for (int k = 0; k < 4; ++k) _mm512_store_ps(acc + 16 * k, s[k]);
  }
#endif
  for (; i + kSumLanes <= n; i += kSumLanes) {
    if (copy) {
#pragma omp simd
      for (int64_t k = 0; k < kSumLanes; ++k) {
        const float v = load_float(a, i + k);
        copy[i + k] = v;
        acc[k] += f(v);
      }
    } else {
#pragma omp simd
      for (int64_t k = 0; k < kSumLanes; ++k) acc[k] += f(load_float(a, i + k));
    }
  }
  float tail = 0;
  for (; i < n; ++i) {
    const float v = load_float(a, i);
    if (copy) copy[i] = v;
    tail += f(v);
  }
  return add_lanes(acc) + tail;
}

// The sums of d = a[i] - c and of d * d over i < n in one pass (kSumLanes partial sums each),
// a[i] (bf16/fp16 widened) also written to copy[i] when copy is given: a row's mean and variance
// from one read, c + s1 / n and s2 / n - (s1 / n)^2, for a c near the row's mean (layer norm
// takes the mean of the row's first 16 and falls back to centred squares where the two terms
// would cancel).
struct ShiftedSums {
  float s1, s2;
};
template <typename T>
ShiftedSums shifted_sums_wide(const T* a, int64_t n, float c, float* copy = nullptr) {
  alignas(64) float acc1[kSumLanes] = {}, acc2[kSumLanes] = {};
  int64_t i = 0;
#if defined(__AVX512F__)
  if constexpr (kLoad16Type<T>) {
    // The lanes in eight named registers: as arrays of four, GCC stored every one to the stack
    // after each step (the bf16 layer norm forward ran at two thirds of its two-pass speed).
    const __m512 vc = _mm512_set1_ps(c);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    auto step = [&](int64_t k, __m512& s1, __m512& s2) {
      const __m512 v = load16(a + k);
      if (copy) _mm512_storeu_ps(copy + k, v);
      const __m512 d = _mm512_sub_ps(v, vc);
      s1 = _mm512_add_ps(s1, d);
      s2 = _mm512_fmadd_ps(d, d, s2);
    };
    for (; i + kSumLanes <= n; i += kSumLanes) {
      step(i, a0, b0);
      step(i + 16, a1, b1);
      step(i + 32, a2, b2);
      step(i + 48, a3, b3);
    }
    _mm512_store_ps(acc1, a0);
    _mm512_store_ps(acc1 + 16, a1);
    _mm512_store_ps(acc1 + 32, a2);
    _mm512_store_ps(acc1 + 48, a3);
    _mm512_store_ps(acc2, b0);
    _mm512_store_ps(acc2 + 16, b1);
    _mm512_store_ps(acc2 + 32, b2);
    _mm512_store_ps(acc2 + 48, b3);
  }
#endif
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kSumLanes; ++k) {
      const float v = load_float(a, i + k);
      if (copy) copy[i + k] = v;
      acc1[k] += v - c;
      acc2[k] += (v - c) * (v - c);
    }
  }
  float t1 = 0, t2 = 0;
  for (; i < n; ++i) {
    const float v = load_float(a, i);
    if (copy) copy[i] = v;
    t1 += v - c;
    t2 += (v - c) * (v - c);
  }
  return {add_lanes(acc1) + t1, add_lanes(acc2) + t2};
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace mantissa::cpu
