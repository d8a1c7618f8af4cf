// CPU reductions over the last axis of a contiguous [outer, n] view, or over the columns of
// launch::reduction_rows' [outer, cols, n] view with unit-stride columns (no transposing copy). Softmax is in
// core/cpu/softmax.cpp. Reduced floats accumulate in fp32, fp64 in fp64.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/allocator.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace mantissa::cpu {

namespace {

#if defined(__AVX512F__)
constexpr bool kAvx512 = true;  // the build has the intrinsics paths below
#else
constexpr bool kAvx512 = false;
#endif

// bf16 rows are read as words of two elements (bf16_word in loops.h), like the columns below:
// widening element by element held bf16 row max and var at a quarter to a third of memcpy on
// AVX-512.
template <typename T, typename Acc>
constexpr bool kPairRows = std::is_same_v<T, BFloat16>&& std::is_same_v<Acc, float>;

// Sum of f(p[i]) over [0, n) as Acc, in blocks so that fp32 rounding error grows with log(n)
// rather than n (the blocks are vectorized partial sums added in double). A plain pointer, not a
// load callback: through a callback GCC vectorized the loads as gathers (1.2 G elements/s).
// kLanes: bf16 rows summed in kSumLanes lanes, for an f with arithmetic of its own.
template <typename Acc, bool kLanes = false, typename T, typename F>
Acc row_sum_of(const T* p, int64_t n, F f) {
  constexpr int64_t kBlock = 1024;
  double total = 0;
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t e = std::min(n, s + kBlock);
    Acc part = 0;
    if constexpr (kPairRows<T, Acc> && kLanes) {
      // kSumLanes / 2 words at a time into lanes of even and odd elements: four vector chains
      // where f's arithmetic makes each add's wait the bound (bf16 var +25 %; a plain sum, bound
      // by its loads, was 10 % slower through the lanes' memory).
      const int64_t h = (e - s) / 2;
      constexpr int64_t kWords = kSumLanes / 2;
      alignas(64) Acc acc[kSumLanes] = {};
      Acc* even = acc;
      Acc* odd = acc + kWords;
      int64_t i0 = 0;
      for (; i0 + kWords <= h; i0 += kWords) {
        const T* q = p + s + 2 * i0;
#pragma omp simd
        for (int64_t k = 0; k < kWords; ++k) {
          const uint32_t w = bf16_word(q, k);
          even[k] += f(bf16_even(w));
          odd[k] += f(bf16_odd(w));
        }
      }
      for (int64_t i = s + 2 * i0; i < e; ++i) part += f(load_acc<Acc>(p, i));
      part += add_lanes(acc);
    } else if constexpr (kPairRows<T, Acc>) {
      const int64_t h = (e - s) / 2;
      Acc even = 0, odd = 0;
#pragma omp simd reduction(+ : even, odd)
      for (int64_t i = 0; i < h; ++i) {
        const uint32_t w = bf16_word(p + s, i);
        even += f(bf16_even(w));
        odd += f(bf16_odd(w));
      }
      part = even + odd;
      if ((e - s) & 1) part += f(load_acc<Acc>(p, e - 1));
    } else if constexpr (std::is_same_v<Acc, float>) {
      part = sum_wide(p + s, e - s, f);  // 64 partial sums: one chain waited on each add (var: 30 %)
    } else {
#pragma omp simd reduction(+ : part)
      for (int64_t i = s; i < e; ++i) part += f(load_acc<Acc>(p, i));
    }
    total += double(part);
  }
  return Acc(total);
}

template <typename Acc, typename T>
Acc row_sum(const T* p, int64_t n) {
  if constexpr (std::is_integral_v<Acc>) {  // integers: exact (wrapping) sum, no double
    Acc total = 0;
    for (int64_t i = 0; i < n; ++i) total += Acc(p[i]);
    return total;
  } else {
    return row_sum_of<Acc>(p, n, [](Acc v) { return v; });
  }
}

// Sum of (p[i] - m)^2 over [0, n).
template <typename Acc, typename T>
Acc row_squared_deviation(const T* p, int64_t n, Acc m) {
  return row_sum_of<Acc, true>(p, n, [m](Acc v) {
    const Acc d = v - m;
    return d * d;
  });
}

#if defined(__AVX512F__)
// The mean and M2 (the sum of squared deviations) of a bf16 row in one read, on AVX-512: blocks
// of 1024, each summing d = x - (its first value) and d^2 in eight vector accumulators (32
// elements per 64-byte load: even ones by a shift, odd ones by a mask), merged in double by
// Chan et al.'s update. The shift is a value of its block, so the block's M2 holds at least
// (its mean - shift)^2 and the cancellation in q - s^2 / len costs at most eps * 1024 of it
// (6e-5), below a bf16 result's rounding (2e-3). A first value that is not finite shifts by 0
// (the plain sums: the var is NaN either way); the mean returned is the plain sum / n (an inf
// stays inf). The two-pass form (the sum with two add chains, then the deviations) held bf16
// row var at a third of memcpy. n >= 1.
inline void bf16_row_moments(const BFloat16* p, int64_t n, float& mean_out, float& m2_out) {
  constexpr int64_t kBlock = 1024;
  double count = 0, mean = 0, m2 = 0, sum = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    float c = load_float(p, b);
    if (!(std::fabs(c) <= std::numeric_limits<float>::max())) c = 0.0f;
    const __m512 cv = _mm512_set1_ps(c);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0, q3 = s0;
    int64_t i = b;
    for (; i + 64 <= e; i += 64) {
      __m512 ea, oa, ew, ow;
      bf16_words_as_floats(_mm512_loadu_si512(p + i), ea, oa);
      bf16_words_as_floats(_mm512_loadu_si512(p + i + 32), ew, ow);
      ea = _mm512_sub_ps(ea, cv);
      oa = _mm512_sub_ps(oa, cv);
      ew = _mm512_sub_ps(ew, cv);
      ow = _mm512_sub_ps(ow, cv);
      s0 = _mm512_add_ps(s0, ea);
      s1 = _mm512_add_ps(s1, oa);
      s2 = _mm512_add_ps(s2, ew);
      s3 = _mm512_add_ps(s3, ow);
      q0 = _mm512_fmadd_ps(ea, ea, q0);
      q1 = _mm512_fmadd_ps(oa, oa, q1);
      q2 = _mm512_fmadd_ps(ew, ew, q2);
      q3 = _mm512_fmadd_ps(ow, ow, q3);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    float q = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(q0, q1), _mm512_add_ps(q2, q3)));
    for (; i < e; ++i) {
      const float d = load_float(p, i) - c;
      s += d;
      q += d * d;
    }
    const double len = double(e - b), ds = double(s), mk = double(c) + ds / len, m2k = double(q) - ds * ds / len;
    const double total = count + len, delta = mk - mean;
    sum += double(c) * len + ds;
    mean += delta * len / total;
    m2 += m2k + delta * delta * count * len / total;
    count = total;
  }
  mean_out = float(sum / double(n));  // the plain sum's mean, as the two-pass form
  m2_out = float(m2);
}
#endif

// The index of the max (min) of p[0, n), n >= 1: the first NaN if there is one, else the first
// occurrence of the extreme. A vectorized pass finds the extreme and whether a NaN is there; a
// short scalar scan then finds its first position (only when the index is wanted).
template <typename Acc, bool kMax, typename T>
int64_t row_extreme(const T* p, int64_t n, bool want_index, Acc& value) {
  Acc best = load_acc<Acc>(p, 0);
  int nan = 0;
  if constexpr (kPairRows<T, Acc> && kAvx512) {
#if defined(__AVX512F__)
    // 32 elements per 64-byte load as words: even ones by a shift, odd ones by a mask, each into
    // its running extremes by vmaxps / vminps ((v > b) ? v : b, the select below, which GCC
    // compiled to a compare, a blend and register copies: a third of memcpy), and one unordered
    // compare of the two halves flags a NaN.
    auto pick = [](__m512 v, __m512 b) { return kMax ? _mm512_max_ps(v, b) : _mm512_min_ps(v, b); };
    __m512 e0 = _mm512_set1_ps(best), o0 = e0, e1 = e0, o1 = e0;
    __mmask16 seen = 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      __m512 ea, oa, ec, oc;
      bf16_words_as_floats(_mm512_loadu_si512(p + i), ea, oa);
      bf16_words_as_floats(_mm512_loadu_si512(p + i + 32), ec, oc);
      seen |= _mm512_cmp_ps_mask(ea, oa, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(ec, oc, _CMP_UNORD_Q);
      e0 = pick(ea, e0);
      o0 = pick(oa, o0);
      e1 = pick(ec, e1);
      o1 = pick(oc, o1);
    }
    const __m512 all = pick(pick(e1, e0), pick(o1, o0));
    best = kMax ? _mm512_reduce_max_ps(all) : _mm512_reduce_min_ps(all);
    nan = seen != 0;
    for (; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      nan |= v != v;
      best = (kMax ? v > best : v < best) ? v : best;
    }
#endif
  } else if constexpr (kPairRows<T, Acc>) {
    // Four running extremes (even/odd elements of the row's two halves of words): with two, the
    // compare-and-select chains held a bf16 row at a quarter of memcpy.
    const int64_t q = n / 4;
    const T* p2 = p + 2 * q;
    Acc b0 = best, b1 = best, b2 = best, b3 = best;
    auto better = [](Acc v, Acc b) { return kMax ? v > b : v < b; };
    if constexpr (kMax) {
#pragma omp simd reduction(max : b0, b1, b2, b3) reduction(| : nan)
      for (int64_t i = 0; i < q; ++i) {
        const uint32_t w = bf16_word(p, i), w2 = bf16_word(p2, i);
        const Acc v0 = bf16_even(w), v1 = bf16_odd(w), v2 = bf16_even(w2), v3 = bf16_odd(w2);
        nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);
        b0 = v0 > b0 ? v0 : b0;
        b1 = v1 > b1 ? v1 : b1;
        b2 = v2 > b2 ? v2 : b2;
        b3 = v3 > b3 ? v3 : b3;
      }
    } else {
#pragma omp simd reduction(min : b0, b1, b2, b3) reduction(| : nan)
      for (int64_t i = 0; i < q; ++i) {
        const uint32_t w = bf16_word(p, i), w2 = bf16_word(p2, i);
        const Acc v0 = bf16_even(w), v1 = bf16_odd(w), v2 = bf16_even(w2), v3 = bf16_odd(w2);
        nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);
        b0 = v0 < b0 ? v0 : b0;
        b1 = v1 < b1 ? v1 : b1;
        b2 = v2 < b2 ? v2 : b2;
        b3 = v3 < b3 ? v3 : b3;
      }
    }
    best = b0;  // each started from p[0]
    for (Acc b : {b1, b2, b3}) best = better(b, best) ? b : best;
    for (int64_t i = 4 * q; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      nan |= v != v;
      best = better(v, best) ? v : best;
    }
  } else if constexpr (kMax) {
#pragma omp simd reduction(max : best) reduction(| : nan)
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      nan |= v != v;
      best = v > best ? v : best;
    }
  } else {
#pragma omp simd reduction(min : best) reduction(| : nan)
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      nan |= v != v;
      best = v < best ? v : best;
    }
  }
  int64_t at = 0;
  if (nan) {
    while (load_acc<Acc>(p, at) == load_acc<Acc>(p, at)) ++at;
    value = load_acc<Acc>(p, at);
  } else {
    value = best;
    if (want_index)
      while (load_acc<Acc>(p, at) != best) ++at;
  }
  return at;
}

// n values of uninitialized scratch from the CPU's caching allocator, for the column tiles'
// partial results: as std::vectors of a few hundred KB they went to mmap on every call (glibc's
// threshold) and page-faulted back in, which halved column var over 4 M elements.
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t n)
      : bytes_(size_t(n) * sizeof(T)), data_(static_cast<T*>(allocator_for(Device::cpu())->allocate(bytes_))) {}
  ~Scratch() { allocator_for(Device::cpu())->deallocate(data_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() const { return data_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  size_t bytes_;
  T* data_;
};

// The tiles of launch::reduction_rows' [outer, cols, n] column view (strides {so, 1, ld}): slice
// o, a block of up to kColumnBlock columns, a chunk of up to kColumnChunk rows. A whole 1024-wide
// block reads each row's segment as one 4 KB run (blocks of 256 strided through memory at a
// third of the speed); the chunks give threads work when blocks are few. Each tile writes its
// partial result to its own slot, (o * chunks + k) * cols + column, and the slots combine in
// chunk order, so the result does not depend on the thread count.
constexpr int64_t kColumnBlock = 1024, kColumnChunk = 256;
struct ColumnTiles {
  int64_t outer, cols, n, ld, slice_stride, blocks, chunks;
  explicit ColumnTiles(const Tensor& in)
      : outer(in.size(0)),
        cols(in.size(1)),
        n(in.size(2)),
        ld(in.stride(2)),
        slice_stride(in.stride(0)),
        blocks((cols + kColumnBlock - 1) / kColumnBlock),
        chunks((n + kColumnChunk - 1) / kColumnChunk) {}
  int64_t slots() const { return outer * chunks * cols; }
  // fn(input offset of the tile's first element, columns, first row, rows, slot of its first column)
  template <typename Fn>
  void for_each(Fn fn) const {
    const int64_t tiles = outer * blocks * chunks;
    const int64_t tile_work = std::min(kColumnBlock, cols) * std::min(kColumnChunk, n);
    parallel_for(0, tiles, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(tile_work, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t t = b; t < e; ++t) {
                     const int64_t k = t % chunks, blk = (t / chunks) % blocks, o = t / (chunks * blocks);
                     const int64_t c0 = blk * kColumnBlock, r0 = k * kColumnChunk;
                     fn(o * slice_stride + r0 * ld + c0, std::min(kColumnBlock, cols - c0), r0,
                        std::min(kColumnChunk, n - r0), (o * chunks + k) * cols + c0);
                   }
                 });
  }
  // fn(o, first column, columns): the output columns [o * cols + c0, + nc), nc <= kOutputBlock,
  // spread over threads. A quarter of the tiles' width: less state to clear and a smaller
  // working set per merge (with the output pointers taken once, bf16 column var over
  // [1024, 1024] +12 % on one thread, +20-35 % on two, where the timings swing most).
  static constexpr int64_t kOutputBlock = kColumnBlock / 4;
  template <typename Fn>
  void for_each_output_block(Fn fn) const {
    const int64_t out_blocks = (cols + kOutputBlock - 1) / kOutputBlock;
    parallel_for(0, outer * out_blocks,
                 std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(kOutputBlock * chunks, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     const int64_t o = i / out_blocks, c0 = (i % out_blocks) * kOutputBlock;
                     fn(o, c0, std::min(kOutputBlock, cols - c0));
                   }
                 });
  }
};

// bf16 columns are read as words of two (bf16_word): widening with vpmovzxwd held bf16 column
// sums at a third of memcpy on AVX2. Column kernels
// over bf16 therefore keep their per-column state in split order: state k is column 2k for k <
// h = nc / 2, column 2(k - h) + 1 for k < 2h, and an odd last column last.
template <typename T, typename Acc>
constexpr bool kSplitColumns = std::is_same_v<T, BFloat16>&& std::is_same_v<Acc, float>;

template <typename T, typename Acc>
int64_t state_column(int64_t k, int64_t nc) {
  if constexpr (kSplitColumns<T, Acc>) {
    const int64_t h = nc / 2;
    return k < h ? 2 * k : k < 2 * h ? 2 * (k - h) + 1 : k;
  } else {
    return k;
  }
}

// How a column loop reads one part of a row (Kind 1: the even columns of split order, word i
// << 16; 2: the odd ones, word i with its low half cleared; 0: element first + i).
template <typename Acc, typename T, int Kind>
struct ColumnPart {
  int64_t first;
  Acc load(const T* row, int64_t i) const {
    if constexpr (Kind == 0) {
      return load_acc<Acc>(row, first + i);
    } else {
      const uint32_t w = bf16_word(row, i);
      return Kind == 1 ? bf16_even(w) : bf16_odd(w);
    }
  }
};

// body(count, k0, part) once per part of a row of nc columns: states [k0, k0 + count) read by
// part.load(row, i), i in [0, count). Each call runs its own vectorized loop.
template <typename Acc, typename T, typename Body>
inline void for_column_parts(int64_t nc, Body&& body) {
  if constexpr (kSplitColumns<T, Acc>) {
    const int64_t h = nc / 2;
    body(h, int64_t(0), ColumnPart<Acc, T, 1>{0});
    body(h, h, ColumnPart<Acc, T, 2>{0});
    if (nc & 1) body(int64_t(1), nc - 1, ColumnPart<Acc, T, 0>{nc - 1});
  } else {
    body(nc, int64_t(0), ColumnPart<Acc, T, 0>{0});
  }
}

#if defined(__AVX512F__)
// The bf16 column kernels' AVX-512 loop: R rows (row[r] at the columns' start) read 16 words at
// a time, their even columns (states k..k+15 of split order) by a shift and their odd ones
// (states h + k..) by a mask, one load per word: body(even, odd, k, m), m the lanes in [0, h).
// (GCC's loops read each row twice, once per part, and select by compare-and-blend: bf16
// column max and var ran at a third of memcpy.) The odd last column of an odd nc is the
// caller's.
template <int R, typename Body>
inline void for_bf16_word_vectors(const BFloat16* const (&row)[R], int64_t h, Body&& body) {
  // The full vectors with a constant mask, which the compiler turns into plain loads and stores:
  // masked ones of a full vector cost more on Zen 5 (bf16 column var +15 %, max +12 %).
  auto step = [&](int64_t k, __mmask16 m) {
    __m512 even[R], odd[R];
    for (int r = 0; r < R; ++r) bf16_words_as_floats(_mm512_maskz_loadu_epi32(m, row[r] + 2 * k), even[r], odd[r]);
    body(even, odd, k, m);
  };
  int64_t k = 0;
  for (; k + 16 <= h; k += 16) step(k, __mmask16(0xFFFF));
  if (k < h) step(k, __mmask16((1u << (h - k)) - 1));
}
#endif

// acc[k] += the sum over r in [0, rows) of p[r * ld + column k]: four rows per pass over acc,
// added pairwise before they reach it (one load and store of acc per four elements).
template <typename Acc, typename T>
void add_rows(const T* p, int64_t ld, int64_t rows, int64_t nc, Acc* acc) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T *p0 = p + r * ld, *p1 = p0 + ld, *p2 = p1 + ld, *p3 = p2 + ld;
    for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
      Acc* a = acc + k0;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i)
        a[i] += (part.load(p0, i) + part.load(p1, i)) + (part.load(p2, i) + part.load(p3, i));
    });
  }
  for (; r < rows; ++r) {
    const T* pr = p + r * ld;
    for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
      Acc* a = acc + k0;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) a[i] += part.load(pr, i);
    });
  }
}

// s[k] += the sum over r in [0, rows) of d, q[k] += that of d^2, d = p[r * ld + column k] - shift[k]:
// both moments in one read, four rows per pass as add_rows (column var's sub-chunks).
template <typename Acc, typename T>
void add_shifted_moments(const T* p, int64_t ld, int64_t rows, int64_t nc, const Acc* shift, Acc* s, Acc* q) {
  int64_t r = 0;
#if defined(__AVX512F__)
  if constexpr (kSplitColumns<T, Acc>) {
    const int64_t h = nc / 2;
    // States [at, at + 16) of s and q += the rows' deviations d from shift (d^2 for q), masked.
    auto add = [&](int64_t at, __mmask16 m, const __m512* v, auto rows_n) {
      constexpr int R = decltype(rows_n)::value;
      const __m512 c = _mm512_maskz_loadu_ps(m, shift + at);
      __m512 d[R];
      for (int j = 0; j < R; ++j) d[j] = _mm512_sub_ps(v[j], c);
      __m512 sum = d[0], sq = _mm512_mul_ps(d[0], d[0]);
      if constexpr (R == 4) {
        sum = _mm512_add_ps(_mm512_add_ps(d[0], d[1]), _mm512_add_ps(d[2], d[3]));
        sq = _mm512_add_ps(_mm512_fmadd_ps(d[1], d[1], sq), _mm512_fmadd_ps(d[3], d[3], _mm512_mul_ps(d[2], d[2])));
      }
      _mm512_mask_storeu_ps(s + at, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, s + at), sum));
      _mm512_mask_storeu_ps(q + at, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, q + at), sq));
    };
    auto last_column = [&](const T* pr) {  // an odd nc's last column, state nc - 1
      if (nc & 1) {
        const Acc d = load_acc<Acc>(pr, nc - 1) - shift[nc - 1];
        s[nc - 1] += d;
        q[nc - 1] += d * d;
      }
    };
    for (; r + 4 <= rows; r += 4) {
      const T* const rs[4] = {p + r * ld, p + (r + 1) * ld, p + (r + 2) * ld, p + (r + 3) * ld};
      for_bf16_word_vectors<4>(rs, h, [&](const __m512* even, const __m512* odd, int64_t k, __mmask16 m) {
        add(k, m, even, std::integral_constant<int, 4>{});
        add(h + k, m, odd, std::integral_constant<int, 4>{});
      });
      for (const T* pr : rs) last_column(pr);
    }
    for (; r < rows; ++r) {
      const T* const rs[1] = {p + r * ld};
      for_bf16_word_vectors<1>(rs, h, [&](const __m512* even, const __m512* odd, int64_t k, __mmask16 m) {
        add(k, m, even, std::integral_constant<int, 1>{});
        add(h + k, m, odd, std::integral_constant<int, 1>{});
      });
      last_column(rs[0]);
    }
    return;
  }
#endif
  for (; r + 4 <= rows; r += 4) {
    const T *p0 = p + r * ld, *p1 = p0 + ld, *p2 = p1 + ld, *p3 = p2 + ld;
    for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
      Acc* sk = s + k0;
      Acc* qk = q + k0;
      const Acc* c = shift + k0;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        const Acc d0 = part.load(p0, i) - c[i], d1 = part.load(p1, i) - c[i];
        const Acc d2 = part.load(p2, i) - c[i], d3 = part.load(p3, i) - c[i];
        sk[i] += (d0 + d1) + (d2 + d3);
        qk[i] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
      }
    });
  }
  for (; r < rows; ++r) {
    const T* pr = p + r * ld;
    for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
      Acc* sk = s + k0;
      Acc* qk = q + k0;
      const Acc* c = shift + k0;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) {
        const Acc d = part.load(pr, i) - c[i];
        sk[i] += d;
        qk[i] += d * d;
      }
    });
  }
}

// y[o, c] = sum over i of in[o, c, i]: per tile a vectorized fp32 (Acc) sum down its rows, the
// tiles' sums added in double, as row_sum's blocks.
template <typename T, typename Acc>
void column_sum(const Tensor& in, T* y) {
  const ColumnTiles t(in);
  const T* x = static_cast<const T*>(in.raw_data());
  // One chunk of rows: a tile's sums are the results (its slot is its output's index; the double
  // round trip is exact). Through the double slots a sum over the 4 rows of [4, 1M] moved 16 MB
  // of slots besides its 16 MB of input (1.9x PyTorch's time).
  const bool direct = t.chunks == 1;
  const Scratch<double> part(direct ? 0 : t.slots());
  t.for_each([&](int64_t xo, int64_t nc, int64_t, int64_t nr, int64_t slot) {
    Acc acc[kColumnBlock];
    std::fill(acc, acc + nc, Acc(0));
    add_rows(x + xo, t.ld, nr, nc, acc);
    if (direct) {
      for (int64_t k = 0; k < nc; ++k) store_acc(y, slot + state_column<T, Acc>(k, nc), acc[k]);
      return;
    }
    for (int64_t k = 0; k < nc; ++k) part[size_t(slot + state_column<T, Acc>(k, nc))] = double(acc[k]);
  });
  if (direct) return;
  t.for_each_output_block([&](int64_t o, int64_t c0, int64_t nc) {
    double total[ColumnTiles::kOutputBlock] = {};
    for (int64_t k = 0; k < t.chunks; ++k) {
      const double* p = part.data() + (o * t.chunks + k) * t.cols + c0;
      for (int64_t c = 0; c < nc; ++c) total[c] += p[c];
    }
    for (int64_t c = 0; c < nc; ++c) store_acc(y, o * t.cols + c0 + c, Acc(total[c]));
  });
}

// Whether the candidate v replaces the running best b: NaN wins (the first one), then the
// strictly greater (smaller) value, so ties keep the first index, as the row scan.
template <bool kMax, typename Acc>
inline bool takes(Acc v, Acc b) {
  return (b == b) & ((v != v) | (kMax ? v > b : v < b));
}

// b[k] = the max (min) of b[k] and column k of rows [1, rows) at p (b holds row 0), NaN passed
// over, the earlier value kept on ties; returns whether a NaN was seen (row 0 included).
template <typename A>
inline int is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return 0;
}

template <bool kMax, typename Acc, typename T>
bool column_extreme_values(const T* p, int64_t ld, int64_t rows, int64_t nc, Acc* b) {
  auto pick = [](Acc v, Acc cur) { return (kMax ? v > cur : v < cur) ? v : cur; };  // v later than cur
  int nan = 0;
#if defined(__AVX512F__)
  if constexpr (kSplitColumns<T, Acc>) {
    const int64_t h = nc / 2;
    // vmaxps / vminps: (v > cur) ? v : cur, pick's select in one operation.
    auto vpick = [](__m512 v, __m512 cur) { return kMax ? _mm512_max_ps(v, cur) : _mm512_min_ps(v, cur); };
    __mmask16 seen = 0;
    for (int64_t k = 0; k < nc; ++k) nan |= is_nan(b[k]);  // row 0
    auto last_column = [&](const T* pr) {
      if (nc & 1) {
        const Acc v = load_acc<Acc>(pr, nc - 1);
        nan |= is_nan(v);
        b[nc - 1] = pick(v, b[nc - 1]);
      }
    };
    int64_t r = 1;
    for (; r + 4 <= rows; r += 4) {
      const T* const rs[4] = {p + r * ld, p + (r + 1) * ld, p + (r + 2) * ld, p + (r + 3) * ld};
      for_bf16_word_vectors<4>(rs, h, [&](const __m512* e, const __m512* o, int64_t k, __mmask16 m) {
        for (int j = 0; j < 4; ++j) seen |= _mm512_cmp_ps_mask(e[j], o[j], _CMP_UNORD_Q);
        const __m512 be = _mm512_maskz_loadu_ps(m, b + k), bo = _mm512_maskz_loadu_ps(m, b + h + k);
        _mm512_mask_storeu_ps(b + k, m, vpick(vpick(vpick(e[3], e[2]), vpick(e[1], e[0])), be));
        _mm512_mask_storeu_ps(b + h + k, m, vpick(vpick(vpick(o[3], o[2]), vpick(o[1], o[0])), bo));
      });
      for (const T* pr : rs) last_column(pr);
    }
    for (; r < rows; ++r) {
      const T* const rs[1] = {p + r * ld};
      for_bf16_word_vectors<1>(rs, h, [&](const __m512* e, const __m512* o, int64_t k, __mmask16 m) {
        seen |= _mm512_cmp_ps_mask(e[0], o[0], _CMP_UNORD_Q);
        _mm512_mask_storeu_ps(b + k, m, vpick(e[0], _mm512_maskz_loadu_ps(m, b + k)));
        _mm512_mask_storeu_ps(b + h + k, m, vpick(o[0], _mm512_maskz_loadu_ps(m, b + h + k)));
      });
      last_column(rs[0]);
    }
    return nan != 0 || seen != 0;
  }
#endif
  for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto) {
    int seen = 0;
    const Acc* bk = b + k0;
#pragma omp simd reduction(| : seen)
    for (int64_t i = 0; i < count; ++i) seen |= is_nan(bk[i]);
    nan |= seen;
  });
  int64_t r = 1;
  for (; r + 4 <= rows; r += 4) {
    const T *p0 = p + r * ld, *p1 = p0 + ld, *p2 = p1 + ld, *p3 = p2 + ld;
    for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
      Acc* bk = b + k0;
      int seen = 0;
#pragma omp simd reduction(| : seen)
      for (int64_t i = 0; i < count; ++i) {
        const Acc v0 = part.load(p0, i), v1 = part.load(p1, i), v2 = part.load(p2, i), v3 = part.load(p3, i);
        seen |= is_nan(v0) | is_nan(v1) | is_nan(v2) | is_nan(v3);
        bk[i] = pick(pick(pick(v3, v2), pick(v1, v0)), bk[i]);
      }
      nan |= seen;
    });
  }
  for (; r < rows; ++r) {
    const T* pr = p + r * ld;
    for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
      Acc* bk = b + k0;
      int seen = 0;
#pragma omp simd reduction(| : seen)
      for (int64_t i = 0; i < count; ++i) {
        const Acc v = part.load(pr, i);
        seen |= is_nan(v);
        bk[i] = pick(v, bk[i]);
      }
      nan |= seen;
    });
  }
  return nan != 0;
}

// y[o, c] = the max (min) over i of in[o, c, i], or its first index (kIndex, int64 y). Per tile
// the running best is updated a whole row at a time (vectorized: bitwise conditions, int32 row
// numbers, which keep the lanes of values and indices equal); the tiles combine in order.
template <typename T, typename Acc, bool kMax, bool kIndex>
void column_extreme(const Tensor& in, void* out) {
  const ColumnTiles t(in);
  // One chunk of rows: the tiles write the results (as column_sum's; through the slots the max
  // over the 4 rows of [4, 1M] took 3x PyTorch's time).
  const bool direct = t.chunks == 1;
  const Scratch<Acc> best(direct ? 0 : t.slots());
  const Scratch<int64_t> where(kIndex && !direct ? t.slots() : 0);
  const T* x = static_cast<const T*>(in.raw_data());
  t.for_each([&](int64_t xo, int64_t nc, int64_t r0, int64_t nr, int64_t slot) {
    Acc b[kColumnBlock];
    int32_t at[kColumnBlock] = {};
    auto first_row = [&] {
      for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
        for (int64_t i = 0; i < count; ++i) b[k0 + i] = part.load(x + xo, i);
      });
    };
    auto finish = [&](const Acc* bv, const int32_t* av) {  // the tile's results to its slots
      if constexpr (!kSplitColumns<T, Acc>) {
        if (direct) {  // state k is column k: plain stores (through the loop below, scatters: 4x slower)
          if constexpr (kIndex) {
            int64_t* o = static_cast<int64_t*>(out) + slot;
            for (int64_t k = 0; k < nc; ++k) o[k] = r0 + av[k];
          } else {
            T* o = static_cast<T*>(out) + slot;
            for (int64_t k = 0; k < nc; ++k) o[k] = cast_to<T>(bv[k]);
          }
          return;
        }
      }
      for (int64_t k = 0; k < nc; ++k) {
        const size_t c = size_t(slot + state_column<T, Acc>(k, nc));
        if (direct) {  // slot c is output c
          if constexpr (kIndex)
            static_cast<int64_t*>(out)[c] = r0 + av[k];
          else
            static_cast<T*>(out)[c] = cast_to<T>(bv[k]);
          continue;
        }
        best[c] = bv[k];
        if constexpr (kIndex) where[c] = r0 + av[k];
      }
    };
    first_row();
    // The value alone: four rows per pass with plain compares (vmaxps: the earlier value kept on
    // ties, a NaN passed over) and a flag for a NaN seen; a tile holding one is scanned again in
    // the exact form below. (The exact form's three compares and a select per element, with
    // the running values loaded and stored per row, held column max at half a column sum's speed.)
    if constexpr (!kIndex) {
      if (!column_extreme_values<kMax>(x + xo, t.ld, nr, nc, b)) return finish(b, at);  // no NaN
      first_row();
    }
    for (int64_t r = 1; r < nr; ++r) {
      const T* row = x + xo + r * t.ld;
      const int32_t ri = int32_t(r);
      for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
        Acc* bk = b + k0;
        int32_t* ak = at + k0;
#pragma omp simd
        for (int64_t i = 0; i < count; ++i) {
          const Acc v = part.load(row, i), cur = bk[i];
          const bool take = takes<kMax>(v, cur);
          bk[i] = take ? v : cur;
          if constexpr (kIndex) ak[i] = take ? ri : ak[i];
        }
      });
    }
    finish(b, at);
  });
  if (direct) return;
  t.for_each_output_block([&](int64_t o, int64_t c0, int64_t nc) {
    for (int64_t c = 0; c < nc; ++c) {
      const size_t first = size_t(o * t.chunks * t.cols + c0 + c);
      Acc b = best[first];
      int64_t at = kIndex ? where[first] : 0;
      for (int64_t k = 1; k < t.chunks; ++k) {
        const size_t s = first + size_t(k * t.cols);
        if (takes<kMax>(best[s], b)) {
          b = best[s];
          if constexpr (kIndex) at = where[s];
        }
      }
      const int64_t i = o * t.cols + c0 + c;
      if constexpr (kIndex)
        static_cast<int64_t*>(out)[i] = at;
      else
        static_cast<T*>(out)[i] = cast_to<T>(b);
    }
  });
}

// The product of p[0..n) in kSumLanes partial products (four AVX-512 registers of floats: one
// vector of them waited on each multiply's latency), combined as a tree, then the tail's.
template <typename ProdAcc, typename Acc, typename T>
ProdAcc row_product(const T* p, int64_t n) {
  alignas(64) ProdAcc lanes[kSumLanes];
  std::fill(lanes, lanes + kSumLanes, ProdAcc(1));
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kSumLanes; ++k) lanes[k] *= ProdAcc(cast_to<Acc>(p[i + k]));
  }
  ProdAcc tail = 1;
  for (; i < n; ++i) tail *= ProdAcc(cast_to<Acc>(p[i]));
  for (int64_t w = kSumLanes / 2; w > 0; w /= 2) {
#pragma omp simd
    for (int64_t k = 0; k < w; ++k) lanes[k] *= lanes[k + w];
  }
  return lanes[0] * tail;
}

// in: [cols, n] with unit-stride columns; y[c] = the product over i of in[c, i], in order.
template <typename T, typename Acc>
void column_prod(const T* x, int64_t cols, int64_t n, int64_t ld, T* y) {
  for (int64_t c0 = 0; c0 < cols; c0 += kColumnBlock) {
    const int64_t nc = std::min(kColumnBlock, cols - c0);
    Acc acc[kColumnBlock];
    std::fill(acc, acc + nc, Acc(1));
    for (int64_t r = 0; r < n; ++r) {
      const T* row = x + r * ld + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) acc[c] *= cast_to<Acc>(row[c]);
    }
    for (int64_t c = 0; c < nc; ++c) y[c0 + c] = cast_to<T>(acc[c]);
  }
}

void reduce_columns(ReduceOp op, const Tensor& in, const Tensor& out) {
  const int64_t outer = in.size(0), cols = in.size(1), n = in.size(2), ld = in.stride(2);
  dispatch_all(in.dtype(), [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
    const T* x = static_cast<const T*>(in.raw_data());
    switch (op) {
      case ReduceOp::Sum:
        if constexpr (std::is_floating_point_v<Acc>) {
          column_sum<T, Acc>(in, static_cast<T*>(out.raw_data()));
        } else {  // integers: an exact (wrapping) int64 sum, as the row form
          parallel_for(0, outer * cols, kParallelGrain / std::max<int64_t>(n, 1) + 1, [&](int64_t b, int64_t e) {
            int64_t* y = static_cast<int64_t*>(out.raw_data());
            for (int64_t i = b; i < e; ++i) {
              const T* p = x + (i / cols) * in.stride(0) + i % cols;
              uint64_t acc = 0;
              for (int64_t r = 0; r < n; ++r) acc += uint64_t(int64_t(p[r * ld]));
              y[i] = int64_t(acc);
            }
          });
        }
        return;
      case ReduceOp::Prod:
        parallel_for(0, outer, 1, [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o)
            column_prod<T, Acc>(x + o * in.stride(0), cols, n, ld, static_cast<T*>(out.raw_data()) + o * cols);
        });
        return;
      case ReduceOp::Max:
        column_extreme<T, Acc, true, false>(in, out.raw_data());
        return;
      case ReduceOp::Min:
        column_extreme<T, Acc, false, false>(in, out.raw_data());
        return;
      case ReduceOp::ArgMax:
        column_extreme<T, Acc, true, true>(in, out.raw_data());
        return;
      case ReduceOp::ArgMin:
        column_extreme<T, Acc, false, true>(in, out.raw_data());
        return;
    }
  });
}

// var_mean over the columns of the [outer, cols, n] view in one read of the input. Each tile
// takes its rows in sub-chunks (kFirstRows, then kSubRows at a time), each summing the deviations
// d of its values from a shift per column, d and d^2 in one pass: mean_k = shift + sum(d) / rows,
// M2_k = sum(d^2) - sum(d)^2 / rows. The shift is the first row's value for the first
// sub-chunk (a value of the sub-chunk itself, so M2_k >= (mean_k - shift)^2 and the cancellation
// costs at most eps * kFirstRows), then the tile's mean so far (the merge's between-part term,
// rows / 2 * (mean_k - shift)^2 or more, then bounds it at about 2 eps). The two-pass form (the
// sub-chunk's mean, then its squared deviations) read the rows twice and held column var at half
// a column sum's speed, and its fp32 mean carried a rounding error into every merge (1e-4 of the
// var of a column offset by 1e4 times its spread). A column whose shift is not finite (an inf or
// NaN in it) takes 0: its var is NaN either way, its sum stays the plain sum. The sub-chunks
// merge into the tile's (count, mean, M2) in double by Chan et al.'s pairwise update; the tiles
// merge the same way in order. The mean output is the plain sum / n (an inf stays inf; the
// pairwise mean of inf and finite parts is NaN).
constexpr int64_t kFirstRows = 16, kSubRows = 64;
void var_mean_columns(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  const ColumnTiles t(in);
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using Acc = acc_t<T>;
    const T* x = static_cast<const T*>(in.raw_data());
    const Scratch<double> sums(t.slots()), means(t.slots()), m2s(t.slots());
    t.for_each([&](int64_t xo, int64_t nc, int64_t, int64_t nr, int64_t slot) {
      double sum[kColumnBlock] = {}, m[kColumnBlock] = {}, m2[kColumnBlock] = {};
      Acc s[kColumnBlock], q[kColumnBlock], shift[kColumnBlock];
      for (int64_t r0 = 0, rows = std::min(kFirstRows, nr); r0 < nr; r0 += rows, rows = std::min(kSubRows, nr - r0)) {
        const T* p = x + xo + r0 * t.ld;
        if (r0 == 0) {  // the first row's values
          for_column_parts<Acc, T>(nc, [&](int64_t count, int64_t k0, auto part) {
            for (int64_t i = 0; i < count; ++i) shift[k0 + i] = part.load(p, i);
          });
        } else {
#pragma omp simd
          for (int64_t c = 0; c < nc; ++c) shift[c] = Acc(m[c]);
        }
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) {  // a column with an inf or NaN: its var is NaN, its sum plain
          shift[c] = std::fabs(shift[c]) <= std::numeric_limits<Acc>::max() ? shift[c] : Acc(0);
          s[c] = q[c] = Acc(0);
        }
        add_shifted_moments(p, t.ld, rows, nc, shift, s, q);
        // The sub-chunk's plain sum, mean and M2 merged into the tile's.
        const double before = double(r0), w = double(rows) / double(r0 + rows), dr = double(rows), inv_dr = 1.0 / dr;
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) {
          const double ds = double(s[c]), c0 = double(shift[c]);
          const double mk = c0 + ds * inv_dr, delta = mk - m[c];
          sum[c] += c0 * dr + ds;
          m[c] += delta * w;
          m2[c] += (double(q[c]) - ds * ds * inv_dr) + delta * delta * before * w;
        }
      }
      for (int64_t k = 0; k < nc; ++k) {
        const size_t c = size_t(slot + state_column<T, Acc>(k, nc));
        sums[c] = sum[k];
        means[c] = m[k];
        m2s[c] = m2[k];
      }
    });
    const int64_t dof = t.n - correction;
    t.for_each_output_block([&](int64_t o, int64_t c0, int64_t nc) {
      double total[ColumnTiles::kOutputBlock] = {}, m[ColumnTiles::kOutputBlock] = {},
             m2[ColumnTiles::kOutputBlock] = {};
      for (int64_t k = 0; k < t.chunks; ++k) {  // chunk by chunk, vectorized over the columns
        const double* ps = sums.data() + (o * t.chunks + k) * t.cols + c0;
        const double* pm = means.data() + (o * t.chunks + k) * t.cols + c0;
        const double* pq = m2s.data() + (o * t.chunks + k) * t.cols + c0;
        const double before = double(k * kColumnChunk), rows = double(std::min(kColumnChunk, t.n - k * kColumnChunk));
        const double w = rows / (before + rows);
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) {
          const double delta = pm[c] - m[c];
          total[c] += ps[c];
          m[c] += delta * w;
          m2[c] += pq[c] + delta * delta * before * w;
        }
      }
      T* mean_out = static_cast<T*>(mean.raw_data()) + o * t.cols + c0;
      T* var_out = static_cast<T*>(var.raw_data()) + o * t.cols + c0;
      for (int64_t c = 0; c < nc; ++c) {
        mean_out[c] = cast_to<T>(Acc(total[c] / double(t.n)));
        var_out[c] = cast_to<T>(dof > 0 ? Acc(m2[c] / double(dof)) : std::numeric_limits<Acc>::quiet_NaN());
      }
    });
  });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
  if (in.dim() == 3 && in.stride(1) == 1) {  // columns (launch::reduction_rows' column view)
    reduce_columns(op, in, out);
    return;
  }
  const int64_t n = in.dim() ? in.size(-1) : 1;
  const int64_t outer = n ? in.numel() / n : out.numel();
  dispatch_all(in.dtype(), [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
    const T* x = static_cast<const T*>(in.raw_data());
    auto row = [&](int64_t r) { return x + r * n; };
    switch (op) {
      case ReduceOp::Sum: {
        using Out =
            std::conditional_t<std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> || std::is_same_v<T, int32_t>,
                               int64_t, T>;  // torch.sum of ints gives int64
        // Integers accumulate in uint64 (torch sums them in int64, wrapping; uint64 wraps
        // without undefined behaviour), floats as before.
        using SumAcc = std::conditional_t<std::is_integral_v<Out>, uint64_t, Acc>;
        Out* y = static_cast<Out*>(out.raw_data());
        if (std::is_floating_point_v<SumAcc> && outer == 1 && n > kParallelGrain) {  // one long row: split it
          std::vector<double> parts(64, 0.0);
          int64_t nchunks = std::min<int64_t>(64, (n + kParallelGrain - 1) / kParallelGrain);
          int64_t chunk = (n + nchunks - 1) / nchunks;
#pragma omp parallel for
          for (int64_t c = 0; c < nchunks; ++c) {
            int64_t s = c * chunk, e = std::min(n, s + chunk);
            parts[c] = double(row_sum<SumAcc>(x + s, e - s));
          }
          double total = 0;
          for (double p : parts) total += p;
          y[0] = cast_to<Out>(SumAcc(total));
          return;
        }
        parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t r = b; r < e; ++r) {
                         const T* p = row(r);
                         y[r] = cast_to<Out>(row_sum<SumAcc>(p, n));
                       }
                     });
        return;
      }
      case ReduceOp::Prod: {
        // Vector lanes of partial products (as PyTorch's), rows across the threads: one chain of
        // dependent multiplies ran at 16x PyTorch's time (prod over rows of [1024, 1024] fp32),
        // one vector of lanes at 1.5x (row_product: four).
        // Integers multiply as uint64, wrapping as torch's int64 product without undefined
        // behaviour, so their result does not depend on the order.
        using ProdAcc = std::conditional_t<std::is_integral_v<Acc>, uint64_t, Acc>;
        T* y = static_cast<T*>(out.raw_data());
        parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t r = b; r < e; ++r) y[r] = cast_to<T>(Acc(row_product<ProdAcc, Acc>(row(r), n)));
                     });
        return;
      }
      case ReduceOp::Max:
      case ReduceOp::Min:
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
        const bool want_index = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
        parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t r = b; r < e; ++r) {
                         Acc value;
                         const int64_t at = want_max ? row_extreme<Acc, true>(row(r), n, want_index, value)
                                                     : row_extreme<Acc, false>(row(r), n, want_index, value);
                         if (want_index)
                           static_cast<int64_t*>(out.raw_data())[r] = at;
                         else
                           static_cast<T*>(out.raw_data())[r] = cast_to<T>(value);
                       }
                     });
        return;
      }
    }
  });
}

void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  if (in.dim() == 3 && in.stride(1) == 1) {  // columns (launch::reduction_rows' column view)
    var_mean_columns(in, var, mean, correction);
    return;
  }
  const int64_t n = in.dim() ? in.size(-1) : 1;
  const int64_t outer = n ? in.numel() / n : var.numel();
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using Acc = acc_t<T>;
    const T* x = static_cast<const T*>(in.raw_data());
    T* pv = static_cast<T*>(var.raw_data());
    T* pm = static_cast<T*>(mean.raw_data());
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* p = x + r * n;
        Acc m, ss;
        if constexpr (kPairRows<T, Acc> && kAvx512) {
          if (n > 0) {
            bf16_row_moments(p, n, m, ss);
          } else {
            m = ss = std::numeric_limits<Acc>::quiet_NaN();
          }
        } else {
          m = row_sum<Acc>(p, n) / Acc(n);
          ss = row_squared_deviation<Acc>(p, n, m);
        }
        int64_t dof = n - correction;
        pm[r] = cast_to<T>(m);
        pv[r] = cast_to<T>(dof > 0 ? ss / Acc(dof) : std::numeric_limits<Acc>::quiet_NaN());
      }
    });
  });
}

}  // namespace mantissa::cpu
