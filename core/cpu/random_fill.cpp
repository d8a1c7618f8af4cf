// Counter-based normal and uniform fills (core/cpu/random_fill.h). Each chunk of 16 Philox
// blocks is drawn and transformed by constant-length `omp simd` loops, the last partial chunk
// through a buffer, so every element goes through the same vector code (libmvec's logf / sinf /
// cosf in a loop's body and libm's in its tail round differently) wherever it falls.
#include "core/cpu/random_fill.h"

#include <algorithm>
#include <cmath>

#include "core/cpu/loops.h"
#include "core/cpu/vector_libm.h"
#include "core/philox.h"

// libmvec's double log / sin / cos for the double normals (the float ones: vector_libm.h).
#if defined(MT_VECTOR_LIBM)
extern "C" {
__attribute__((simd("notinbranch"))) double log(double) noexcept;
__attribute__((simd("notinbranch"))) double sin(double) noexcept;
__attribute__((simd("notinbranch"))) double cos(double) noexcept;
}
#endif

namespace mantissa::cpu {

namespace {

constexpr int64_t kBlocks = 16;  // Philox blocks per chunk

// w[j][l] = word j of block b0 + l of the stream `seed`.
inline void philox_chunk(uint64_t seed, uint64_t b0, uint32_t (&w)[4][kBlocks]) {
#pragma omp simd
  for (int64_t l = 0; l < kBlocks; ++l) {
    const uint64_t blk = b0 + uint64_t(l);
    const math::Philox4 r =
        math::philox4x32_10({{uint32_t(blk), uint32_t(blk >> 32), 0u, 0u}}, uint32_t(seed), uint32_t(seed >> 32));
    w[0][l] = r.v[0];
    w[1][l] = r.v[1];
    w[2][l] = r.v[2];
    w[3][l] = r.v[3];
  }
}

// 24 bits of a word as a float in [0, 1) (exact), or in (0, 1] when `open_at_zero`.
inline float unit24(uint32_t w, bool open_at_zero) {
  return float((w >> 8) + (open_at_zero ? 1u : 0u)) * (1.0f / 16777216.0f);
}
// 53 bits of two words as a double in [0, 1) (exact), or in (0, 1].
inline double unit53(uint32_t hi, uint32_t lo, bool open_at_zero) {
  const uint64_t bits = (uint64_t(hi) << 21) ^ (lo >> 11);
  return double(bits + (open_at_zero ? 1u : 0u)) * (1.0 / 9007199254740992.0);
}

// T's elements per Philox block: 4 floats (a 24-bit uniform per word), 2 doubles (53 bits per
// two words).
template <typename T>
constexpr int64_t kPerBlock = sizeof(T) == 4 ? 4 : 2;

// One chunk's values, v[16 j + l] for block l's j-th value: whole vectors per store.
// Normals: block l's words (0, 1) give v[l] (the cosine) and v[16 + l] (the sine); for floats,
// words (2, 3) give v[32 + l] and v[48 + l]. The sine and cosine run as separate loops: as one,
// GCC fused them into a scalar sincos call.
template <typename T>
void normal_chunk(uint64_t seed, uint64_t chunk, T mean, T stddev, T* v) {
  uint32_t w[4][kBlocks];
  philox_chunk(seed, chunk * kBlocks, w);
  constexpr T kTwoPi = T(6.283185307179586476925);
  for (int64_t p = 0; p < kPerBlock<T> / 2; ++p) {
    T r[kBlocks], t[kBlocks];
#pragma omp simd
    for (int64_t l = 0; l < kBlocks; ++l) {
      T u1, u2;
      if constexpr (sizeof(T) == 4) {
        u1 = unit24(w[2 * p][l], true);
        u2 = unit24(w[2 * p + 1][l], false);
      } else {
        u1 = unit53(w[0][l], w[1][l], true);
        u2 = unit53(w[2][l], w[3][l], false);
      }
      r[l] = stddev * std::sqrt(T(-2) * std::log(u1));
      t[l] = kTwoPi * u2;
    }
    T* cosines = v + 2 * p * kBlocks;
    T* sines = cosines + kBlocks;
#pragma omp simd
    for (int64_t l = 0; l < kBlocks; ++l) cosines[l] = mean + r[l] * std::cos(t[l]);
#pragma omp simd
    for (int64_t l = 0; l < kBlocks; ++l) sines[l] = mean + r[l] * std::sin(t[l]);
  }
}

// Uniforms: v[16 j + l] from block l's j-th word (floats) or words (2 j, 2 j + 1) (doubles).
template <typename T>
void uniform_chunk(uint64_t seed, uint64_t chunk, T low, T span, T* v) {
  uint32_t w[4][kBlocks];
  philox_chunk(seed, chunk * kBlocks, w);
  for (int64_t j = 0; j < kPerBlock<T>; ++j) {
    T* out = v + j * kBlocks;
#pragma omp simd
    for (int64_t l = 0; l < kBlocks; ++l) {
      if constexpr (sizeof(T) == 4)
        out[l] = low + span * unit24(w[j][l], false);
      else
        out[l] = low + span * unit53(w[2 * j][l], w[2 * j + 1][l], false);
    }
  }
}

// chunk_fn(chunk, values) for every chunk of out's n elements, over the threads; the last
// partial chunk through a buffer.
template <typename T, typename ChunkFn>
void fill_chunks(T* out, int64_t n, ChunkFn chunk_fn) {
  constexpr int64_t kChunk = kBlocks * kPerBlock<T>;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(0, chunks, std::max<int64_t>(1, kParallelGrain / kChunk / 4), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t at = c * kChunk, m = std::min(kChunk, n - at);
      if (m == kChunk) {
        chunk_fn(uint64_t(c), out + at);
      } else {
        T buf[kChunk];
        chunk_fn(uint64_t(c), buf);
        std::copy(buf, buf + m, out + at);
      }
    }
  });
}

}  // namespace

void normal_fill(float* out, int64_t n, uint64_t seed, float mean, float stddev) {
  fill_chunks(out, n, [&](uint64_t c, float* v) { normal_chunk(seed, c, mean, stddev, v); });
}
void normal_fill(double* out, int64_t n, uint64_t seed, double mean, double stddev) {
  fill_chunks(out, n, [&](uint64_t c, double* v) { normal_chunk(seed, c, mean, stddev, v); });
}
void uniform_fill(float* out, int64_t n, uint64_t seed, float low, float high) {
  fill_chunks(out, n, [&](uint64_t c, float* v) { uniform_chunk(seed, c, low, high - low, v); });
}
void uniform_fill(double* out, int64_t n, uint64_t seed, double low, double high) {
  fill_chunks(out, n, [&](uint64_t c, double* v) { uniform_chunk(seed, c, low, high - low, v); });
}

}  // namespace mantissa::cpu
