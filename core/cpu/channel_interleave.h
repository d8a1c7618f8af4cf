// Three channels between planar and interleaved layouts (an RGB batch's NCHW <-> NHWC copies,
// core/cpu/elementwise.cpp): inter[3 j + c] = planar[c * cs + j]. A strided store (or load) per
// element ran at about one element per cycle (fp32 [64, 3, 32, 32] -> NHWC: 59 us); on AVX-512
// a vector of W elements from each plane becomes three interleaved vectors by two two-source
// permutes each (vpermt2d / vpermt2w), and back. Elements of 2 or 4 bytes move as bits.
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

namespace mantissa::cpu {

#if defined(__AVX512F__) && defined(__AVX512BW__)
template <typename U>
constexpr bool has_channel_interleave = sizeof(U) == 2 || sizeof(U) == 4;

// The lane indices of the two permutes that make vector k of three: `first` picks from the
// first two sources (index W + i: lane i of the second), `second` keeps its lane of that
// result or takes lane i of the third source (W + i). Interleave: the sources are the planes'
// vectors a, b, c and vector k holds positions p = k W + l, element p / 3 of plane p % 3.
// De-interleave: the sources are the interleaved vectors v0, v1, v2 and vector k is plane k,
// whose lane j is position 3 j + k, lane (3 j + k) % W of v[(3 j + k) / W].
template <typename I, int W>
struct ChannelPermutes {
  alignas(64) I first[3][W];
  alignas(64) I second[3][W];
};
template <typename I, int W, bool kInterleave>
constexpr ChannelPermutes<I, W> channel_permutes() {
  ChannelPermutes<I, W> t{};
  for (int k = 0; k < 3; ++k)
    for (int l = 0; l < W; ++l) {
      int source = 0, lane = 0;  // which of the three sources, and its lane
      if (kInterleave) {
        source = (k * W + l) % 3;
        lane = (k * W + l) / 3;
      } else {
        source = (3 * l + k) / W;
        lane = (3 * l + k) % W;
      }
      t.first[k][l] = I(source == 1 ? W + lane : (source == 0 ? lane : 0));
      t.second[k][l] = I(source == 2 ? W + lane : l);
    }
  return t;
}

// Three vectors of W lanes (u[0..2]) permuted by `t` into out[0..2].
template <typename U, int W, typename I>
inline void permute_three(const __m512i (&u)[3], const ChannelPermutes<I, W>& t, __m512i (&out)[3]) {
  for (int k = 0; k < 3; ++k) {
    const __m512i i1 = _mm512_load_si512(t.first[k]), i2 = _mm512_load_si512(t.second[k]);
    if constexpr (sizeof(U) == 4)
      out[k] = _mm512_permutex2var_epi32(_mm512_permutex2var_epi32(u[0], i1, u[1]), i2, u[2]);
    else
      out[k] = _mm512_permutex2var_epi16(_mm512_permutex2var_epi16(u[0], i1, u[1]), i2, u[2]);
  }
}

// inter[3 j + c] = planar[c * cs + j] for j < n, c < 3.
template <typename U>
void interleave_three(const U* planar, int64_t cs, U* inter, int64_t n) {
  constexpr int W = 64 / int(sizeof(U));
  using I = std::conditional_t<sizeof(U) == 4, int32_t, int16_t>;
  static constexpr ChannelPermutes<I, W> kPermutes = channel_permutes<I, W, true>();
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const __m512i u[3] = {_mm512_loadu_si512(planar + j), _mm512_loadu_si512(planar + cs + j),
                          _mm512_loadu_si512(planar + 2 * cs + j)};
    __m512i out[3];
    permute_three<U>(u, kPermutes, out);
    for (int k = 0; k < 3; ++k) _mm512_storeu_si512(inter + 3 * j + k * W, out[k]);
  }
  for (; j < n; ++j)
    for (int c = 0; c < 3; ++c) inter[3 * j + c] = planar[c * cs + j];
}

// planar[c * cs + j] = inter[3 j + c] for j < n, c < 3.
template <typename U>
void deinterleave_three(const U* inter, U* planar, int64_t cs, int64_t n) {
  constexpr int W = 64 / int(sizeof(U));
  using I = std::conditional_t<sizeof(U) == 4, int32_t, int16_t>;
  static constexpr ChannelPermutes<I, W> kPermutes = channel_permutes<I, W, false>();
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const __m512i u[3] = {_mm512_loadu_si512(inter + 3 * j), _mm512_loadu_si512(inter + 3 * j + W),
                          _mm512_loadu_si512(inter + 3 * j + 2 * W)};
    __m512i out[3];
    permute_three<U>(u, kPermutes, out);
    for (int k = 0; k < 3; ++k) _mm512_storeu_si512(planar + k * cs + j, out[k]);
  }
  for (; j < n; ++j)
    for (int c = 0; c < 3; ++c) planar[c * cs + j] = inter[3 * j + c];
}
#else
template <typename U>
constexpr bool has_channel_interleave = false;
template <typename U>
void interleave_three(const U*, int64_t, U*, int64_t) {}
template <typename U>
void deinterleave_three(const U*, U*, int64_t, int64_t) {}
#endif

}  // namespace mantissa::cpu
