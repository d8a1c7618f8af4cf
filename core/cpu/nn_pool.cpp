// 2-D pooling on the CPU, one input plane per task (planes spread over threads).
// Window bounds and divisors come from core/nn_math.h, shared with CUDA.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/cpu/loops.h"
#include "core/cpu/plane_loop.h"
#include "core/cpu/vec_math.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"

namespace mantissa::cpu {

namespace {

// 2x2 windows at stride 2 with no padding or dilation: every window lies inside the input.
bool is_plain_2x2(const Pool2dGeometry& g) {
  return g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1 &&
         2 * g.OH <= g.H && 2 * g.OW <= g.W;
}

// The outputs [begin, end) along one dim whose windows lie wholly inside the input (out outputs
// of windows of k taps d apart, stride s, padding p over n inputs): no clipping to compute for
// them. Padding puts the first outputs' windows over the edge, ceil mode the last ones'.
struct InsideOutputs {
  int64_t begin, end;
};
InsideOutputs inside_outputs(int64_t out, int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t begin = std::min(out, (p + s - 1) / s);  // the first o with o s - p >= 0
  const int64_t reach = n - 1 - (k - 1) * d + p;         // o s <= reach: the window ends inside
  const int64_t end = reach < 0 ? begin : std::min(out, reach / s + 1);
  return {begin, std::max(begin, end)};
}

// Row by row in output order: border(oh, ow) for each output whose window reaches past the plane
// (padding, ceil mode) and inside(oh, c0, c1, corner) for the run [c0, c1) of a row's outputs
// whose windows lie inside it (corner: the plane index of c0's window corner); where inside
// returns false, border takes those outputs too. Taps DH and DW apart.
template <typename Border, typename Inside>
void for_each_pool_row(const Pool2dGeometry& g, int64_t DH, int64_t DW, Border&& border, Inside&& inside) {
  const InsideOutputs rows = inside_outputs(g.OH, g.H, g.KH, g.SH, g.PH, DH);
  const InsideOutputs cols = inside_outputs(g.OW, g.W, g.KW, g.SW, g.PW, DW);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const bool in_rows = oh >= rows.begin && oh < rows.end;
    const int64_t c0 = in_rows ? cols.begin : g.OW, c1 = in_rows ? cols.end : g.OW;
    for (int64_t ow = 0; ow < c0; ++ow) border(oh, ow);
    if (c0 < c1 && !inside(oh, c0, c1, (oh * g.SH - g.PH) * g.W + c0 * g.SW - g.PW))
      for (int64_t ow = c0; ow < c1; ++ow) border(oh, ow);
    for (int64_t ow = c1; ow < g.OW; ++ow) border(oh, ow);
  }
}

// Outputs [0, count) of one output row of max pooling, every window inside the plane,
// vectorized across the outputs: x0 is the first output's window corner in the plane (element
// `base` of it). As the general scan (math::MaxPoolWindow): window order, the first maximum
// wins, NaN takes over. One thread, max_pool1d(kernel 2) of [16, 64, 1024] fp32: 5.8-6.7 ms
// through the general scan, whose branch on each comparison mispredicted on random data,
// 0.34-0.36 ms so (PyTorch 0.21). x0 and y may not overlap (a kernel's output is a fresh tensor).
template <typename A, typename T>
void max_pool_inside_row(const T* x0, int64_t base, T* y, int64_t* idx, int64_t count, const Pool2dGeometry& g) {
  // Window element by window element over a chunk of outputs, each step a vector loop (with
  // the window loops inside the output loop GCC kept it scalar, a branch per comparison).
  constexpr int64_t kChunk = 256;
  const int64_t SW = g.SW, KH = g.KH, KW = g.KW, W = g.W;
  A best[kChunk];
  int64_t at[kChunk];
  for (int64_t o0 = 0; o0 < count; o0 += kChunk) {
    const int64_t m = std::min(kChunk, count - o0);
    const T* xc = x0 + o0 * SW;
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) {
      best[j] = cast_to<A>(xc[j * SW]);
      at[j] = (o0 + j) * SW;
    }
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = kh == 0 ? 1 : 0; kw < KW; ++kw) {
        const int64_t off = kh * g.DH * W + kw * g.DW;
#pragma omp simd
        for (int64_t j = 0; j < m; ++j) {
          const A v = cast_to<A>(xc[j * SW + off]);
          const bool take = math::max_pool_takes(v, best[j]);
          best[j] = take ? v : best[j];
          at[j] = take ? (o0 + j) * SW + off : at[j];
        }
      }
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) {
      y[o0 + j] = cast_to<T>(best[j]);
      idx[o0 + j] = base + at[j];
    }
  }
}

// Outputs [0, n) of one output row of the 2x2 / stride 2 pool, in float: r0 and r1 are the
// two input rows, `base` the plane index of r0[0]. The running maximum of the general loop
// (math::max_pool_takes, in window order) as selects, which vectorize; as branches they
// mispredicted on real data and cost a third of a CNN training step.
template <typename In, typename Out>
inline void max_pool_2x2_row(const In* r0, const In* r1, int64_t n, int64_t base, int64_t W, Out* y, int64_t* at) {
#pragma omp simd
  for (int64_t ow = 0; ow < n; ++ow) {
    const int64_t a = base + 2 * ow;
    float m = load_float(r0, 2 * ow);
    int64_t best = a;
    const float b = load_float(r0, 2 * ow + 1), c = load_float(r1, 2 * ow), d = load_float(r1, 2 * ow + 1);
    bool t = math::max_pool_takes(b, m);
    m = t ? b : m;
    best = t ? a + 1 : best;
    t = math::max_pool_takes(c, m);
    m = t ? c : m;
    best = t ? a + W : best;
    t = math::max_pool_takes(d, m);
    m = t ? d : m;
    best = t ? a + W + 1 : best;
    store_float(y, ow, m);
    at[ow] = best;
  }
}

#if defined(__AVX512F__)
// The AVX-512 form of the 2x2 / stride 2 pool, float or bf16 (T: the loads and stores below),
// 16 outputs per step: the 32
// inputs of each of the two rows split into even and odd columns by one vpermt2ps each, the
// window scanned in max_pool_2x2_row's order with its takes (v > m or v is NaN) as masks, the
// flat positions in int32 lanes widened to int64 at the store. bf16 outputs are inputs, so
// their bits are kept (the top half of the float). GCC's loop over stride-2 loads, 8 outputs
// at a time and a padded copy for each row's rest, ran at 15 GB/s (a fifth of a CNN's step).
template <typename T>
inline void store_pool_outputs(T* p, __mmask16 m, __m512 v) {
  if constexpr (std::is_same_v<T, float>)
    _mm512_mask_storeu_ps(p, m, v);
  else
    _mm256_mask_storeu_epi16(reinterpret_cast<uint16_t*>(p), m,
                             _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
}

// 2k and 2k + 1 of the 32 lanes of (lo, hi), for k in [0, 16).
inline __m512i even_lanes() { return _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0); }
inline __m512i odd_lanes() { return _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1); }

template <typename T>
void max_pool_2x2_plane_avx512(const T* xp, T* yp, int64_t* ip, int64_t W, int64_t OH, int64_t OW) {
  const __m512i even = even_lanes(), odd = odd_lanes(),
                lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 1);
  const __m512i one = _mm512_set1_epi32(1), w = _mm512_set1_epi32(int32_t(W)), w1 = _mm512_set1_epi32(int32_t(W + 1));
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = xp + 2 * oh * W;
    const T* r1 = r0 + W;
    for (int64_t c = 0; c < OW; c += 16) {
      const int64_t n = std::min<int64_t>(16, OW - c);  // outputs; 2n inputs per row
      const __mmask16 m = __mmask16((1u << n) - 1);
      const __mmask16 m_lo = __mmask16((1u << std::min<int64_t>(16, 2 * n)) - 1);
      const __mmask16 m_hi = __mmask16((1u << std::max<int64_t>(0, 2 * n - 16)) - 1);
      auto row = [&](const T* r, __m512& e, __m512& o) {
        const __m512 lo = load16(r + 2 * c, m_lo), hi = load16(r + 2 * c + 16, m_hi);
        e = _mm512_permutex2var_ps(lo, even, hi);
        o = _mm512_permutex2var_ps(lo, odd, hi);
      };
      __m512 a, b, d, e;
      row(r0, a, b);
      row(r1, d, e);
      const __m512i first = _mm512_add_epi32(_mm512_set1_epi32(int32_t(2 * oh * W + 2 * c)), lane2);
      __m512 best = a;
      __m512i at = first;
      auto take = [&](__m512 v, __m512i pos) {
        const __mmask16 t = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        best = _mm512_mask_mov_ps(best, t, v);
        at = _mm512_mask_mov_epi32(at, t, pos);
      };
      take(b, _mm512_add_epi32(first, one));
      take(d, _mm512_add_epi32(first, w));
      take(e, _mm512_add_epi32(first, w1));
      store_pool_outputs(yp + oh * OW + c, m, best);
      int64_t* ipo = ip + oh * OW + c;
      _mm512_mask_storeu_epi64(ipo, __mmask8(m), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at)));
      _mm512_mask_storeu_epi64(ipo + 8, __mmask8(m >> 8), _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1)));
    }
  }
}

// The backward of one plane of it: each output's gradient goes to its recorded position in the
// window, zeros to the other three, written row by row as whole vectors (interleaved back by one
// vpermt2ps per 16 inputs) instead of a memset and one scattered scalar add per output. g + 0,
// as the add to the zeroed plane gives (-0 becomes +0). Positions outside every window (an odd
// H or W) are zeroed first.
template <typename T>
void max_pool_2x2_backward_plane_avx512(const T* gp, const int64_t* ip, T* xp, int64_t H, int64_t W, int64_t OH,
                                        int64_t OW) {
  if (H != 2 * OH || W != 2 * OW) std::memset(static_cast<void*>(xp), 0, size_t(H * W) * sizeof(T));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 1);
  const __m512i lo_order = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi_order = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512i one = _mm512_set1_epi32(1), w = _mm512_set1_epi32(int32_t(W)), w1 = _mm512_set1_epi32(int32_t(W + 1));
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oh = 0; oh < OH; ++oh) {
    T* r0 = xp + 2 * oh * W;
    T* r1 = r0 + W;
    for (int64_t c = 0; c < OW; c += 16) {
      const int64_t n = std::min<int64_t>(16, OW - c);
      const __mmask16 m = __mmask16((1u << n) - 1);
      const __mmask16 m_lo = __mmask16((1u << std::min<int64_t>(16, 2 * n)) - 1);
      const __mmask16 m_hi = __mmask16((1u << std::max<int64_t>(0, 2 * n - 16)) - 1);
      const __m512 g = _mm512_add_ps(load16(gp + oh * OW + c, m), zero);
      const int64_t* ipo = ip + oh * OW + c;
      const __m512i at =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(__mmask8(m), ipo))),
                             _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64(__mmask8(m >> 8), ipo + 8)), 1);
      const __m512i rel = _mm512_sub_epi32(at, _mm512_add_epi32(_mm512_set1_epi32(int32_t(2 * oh * W + 2 * c)), lane2));
      auto row = [&](T* r, __m512i even_at, __m512i odd_at) {
        const __m512 e = _mm512_mask_mov_ps(zero, _mm512_cmpeq_epi32_mask(rel, even_at), g);
        const __m512 o = _mm512_mask_mov_ps(zero, _mm512_cmpeq_epi32_mask(rel, odd_at), g);
        store_pool_outputs(r + 2 * c, m_lo, _mm512_permutex2var_ps(e, lo_order, o));
        store_pool_outputs(r + 2 * c + 16, m_hi, _mm512_permutex2var_ps(e, hi_order, o));
      };
      row(r0, _mm512_setzero_si512(), one);
      row(r1, w, w1);
    }
  }
}

// A block of up to 16 outputs of an inside row at stride 1 or 2 (the vector rows below): its
// outputs' mask, and load(p) giving element j = x[j SW] of p for each output j, by one masked
// load (stride 1) or two split by one vpermt2ps (stride 2: the 2 n - 1 inputs up to the last
// output's, no further).
struct StridedBlock {
  int64_t n, SW;
  __mmask16 m, m_lo, m_hi;
  __m512i even;
  StridedBlock(int64_t c, int64_t count, int64_t stride) : n(std::min<int64_t>(16, count - c)), SW(stride) {
    const int64_t k = 2 * n - 1;
    m = __mmask16((1u << n) - 1);
    m_lo = __mmask16((1u << std::min<int64_t>(16, k)) - 1);
    m_hi = __mmask16((1u << std::max<int64_t>(0, k - 16)) - 1);
    even = even_lanes();
  }
  template <typename T>
  __m512 load(const T* p) const {
    return SW == 1 ? load16(p, m) : _mm512_permutex2var_ps(load16(p, m_lo), even, load16(p + 16, m_hi));
  }
};

// Outputs [0, count) of an output row whose windows all lie inside the plane (max_pool_inside_row's
// case) at stride 1 or 2, float or bf16, 16 outputs per step: each tap's inputs by masked loads
// (stride 2: 32 inputs split by one vpermt2ps), the window's takes as masks in window order, the
// positions in int32 lanes widened at the store. Rows of 15 inside outputs (a 3 x 3 pool at
// stride 2 with padding 1 over 32 columns) had run the generic loops' scalar remainders.
// Returns false, writing nothing, for other strides and types (and where the build has no AVX-512).
template <typename T>
bool max_pool_inside_row_avx512(const T* x0, int64_t base, T* y, int64_t* idx, int64_t count, const Pool2dGeometry& g) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, BFloat16>) {
    return false;
  } else {
    const int64_t SW = g.SW;
    if ((SW != 1 && SW != 2) || g.H * g.W >= (int64_t(1) << 31)) return false;
    const __m512i steps = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32(int32_t(SW)));
    for (int64_t c = 0; c < count; c += 16) {
      const StridedBlock block(c, count, SW);
      const __mmask16 m = block.m;
      auto taps = [&](int64_t off) { return block.load(x0 + c * SW + off); };  // element j: x0[(c + j) SW + off]
      const __m512i first = _mm512_add_epi32(_mm512_set1_epi32(int32_t(c * SW)), steps);
      __m512 best = taps(0);
      __m512i at = first;
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = kh == 0 ? 1 : 0; kw < g.KW; ++kw) {
          const int64_t off = kh * g.DH * g.W + kw * g.DW;
          const __m512 v = taps(off);
          const __mmask16 t = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
          best = _mm512_mask_mov_ps(best, t, v);
          at = _mm512_mask_mov_epi32(at, t, _mm512_add_epi32(first, _mm512_set1_epi32(int32_t(off))));
        }
      store_pool_outputs(y + c, m, best);
      const __m512i b = _mm512_set1_epi64(base);
      _mm512_mask_storeu_epi64(idx + c, __mmask8(m),
                               _mm512_add_epi64(b, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at))));
      _mm512_mask_storeu_epi64(idx + c + 8, __mmask8(m >> 8),
                               _mm512_add_epi64(b, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1))));
    }
    return true;
  }
}

// The sums of outputs [0, count) of an average-pooling row whose windows lie inside the plane, at
// stride 1 or 2, float or bf16, 16 outputs per AVX-512 step: each tap added in window order (as
// the scalar loop adds them), then divided by `divisor`. Returns false, writing nothing, for other
// strides and types. The scalar loop per output ran a 3 x 3 pool at 1.35x PyTorch's time.
template <typename T>
bool avg_pool_inside_row_avx512(const T* x0, T* y, int64_t count, int64_t divisor, const Pool2dGeometry& g) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, BFloat16>) {
    return false;
  } else {
    const int64_t SW = g.SW;
    if (SW != 1 && SW != 2) return false;
    const __m512 d = _mm512_set1_ps(float(divisor));
    for (int64_t c = 0; c < count; c += 16) {
      const StridedBlock block(c, count, SW);
      const int64_t n = block.n;
      const __mmask16 m = block.m;
      __m512 sum = _mm512_setzero_ps();
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) sum = _mm512_add_ps(sum, block.load(x0 + c * SW + kh * g.W + kw));
      const __m512 r = _mm512_div_ps(sum, d);
      if constexpr (std::is_same_v<T, float>) {
        _mm512_mask_storeu_ps(y + c, m, r);
      } else {  // rounded as the scalar loop rounds (denormals and NaN included)
        alignas(64) float lanes[16];
        _mm512_store_ps(lanes, r);
        for (int64_t j = 0; j < n; ++j) y[c + j] = cast_to<T>(lanes[j]);
      }
    }
    return true;
  }
}

// The backward of avg_pool_inside_row_avx512's row into a float accumulator: each output's
// gradient over `divisor` added to every tap of its window, tap by tap across 16 outputs (stride 2:
// spread over 32 positions, the odd ones 0, by one vpermt2ps per 16). acc0 is the first output's
// window corner in the plane's accumulator. Returns false, adding nothing, for other strides and
// types. (Each position's terms from one row come tap by tap, not output by output as in the
// scalar loop: the same terms, added in another order.)
template <typename T>
bool avg_pool_backward_inside_row_avx512(const T* gy, float* acc0, int64_t count, int64_t divisor,
                                         const Pool2dGeometry& g) {
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, BFloat16>) {
    return false;
  } else {
    const int64_t SW = g.SW;
    if (SW != 1 && SW != 2) return false;
    const __m512i lo_order = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi_order = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    const __m512 d = _mm512_set1_ps(float(divisor)), zero = _mm512_setzero_ps();
    for (int64_t c = 0; c < count; c += 16) {
      const StridedBlock block(c, count, SW);
      const __mmask16 m = block.m, m_lo = block.m_lo, m_hi = block.m_hi;
      const __m512 v = _mm512_div_ps(load16(gy + c, m), d);
      const __m512 v_lo = _mm512_permutex2var_ps(v, lo_order, zero), v_hi = _mm512_permutex2var_ps(v, hi_order, zero);
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          float* a = acc0 + c * SW + kh * g.W + kw;
          if (SW == 1) {
            _mm512_mask_storeu_ps(a, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a), v));
          } else {
            _mm512_mask_storeu_ps(a, m_lo, _mm512_add_ps(_mm512_maskz_loadu_ps(m_lo, a), v_lo));
            _mm512_mask_storeu_ps(a + 16, m_hi, _mm512_add_ps(_mm512_maskz_loadu_ps(m_hi, a + 16), v_hi));
          }
        }
    }
    return true;
  }
}
#endif

#if !defined(__AVX512F__)
template <typename T>
bool max_pool_inside_row_avx512(const T*, int64_t, T*, int64_t*, int64_t, const Pool2dGeometry&) {
  return false;
}
template <typename T>
bool avg_pool_inside_row_avx512(const T*, T*, int64_t, int64_t, const Pool2dGeometry&) {
  return false;
}
template <typename T>
bool avg_pool_backward_inside_row_avx512(const T*, float*, int64_t, int64_t, const Pool2dGeometry&) {
  return false;
}
#endif

// One plane of the 2x2 / stride 2 pool in chunks of a fixed 8 outputs, so that no scalar
// remainder loop (branchy, and most of a row of 14 or 7) runs: the last chunk of a row is
// copied to zero-padded buffers and its extra lanes dropped.
template <typename T>
void max_pool_2x2_plane(const T* xp, T* yp, int64_t* ip, const Pool2dGeometry& g) {
  constexpr int64_t kChunk = 8;
  // Locals, not g's fields: the stores below could alias g, which kept the loop scalar.
  const int64_t W = g.W, OW = g.OW, OH = g.OH;
  const int64_t full = OW / kChunk * kChunk, rem = OW - full;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = xp + 2 * oh * W;
    const T* r1 = r0 + W;
    const int64_t base = 2 * oh * W;
    T* y = yp + oh * OW;
    int64_t* at = ip + oh * OW;
    for (int64_t c = 0; c < full; c += kChunk)
      max_pool_2x2_row(r0 + 2 * c, r1 + 2 * c, kChunk, base + 2 * c, W, y + c, at + c);
    if (rem == 0) continue;
    float t0[2 * kChunk] = {}, t1[2 * kChunk] = {}, ty[kChunk];
    int64_t tat[kChunk];
    for (int64_t i = 0; i < 2 * rem; ++i) {
      t0[i] = load_float(r0, 2 * full + i);
      t1[i] = load_float(r1, 2 * full + i);
    }
    max_pool_2x2_row(t0, t1, kChunk, base + 2 * full, W, ty, tat);
    for (int64_t i = 0; i < rem; ++i) {
      store_float(y, full + i, ty[i]);
      at[full + i] = tat[i];
    }
  }
}

}  // namespace

void max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "max_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    int64_t* I = indices.data_ptr<int64_t>();
    for_each_plane(g, g.OH * g.OW * g.KH * g.KW, [&](int64_t p) {
      const T* xp = X + p * g.H * g.W;
      T* yp = Y + p * g.OH * g.OW;
      int64_t* ip = I + p * g.OH * g.OW;
      if constexpr (std::is_same_v<A, float>) {
#if defined(__AVX512F__)
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
          if (is_plain_2x2(g) && g.H * g.W < (int64_t(1) << 31))
            return max_pool_2x2_plane_avx512(xp, yp, ip, g.W, g.OH, g.OW);
        }
#endif
        if (is_plain_2x2(g)) return max_pool_2x2_plane(xp, yp, ip, g);
      }
      // The outputs whose windows lie inside the plane by the vector row, those over the padding
      // or past the edge by the general scan (a 3 x 3 pool at stride 2 with padding 1, a ResNet
      // stem's, of [16, 64, 32, 32] fp32: 8.8 ms all by the scan, PyTorch 7.8-9.3).
      const math::MaxPoolWindow window = max_pool_window(g);
      auto scan = [&](int64_t oh, int64_t ow) {
        A bv;
        window.scan(
            oh, ow, [xp](int64_t at) { return cast_to<A>(xp[at]); }, bv, ip[oh * g.OW + ow]);
        yp[oh * g.OW + ow] = cast_to<T>(bv);
      };
      for_each_pool_row(g, g.DH, g.DW, scan, [&](int64_t oh, int64_t c0, int64_t c1, int64_t corner) {
        if (!max_pool_inside_row_avx512(xp + corner, corner, yp + oh * g.OW + c0, ip + oh * g.OW + c0, c1 - c0, g))
          max_pool_inside_row<A>(xp + corner, corner, yp + oh * g.OW + c0, ip + oh * g.OW + c0, c1 - c0, g);
        return true;
      });
    });
  });
}

// gy, indices: [N, C, OH, OW]; gx: [N, C, H, W] (overwritten). Zero but at the recorded argmax
// positions, which sum gy over every window that picked them, in (oh, ow) order as on CUDA.
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const Pool2dGeometry& g) {
  // Windows that cannot overlap (2x2 at stride 2) give each position at most one term.
  const bool disjoint = g.SH >= (g.KH - 1) * g.DH + 1 && g.SW >= (g.KW - 1) * g.DW + 1;
  dispatch_floating(gy.dtype(), "max_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* GY = gy.data_ptr<T>();
    const int64_t* I = indices.data_ptr<int64_t>();
    T* GX = gx.data_ptr<T>();
    const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
    for_each_plane(g, in_plane + out_plane, [&](int64_t p) {
      const T* gp = GY + p * out_plane;
      const int64_t* ip = I + p * out_plane;
      T* xp = GX + p * in_plane;
#if defined(__AVX512F__)
      // bf16 (0.80 -> 0.35 ms of a CNN step's two pools); fp32 keeps the memset and scalar
      // stores below, which were faster than the vector rows (0.37 vs 0.62 ms).
      if constexpr (std::is_same_v<T, BFloat16>) {
        if (is_plain_2x2(g) && in_plane < (int64_t(1) << 31))
          return max_pool_2x2_backward_plane_avx512(gp, ip, xp, g.H, g.W, g.OH, g.OW);
      }
#endif
      if (std::is_same_v<T, A> || disjoint) {
        std::memset(static_cast<void*>(xp), 0, size_t(in_plane) * sizeof(T));  // +0.0 in every float type
        for (int64_t o = 0; o < out_plane; ++o) xp[ip[o]] = cast_to<T>(cast_to<A>(xp[ip[o]]) + cast_to<A>(gp[o]));
        return;
      }
      // Overlapping windows in a 16-bit type: sum in float, round once.
      thread_local std::vector<A> acc;
      acc.assign(size_t(in_plane), A(0));
      for (int64_t o = 0; o < out_plane; ++o) acc[size_t(ip[o])] += cast_to<A>(gp[o]);
      for (int64_t i = 0; i < in_plane; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

void avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    // Windows inside the plane (divisor KH KW, or the override) by the vector row where there is
    // one; the others, clipped by the padding or the edge, by the scalar loop.
    const int64_t inside_divisor = g.divisor_override > 0 ? g.divisor_override : g.KH * g.KW;
    for_each_plane(g, g.OH * g.OW * g.KH * g.KW, [&](int64_t p) {
      const T* xp = X + p * g.H * g.W;
      T* yp = Y + p * g.OH * g.OW;
      auto scalar = [&](int64_t oh, int64_t ow) {
        auto win = math::avg_window(oh, ow, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.count_include_pad,
                                    g.divisor_override);
        A s = 0;
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) s += cast_to<A>(xp[h * g.W + w]);
        yp[oh * g.OW + ow] = cast_to<T>(win.divisor ? s / A(win.divisor) : A(0));
      };
      for_each_pool_row(g, 1, 1, scalar, [&](int64_t oh, int64_t c0, int64_t c1, int64_t corner) {
        return avg_pool_inside_row_avx512(xp + corner, yp + oh * g.OW + c0, c1 - c0, inside_divisor, g);
      });
    });
  });
}

void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  dispatch_floating(gy.dtype(), "avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* GY = gy.data_ptr<T>();
    T* GX = gx.data_ptr<T>();
    const int64_t inside_divisor = g.divisor_override > 0 ? g.divisor_override : g.KH * g.KW;
    for_each_plane(g, g.OH * g.OW * g.KH * g.KW, [&](int64_t p) {
      std::vector<A> acc(size_t(g.H * g.W), A(0));
      const T* gp = GY + p * g.OH * g.OW;
      auto scalar = [&](int64_t oh, int64_t ow) {
        auto win = math::avg_window(oh, ow, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.count_include_pad,
                                    g.divisor_override);
        if (!win.divisor) return;
        const A v = cast_to<A>(gp[oh * g.OW + ow]) / A(win.divisor);
        for (int64_t h = win.h0; h < win.h1; ++h)
          for (int64_t w = win.w0; w < win.w1; ++w) acc[size_t(h * g.W + w)] += v;
      };
      for_each_pool_row(g, 1, 1, scalar, [&](int64_t oh, int64_t c0, int64_t c1, int64_t corner) {
        if constexpr (std::is_same_v<A, float>)
          return avg_pool_backward_inside_row_avx512(gp + oh * g.OW + c0, acc.data() + corner, c1 - c0, inside_divisor,
                                                     g);
        return false;
      });
      T* xp = GX + p * g.H * g.W;
      for (int64_t i = 0; i < g.H * g.W; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

void adaptive_avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    // A 1 x 1 output (global average pooling, a classifier's head; adaptive_avg_pool1d(x, 1)):
    // each plane's sum as one vector reduction (the windowed loop below is scalar: 0.7 ns an
    // element, 1.2x PyTorch's global pooling of [32, 256, 128]).
    if (g.OH == 1 && g.OW == 1) {
      const int64_t hw = g.H * g.W;
      for_each_plane(g, hw, [&](int64_t p) {
        const T* xp = X + p * hw;
        A s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < hw; ++i) s += cast_to<A>(xp[i]);
        Y[p] = cast_to<T>(s / A(hw));
      });
      return;
    }
    for_each_plane(g, g.H * g.W, [&](int64_t p) {
      const T* xp = X + p * g.H * g.W;
      T* yp = Y + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = math::adaptive_start(oh, g.H, g.OH), h1 = math::adaptive_end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = math::adaptive_start(ow, g.W, g.OW), w1 = math::adaptive_end(ow, g.W, g.OW);
          A s = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) s += cast_to<A>(xp[h * g.W + w]);
          yp[oh * g.OW + ow] = cast_to<T>(s / A((h1 - h0) * (w1 - w0)));
        }
      }
    });
  });
}

void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  dispatch_floating(gy.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* GY = gy.data_ptr<T>();
    T* GX = gx.data_ptr<T>();
    if (g.OH == 1 && g.OW == 1) {  // each plane gy / (H W), as the windowed loop's one term
      const int64_t hw = g.H * g.W;
      for_each_plane(
          g, hw, [&](int64_t p) { std::fill(GX + p * hw, GX + (p + 1) * hw, cast_to<T>(cast_to<A>(GY[p]) / A(hw))); });
      return;
    }
    for_each_plane(g, g.H * g.W, [&](int64_t p) {
      std::vector<A> acc(size_t(g.H * g.W), A(0));
      const T* gp = GY + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = math::adaptive_start(oh, g.H, g.OH), h1 = math::adaptive_end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = math::adaptive_start(ow, g.W, g.OW), w1 = math::adaptive_end(ow, g.W, g.OW);
          const A v = cast_to<A>(gp[oh * g.OW + ow]) / A((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) acc[size_t(h * g.W + w)] += v;
        }
      }
      T* xp = GX + p * g.H * g.W;
      for (int64_t i = 0; i < g.H * g.W; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

}  // namespace mantissa::cpu
