// CPU softmax / log_softmax along the middle dim of a contiguous [outer, n, inner] view,
// forward and backward, without a transposing copy: with inner == 1 a task walks its rows
// software-pipelined (softmax of rows of 128-2048 on AVX-512) or in groups, phase by phase
// across the group; otherwise it walks a block of kCols adjacent columns down the n dim,
// vectorized across them (a whole block of kCols with a float or bf16 output in registers:
// softmax_column_block).
// fp32 math takes its exps from vec_math.h's exp16 forms (exp_floats over a row or a column
// block of differences x - max, or inline in the AVX-512 kernels); the general loops are `omp
// simd` loops that read bf16 through its bits, so a bf16 input feeding the fp32 softmax of
// autocast is widened on the way (double: libm's exp). The backward of rows and whole column
// blocks has AVX-512 kernels too (softmax_backward_row_avx512, softmax_backward_column_block).
// log_softmax is (x - max) - log(sum): x - (max + log(sum)) loses log(sum) for huge logits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/vec_math.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"

namespace mantissa::cpu {

namespace {

constexpr int64_t kCols = 128;                        // columns per task when softmax runs along a non-last dim
constexpr int64_t kRowBuffer = 4096;                  // rows up to this long keep their exps on the stack (16 KiB)
constexpr int64_t kColumnBuffer = 32768;              // a column block's exps for a narrow output (128 KiB, per thread)
constexpr int64_t kRowGroup = 8;                      // short rows go through each phase this many at a time
constexpr int64_t kPrefetchBytes = int64_t(8) << 20;  // inputs this large come from memory, not cache

struct SoftmaxDims {
  int64_t outer = 0, n = 0, inner = 1;
};

// [outer, n] or [outer, n, inner].
SoftmaxDims softmax_dims(const Tensor& t) {
  SoftmaxDims d;
  d.n = t.size(1);
  d.inner = t.dim() == 3 ? t.size(2) : 1;
  d.outer = t.size(0);
  return d;
}

// Runs body(o, c0, nc) over every (outer index, column block) on the pool; nc == 1 and c0 == 0
// when inner == 1.
template <typename F>
void for_each_block(const SoftmaxDims& d, F body) {
  const int64_t blocks = d.inner == 1 ? 1 : (d.inner + kCols - 1) / kCols;
  const int64_t per_task = d.n * std::min(d.inner, kCols);
  parallel_for(0, d.outer * blocks, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_task, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t o = t / blocks, c0 = (t - o * blocks) * kCols;
                   body(o, c0, d.inner == 1 ? int64_t(1) : std::min(kCols, d.inner - c0));
                 }
               });
}

// Asks for the cache lines of [p, p + bytes) ahead of use: a group's first phase reads its rows
// in one burst, which from DRAM the hardware prefetcher does not cover (4M fp32 rows: -10 %
// without this). Lines past the tensor's end are harmless: a prefetch does not fault.
inline void prefetch_lines(const void* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(static_cast<const char*>(p) + b);
}

// From the column block (o, c0) of for_each_block to the next one (the next task's), in
// elements, for the block kernels to prefetch its rows while they work on theirs; 0 for the last
// block and for inputs under kPrefetchBytes. From memory (8 MiB and more) a block's 512-byte row
// segments, a row apart, came in at two thirds of the speed the same block has from cache (fp32
// [64, 256, 256] along dim 1, one thread: +20 % with the prefetches); from cache the prefetches
// only cost (-5 % at 4 MiB).
inline int64_t next_block_offset(const SoftmaxDims& d, int64_t o, int64_t c0, size_t element_bytes) {
  const int64_t numel = d.outer * d.n * d.inner;
  if (numel * int64_t(element_bytes) < kPrefetchBytes) return 0;
  if (c0 + kCols < d.inner) return kCols;
  return o + 1 < d.outer ? d.n * d.inner - c0 : 0;
}

// With inner == 1: runs body(offset of the first row, rows) over groups of up to kRowGroup rows
// (fewer where kRowGroup rows would not fit kRowBuffer floats) on the pool.
template <typename F>
void for_each_row_group(const SoftmaxDims& d, F body) {
  const int64_t per = std::clamp<int64_t>(kRowBuffer / d.n, 1, kRowGroup), groups = (d.outer + per - 1) / per;
  parallel_for(0, groups, std::max<int64_t>(1, kParallelGrain / (d.n * per)), [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) body(g * per * d.n, std::min(per, d.outer - g * per));
  });
}

// Whether a kernel whose tensors are all of types Ts reads and writes them as bf16 word halves
// (load_vectors / store_vectors with Split): only when every one is bf16, so that the halves'
// order never meets an fp32 tensor's element order.
template <typename... Ts>
constexpr bool word_halves() {
  return (std::is_same_v<Ts, BFloat16> && ...);
}

#if defined(__AVX512F__)
// 16 V elements of p as V vectors of floats (V even): in element order, or, Split (bf16 in and
// bf16 out, word_halves), as bf16_words_as_floats' halves, vector 2w holding the even elements of the words
// at p + 32 w and 2w + 1 the odd ones (one operation per vector where widening takes two). The
// kernels that read this way either compute per element (a column block's columns) or put
// their sums back in element order, so either order gives the same bits.
template <int V, bool Split, typename T>
inline void load_vectors(const T* p, __m512* v) {
  if constexpr (Split) {
    for (int w = 0; w < V / 2; ++w) bf16_words_as_floats(_mm512_loadu_si512(p + 32 * w), v[2 * w], v[2 * w + 1]);
  } else {
    for (int k = 0; k < V; ++k) v[k] = load16(p + 16 * k);
  }
}
// The V vectors back to q, in load_vectors' order: floats, or bf16 rounded to nearest even
// (denormals kept; AVX512-BF16 only).
template <int V, bool Split, typename O>
inline void store_vectors(const __m512* v, O* q) {
  if constexpr (std::is_same_v<O, float>) {
    for (int k = 0; k < V; ++k) _mm512_storeu_ps(q + 16 * k, v[k]);
  } else {
#if defined(__AVX512BF16__)
    uint16_t* bits = reinterpret_cast<uint16_t*>(q);
    for (int w = 0; w < V / 2; ++w) {
      if constexpr (Split)
        store_bf16_even_odd(v[2 * w], v[2 * w + 1], bits + 32 * w);
      else
        store_bf16x32(v[2 * w], v[2 * w + 1], bits + 32 * w);
    }
#endif
  }
}
#endif

// The largest of p[0..n) as float, NaN skipped (the scalar `v > mx ? v : mx`; a row of NaN
// gives -inf). On AVX-512, fp32 and bf16 rows: four vmaxps accumulators, the running one the
// second operand (vmaxps returns it when the new value is NaN). GCC's loop for a bf16 row
// chained a compare and a masked move per vector: a fifth of a 256-column row's time.
// GCC 12 warns of the _mm512_undefined_* operands inside its reduce and masked intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <typename T>
inline float row_max(const T* p, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
#if defined(__AVX512F__)
  if constexpr (kLoad16Type<T>) {
    auto load = [&](int64_t k, __mmask16 m) { return load16(p + k, m); };
    const __mmask16 all = 0xFFFF;
    __m512 m0 = _mm512_set1_ps(mx), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 64 <= n; i += 64) {
      m0 = _mm512_max_ps(load(i, all), m0);
      m1 = _mm512_max_ps(load(i + 16, all), m1);
      m2 = _mm512_max_ps(load(i + 32, all), m2);
      m3 = _mm512_max_ps(load(i + 48, all), m3);
    }
    for (; i < n; i += 16) {  // the last 1-63; masked-off lanes keep m0
      const __mmask16 m = n - i >= 16 ? all : __mmask16((1u << (n - i)) - 1);
      m0 = _mm512_mask_max_ps(m0, m, load(i, m), m0);
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
  }
#endif
#pragma omp simd reduction(max : mx)
  for (int64_t k = i; k < n; ++k) {
    const float v = load_float(p, k);
    mx = v > mx ? v : mx;  // std::max's reference return keeps the reduction scalar on AVX2
  }
  return mx;
}
#pragma GCC diagnostic pop

// e[i] = exp(p[i] - mx) for i < n, returning their sum in exp_floats' order when Sum; a fp16
// row is widened into e first (exp_floats reads fp32 and bf16 itself). R: the precision of the
// output the exps go into (a bf16 output takes the cheaper exp, vec_math.h). NonPositive: mx is
// the row's maximum, so p[i] - mx <= 0 (exp_floats skips a bound).
template <bool Sum = true, typename R = Fp32Result, bool Store = true, bool NonPositive = true, typename T>
float row_exps(const T* p, float* e, int64_t n, float mx) {
  if constexpr (std::is_same_v<T, Half>) {
    widen_block(p, e, n);
    return exp_floats<Sum, R, Store, NonPositive>(e, e, n, mx);
  } else {
    return exp_floats<Sum, R, Store, NonPositive>(p, e, n, mx);
  }
}

// q[i] = e[i] * inv rounded to O, for i < n (e scaled in place where the CPU cannot fuse it).
template <typename O>
void scale_narrow(float* e, float inv, O* q, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<O, BFloat16>) {
    const __m512 v = _mm512_set1_ps(inv);
    uint16_t* bits = reinterpret_cast<uint16_t*>(q);
    for (; i + 32 <= n; i += 32)
      store_bf16x32(_mm512_mul_ps(_mm512_loadu_ps(e + i), v), _mm512_mul_ps(_mm512_loadu_ps(e + i + 16), v), bits + i);
    for (; i + 16 <= n; i += 16) store_bf16x16(_mm512_mul_ps(_mm512_loadu_ps(e + i), v), bits + i);
  }
#endif
#pragma omp simd
  for (int64_t k = i; k < n; ++k) e[k] *= inv;
  narrow_block(e + i, q + i, n - i);
}

// q[c] = e[c] * inv[c] rounded to O, for c < n: scale_narrow with a factor per column.
template <typename O>
void scale_columns_narrow(float* e, const float* inv, O* q, int64_t n) {
  int64_t c = 0;
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<O, BFloat16>) {
    auto scaled = [&](int64_t k) { return _mm512_mul_ps(_mm512_loadu_ps(e + k), _mm512_loadu_ps(inv + k)); };
    for (; c + 32 <= n; c += 32) store_bf16x32(scaled(c), scaled(c + 16), reinterpret_cast<uint16_t*>(q) + c);
  }
#endif
#pragma omp simd
  for (int64_t k = c; k < n; ++k) e[k] *= inv[k];
  narrow_block(e + c, q + c, n - c);
}

// One row p[0..n) -> q[0..n) (inner == 1): a row longer than kRowBuffer in fp32 math (shorter
// ones go through softmax_rows_pipelined or softmax_row_group), or any row in double. float:
// the exps go to the fp32 output or to a stack buffer in chunks of kRowBuffer, summed as they
// are made (a narrow output or log_softmax computes them again below). double: libm's exp,
// summed in place.
template <typename Acc, typename T, typename O>
void softmax_row(const T* p, O* q, int64_t n, bool log) {
  Acc mx = -std::numeric_limits<Acc>::infinity();
  if constexpr (std::is_same_v<Acc, float>) {
    mx = row_max(p, n);
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      mx = v > mx ? v : mx;  // std::max's reference return keeps the reduction scalar on AVX2
    }
  }
  mx = math::softmax_shift(mx);  // a row of -inf: avoid inf - inf
  Acc sum = 0;
  if constexpr (std::is_same_v<Acc, float>) {
    alignas(64) float buffer[kRowBuffer];
    const bool in_output = std::is_same_v<O, float> && !log;  // keep the exps and scale them in place
    for (int64_t s = 0; s < n; s += kRowBuffer) {
      const int64_t m = std::min(kRowBuffer, n - s);
      sum += row_exps<true, ResultPrecision<O>>(p + s, in_output ? reinterpret_cast<float*>(q) + s : buffer, m, mx);
    }
    if (in_output) {
      const float inv = 1.0f / sum;
      float* y = reinterpret_cast<float*>(q);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] *= inv;
      return;
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += math::exp_shifted_acc(load_acc<Acc>(p, i) - mx);
  }
  if (log) {
    const Acc ls = std::log(sum);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_acc(q, i, Acc((load_acc<Acc>(p, i) - mx) - ls));
  } else {
    const Acc inv = Acc(1) / sum;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_acc(q, i, Acc(math::exp_shifted_acc(load_acc<Acc>(p, i) - mx) * inv));
  }
}

#if defined(__AVX512BF16__)
// bf16 to bf16 log_softmax rows (word_halves) are read as word halves (bf16_words_as_floats:
// one operation per vector where widening takes two) in the exp pass and the output pass, as
// the pipelined softmax rows: the row sum is the halves' sum.

// The sum of exp(p[i] - mx) for i < n, the exps in bf16-result precision, 32 at a time as even
// and odd halves, the last 1-31 as exp_floats' tail.
inline float log_softmax_exp_sum_words(const BFloat16* p, int64_t n, float mx) {
  const __m512 s = _mm512_set1_ps(mx);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 v[2];
    load_vectors<2, true>(p + i, v);
    a0 = _mm512_add_ps(a0, exp16_nonpositive(_mm512_sub_ps(v[0], s), Bf16Result{}));
    a1 = _mm512_add_ps(a1, exp16_nonpositive(_mm512_sub_ps(v[1], s), Bf16Result{}));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    a0 = _mm512_add_ps(a0, _mm512_maskz_mov_ps(m, exp16_nonpositive(_mm512_sub_ps(load16(p + i, m), s), Bf16Result{})));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}
#endif

// fp32 rows of up to kRowBuffer that softmax_rows_pipelined (below) does not take (log_softmax,
// rows shorter than 128 or longer than 2048, fp16, CPUs without AVX-512) go up to kRowGroup at
// a time (as many as fit the buffer), phase by phase: the maxima of all, then their exps and
// sums, then the scaling. Row by row, each row's reductions and division were a chain that the
// next row's vector work did not overlap (bf16 rows of 256: +30 %). A row's exps stay in the
// buffer (or the fp32 output) between the phases, so each is computed once, and the sum's order
// is exp_floats' for the row's length (bf16 to bf16 log_softmax: the word halves' sums,
// log_softmax_exp_sum_words).
// rows rows of n, rows * n <= kRowBuffer, rows <= kRowGroup: x[r * n + i] -> y[r * n + i].
template <typename T, typename O>
void softmax_row_group(const T* x, O* y, int64_t rows, int64_t n, bool log) {
  alignas(64) float buffer[kRowBuffer];
  float mx[kRowGroup], sum[kRowGroup];
  for (int64_t r = 0; r < rows; ++r) mx[r] = math::softmax_shift(row_max(x + r * n, n));
  constexpr bool kFloatOut = std::is_same_v<O, float>;
  for (int64_t r = 0; r < rows; ++r) {
    float* e = log ? buffer : kFloatOut ? reinterpret_cast<float*>(y) + r * n : buffer + r * n;
#if defined(__AVX512BF16__)
    if constexpr (word_halves<T, O>()) {
      if (log) {
        sum[r] = log_softmax_exp_sum_words(x + r * n, n, mx[r]);
        prefetch_lines(x + (rows + r) * n, n * sizeof(T));
        continue;
      }
    }
#endif
    sum[r] = log ? row_exps<true, ResultPrecision<O>, false>(x + r * n, e, n, mx[r])
                 : row_exps<true, ResultPrecision<O>>(x + r * n, e, n, mx[r]);
    prefetch_lines(x + (rows + r) * n, n * sizeof(T));  // the next group's row r
  }
  for (int64_t r = 0; r < rows; ++r) sum[r] = log ? std::log(sum[r]) : 1.0f / sum[r];
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = x + r * n;
    O* q = y + r * n;
    if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
      if constexpr (std::is_same_v<O, BFloat16>) {  // in the buffer, then narrow_block's vector rounding
        float* b = buffer + r * n;
        int64_t i = 0;
#if defined(__AVX512BF16__)
        if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, float>) {  // both in one pass
          const __m512 vm = _mm512_set1_ps(mx[r]), vs = _mm512_set1_ps(sum[r]);
          if constexpr (word_halves<T, O>()) {  // word halves in, even / odd out
            for (; i + 32 <= n; i += 32) {
              __m512 v[2];
              load_vectors<2, true>(p + i, v);
              for (__m512& u : v) u = _mm512_sub_ps(_mm512_sub_ps(u, vm), vs);
              store_vectors<2, true>(v, q + i);
            }
          }
          auto at = [&](int64_t k) { return _mm512_sub_ps(_mm512_sub_ps(load16(p + k), vm), vs); };
          for (; i + 32 <= n; i += 32) store_bf16x32(at(i), at(i + 16), reinterpret_cast<uint16_t*>(q) + i);
        }
#endif
#pragma omp simd
        for (int64_t k = i; k < n; ++k) b[k] = (load_float(p, k) - mx[r]) - sum[r];
        narrow_block(b + i, q + i, n - i);
      } else {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) store_float(q, i, (load_float(p, i) - mx[r]) - sum[r]);
      }
    } else if constexpr (kFloatOut) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) q[i] *= sum[r];
    } else {
      scale_narrow(buffer + r * n, sum[r], q, n);
    }
  }
}

#if defined(__AVX512F__)
// Rows from kPipelinedRowMin to kPipelinedRow long go through softmax_rows_pipelined when T and
// O are float or bf16 (a bf16 output needs AVX512-BF16 for its rounding).
constexpr int64_t kPipelinedRowMin = 128, kPipelinedRow = kRowBuffer / 2;
#if defined(__AVX512BF16__)
constexpr bool kBf16Rounding = true;
#else
constexpr bool kBf16Rounding = false;
#endif
template <typename T, typename O>
constexpr bool pipelined_types() {
  return kLoad16Type<T> && kLoad16Type<O> && (std::is_same_v<O, float> || kBf16Rounding);
}

// rows rows of n, kPipelinedRowMin <= n <= kPipelinedRow: x[r * n + i] -> y[r * n + i], in fp32
// math, software-pipelined by row: step r takes row r + 2's maximum, row r + 1's exps and sum,
// and row r's output, 32 elements of each per iteration. Phase by phase (softmax_row_group) the
// exps' long dependency chains left the units idle that the maximum's loads and the output's
// loads, scaling and stores now fill (Zen 5, one thread, 1M elements: fp32 rows of 256 / 512 /
// 2048 +5-9 / 8 / 23-28 %, bf16 +3-7 / 5-8 / 10-15 %; rows of 128 even, hence the minimum).
// log_softmax keeps the phases: its output pass re-reads x, and pipelined it was 2-7 % slower.
// A row's exps wait for their scaling in the fp32 output or, for a bf16 output, in one half of
// a two-row buffer. Other than bf16 to bf16 (kWords below), the same operations per element in
// the same order as softmax_row_group (exp_floats' sum order, row_max's NaN rule), so the same
// results.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <typename T, typename O>
void softmax_rows_pipelined(const T* x, O* y, int64_t rows, int64_t n) {
  using R = ResultPrecision<O>;
  constexpr bool kFloatOut = std::is_same_v<O, float>;
  alignas(64) float ring[2][kPipelinedRow];
  const int64_t full = n / 32 * 32;
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // bf16 to bf16: 32 elements read as 16 words, their even and odd halves (bf16_words_as_floats,
  // one operation each where widening took two), the exps kept in that order in the buffer and
  // put back in element order as they are rounded (bf16 rows of 256 +8-9 %). Their sum is the
  // halves' sum, so a bf16 row's rounded results can differ from the row groups' by a step.
  constexpr bool kWords = word_halves<T, O>();
  float mx_b = 0, inv_c = 0;  // row r + 1's maximum, 1 / row r's sum
  for (int64_t r = -2; r < rows; ++r) {
    const bool a_on = r + 2 < rows, b_on = r + 1 >= 0 && r + 1 < rows, c_on = r >= 0;
    const T* pa = x + (a_on ? r + 2 : 0) * n;
    const T* pb = x + (b_on ? r + 1 : 0) * n;
    O* qc = y + (c_on ? r : 0) * n;
    // Row r + 1's exps: in the fp32 output or the buffer.
    float* eb = kFloatOut ? reinterpret_cast<float*>(y) + (b_on ? r + 1 : 0) * n : ring[(r + 1) & 1];
    float* ec = kFloatOut ? reinterpret_cast<float*>(qc) : ring[r & 1];
    const __m512 sb = _mm512_set1_ps(mx_b), inv = _mm512_set1_ps(inv_c);
    __m512 m0 = minus_inf, m1 = minus_inf, a0 = _mm512_setzero_ps(), a1 = a0;
    auto max_step = [&](int64_t i) {
      __m512 u[2];
      load_vectors<2, kWords>(pa + i, u);
      m0 = _mm512_max_ps(u[0], m0);
      m1 = _mm512_max_ps(u[1], m1);
    };
    auto exp_step = [&](int64_t i) {
      __m512 u[2];
      load_vectors<2, kWords>(pb + i, u);
      const __m512 e0 = exp16_nonpositive(_mm512_sub_ps(u[0], sb), R{});
      const __m512 e1 = exp16_nonpositive(_mm512_sub_ps(u[1], sb), R{});
      _mm512_storeu_ps(eb + i, e0);
      _mm512_storeu_ps(eb + i + 16, e1);
      a0 = _mm512_add_ps(a0, e0);
      a1 = _mm512_add_ps(a1, e1);
    };
    auto out_step = [&](int64_t i) {
      const __m512 o[2] = {_mm512_mul_ps(_mm512_loadu_ps(ec + i), inv),
                           _mm512_mul_ps(_mm512_loadu_ps(ec + i + 16), inv)};
      store_vectors<2, kWords>(o, qc + i);
    };
    if (a_on && b_on && c_on) {
      for (int64_t i = 0; i < full; i += 32) {
        max_step(i);
        exp_step(i);
        out_step(i);
      }
    } else {  // the pipeline's first two and last two steps
      for (int64_t i = 0; a_on && i < full; i += 32) max_step(i);
      for (int64_t i = 0; b_on && i < full; i += 32) exp_step(i);
      for (int64_t i = 0; c_on && i < full; i += 32) out_step(i);
    }
    // The last 1-31 of each row, 16 at a time, as row_max, exp_floats and softmax_row_group.
    for (int64_t i = full; a_on && i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
      m0 = _mm512_mask_max_ps(m0, m, load16(pa + i, m), m0);
    }
    for (int64_t i = full; b_on && i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
      const __m512 e = _mm512_maskz_mov_ps(m, exp16_nonpositive(_mm512_sub_ps(load16(pb + i, m), sb), R{}));
      _mm512_mask_storeu_ps(eb + i, m, e);
      a0 = _mm512_add_ps(a0, e);
    }
    if (c_on && full < n) {
      if constexpr (kFloatOut) {
        for (int64_t k = full; k < n; ++k) ec[k] *= inv_c;
      } else {
        scale_narrow(ec + full, inv_c, qc + full, n - full);
      }
    }
    if (b_on) inv_c = 1.0f / _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    if (a_on) mx_b = math::softmax_shift(_mm512_reduce_max_ps(_mm512_max_ps(m0, m1)));
  }
}
#pragma GCC diagnostic pop
#endif

// e[c] = exp(p[c] - mx[c]) for c < nc (exp(p[c]) when mx is null), in fp32: row_exps on the
// input itself, or exp_floats on the shifted copy in e.
template <typename R, typename T>
void shifted_exps(const T* p, const float* mx, float* e, int64_t nc) {
  if (mx == nullptr) {
    row_exps<false, R, true, false>(p, e, nc, 0.0f);
    return;
  }
#pragma omp simd
  for (int64_t c = 0; c < nc; ++c) e[c] = load_float(p, c) - mx[c];
  exp_floats<false, R, true, true>(e, e, nc);
}

// One row of a column block into the running maxima: mx[c] = p[c] where p[c] > mx[c] (NaN
// skipped, as row_max), c < nc. On AVX-512 16 columns per vmaxps with the running maximum as its
// second operand: GCC's loop over bf16 columns chained a compare and a masked move. (fp32 rows
// keep GCC's loop: through this one, fp32 along a middle dim at 4M was 7-13 % slower.)
template <typename T>
void column_max(const T* p, float* mx, int64_t nc) {
#if defined(__AVX512F__)
  if constexpr (kLoad16Type<T>) {
    int64_t c = 0;
    for (; c + 16 <= nc; c += 16) _mm512_storeu_ps(mx + c, _mm512_max_ps(load16(p + c), _mm512_loadu_ps(mx + c)));
    if (c < nc) {  // masked loads and stores for the last 1-15 only: on Zen 5 they cost more
      const __mmask16 m = __mmask16((1u << (nc - c)) - 1);
      _mm512_mask_storeu_ps(mx + c, m, _mm512_max_ps(load16(p + c, m), _mm512_maskz_loadu_ps(m, mx + c)));
    }
    return;
  }
#endif
#pragma omp simd
  for (int64_t c = 0; c < nc; ++c) {
    const float v = load_float(p, c);
    mx[c] = v > mx[c] ? v : mx[c];
  }
}

// One row of a column block: e[c] = exp(p[c] - mx[c]) (kept when Store) and sum[c] += e[c] for
// c < nc. On AVX-512 one pass, 16 columns at a time (the shifted copy, the exps in place and the
// sums had been three: bf16 softmax along a middle dim +27 %); the same exps and sums.
template <typename R, bool Store, typename T>
void column_exps(const T* p, const float* mx, float* e, float* sum, int64_t nc) {
#if defined(__AVX512F__)
  if constexpr (kLoad16Type<T>) {
    int64_t c = 0;
    for (; c + 16 <= nc; c += 16) {
      const __m512 v = exp16_nonpositive(_mm512_sub_ps(load16(p + c), _mm512_loadu_ps(mx + c)), R{});
      if constexpr (Store) _mm512_storeu_ps(e + c, v);
      _mm512_storeu_ps(sum + c, _mm512_add_ps(_mm512_loadu_ps(sum + c), v));
    }
    if (c < nc) {  // as column_max
      const __mmask16 m = __mmask16((1u << (nc - c)) - 1);
      const __m512 v = exp16_nonpositive(_mm512_sub_ps(load16(p + c, m), _mm512_maskz_loadu_ps(m, mx + c)), R{});
      if constexpr (Store) _mm512_mask_storeu_ps(e + c, m, v);
      _mm512_mask_storeu_ps(sum + c, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, sum + c), v));
    }
    return;
  }
#endif
  shifted_exps<R>(p, mx, e, nc);
#pragma omp simd
  for (int64_t c = 0; c < nc; ++c) sum[c] += e[c];
}

// kColumnBuffer floats, 64-byte aligned: 128 KiB on the heap, once per thread, rather than on
// every caller's stack. With 32 KiB a block of 256 rows took 32 columns at a time, 64-byte runs:
// bf16 along a middle dim ran 30-50 % slower.
float* column_buffer() {
  thread_local std::vector<float> storage(kColumnBuffer + 16);
  return storage.data() + (16 - (reinterpret_cast<uintptr_t>(storage.data()) / 4) % 16) % 16;
}

#if defined(__AVX512F__)
// The output types softmax_column_block writes: float, and bf16 where the CPU rounds to it in
// one instruction.
template <typename O>
constexpr bool column_block_output() {
  return std::is_same_v<O, float> || (std::is_same_v<O, BFloat16> && kBf16Rounding);
}

// A whole block of kCols columns, float or bf16 in, float or bf16 out: softmax_columns' passes
// with the block's maxima and sums in registers (kCols / 16 vectors of each) down the n rows,
// where GCC kept softmax_columns' arrays in memory (a load and a store per vector and row, and a
// chain through them from row to row). The same operations in the same order, so the same bits:
// the exps of the differences (softmax: kept in y, or for bf16 in the fp32 buffer e of n rows
// of kCols, summed, then scaled by 1 / sum; log_softmax: summed, then y = (x - max) - log(sum)).
// next: the next block's input (next_block_offset), prefetched during the exp pass, or null (a
// pointer: the same addresses as an offset from x ran 20 % slower at 4M fp32 as GCC 12 built it).
// x[j * inner + c] for j < n, c < kCols -> y likewise.
template <bool Log, typename T, typename O>
void softmax_column_block(const T* x, O* y, int64_t n, int64_t inner, const T* next, float* e) {
  constexpr int kV = int(kCols / 16);
  constexpr bool kFloatOut = std::is_same_v<O, float>;
  constexpr bool kSplit = word_halves<T, O>();
  using R = ResultPrecision<O>;
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mx[kV], sum[kV];
  for (int k = 0; k < kV; ++k) {
    mx[k] = minus_inf;
    sum[k] = _mm512_setzero_ps();
  }
  __m512 v[kV];
  for (int64_t j = 0; j < n; ++j) {
    load_vectors<kV, kSplit>(x + j * inner, v);
    for (int k = 0; k < kV; ++k) mx[k] = _mm512_max_ps(v[k], mx[k]);  // NaN skipped
  }
  for (int k = 0; k < kV; ++k)  // math::softmax_shift: a column of -inf shifts by 0
    mx[k] = _mm512_mask_mov_ps(mx[k], _mm512_cmp_ps_mask(mx[k], minus_inf, _CMP_EQ_OQ), _mm512_setzero_ps());
  // Row j's exps: in the fp32 output itself, else in e.
  auto exps_at = [&](int64_t j) {
    if constexpr (kFloatOut)
      return y + j * inner;
    else
      return e + j * kCols;
  };
  for (int64_t j = 0; j < n; ++j) {
    if (next != nullptr)
      for (int64_t b = 0; b < kCols * int64_t(sizeof(T)); b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(next + j * inner) + b, _MM_HINT_T0);
    load_vectors<kV, kSplit>(x + j * inner, v);
    for (int k = 0; k < kV; ++k) {
      const __m512 ex = exp16_nonpositive(_mm512_sub_ps(v[k], mx[k]), R{});
      if constexpr (!Log) _mm512_storeu_ps(exps_at(j) + 16 * k, ex);
      sum[k] = _mm512_add_ps(sum[k], ex);
    }
  }
  if constexpr (Log) {
    alignas(64) float lse[kCols];
    for (int k = 0; k < kV; ++k) _mm512_store_ps(lse + 16 * k, sum[k]);
    for (float& v : lse) v = std::log(v);
    for (int k = 0; k < kV; ++k) sum[k] = _mm512_load_ps(lse + 16 * k);
  } else {
    for (int k = 0; k < kV; ++k) sum[k] = _mm512_div_ps(_mm512_set1_ps(1.0f), sum[k]);
  }
  for (int64_t j = 0; j < n; ++j) {
    if constexpr (Log) {
      load_vectors<kV, kSplit>(x + j * inner, v);
      for (int k = 0; k < kV; ++k) v[k] = _mm512_sub_ps(_mm512_sub_ps(v[k], mx[k]), sum[k]);
    } else {
      for (int k = 0; k < kV; ++k) v[k] = _mm512_mul_ps(_mm512_loadu_ps(exps_at(j) + 16 * k), sum[k]);
    }
    store_vectors<kV, kSplit>(v, y + j * inner);
  }
}
#endif

// nc adjacent columns: x[j * inner + c] for j < n, c < nc -> y likewise.
template <typename Acc, typename T, typename O>
void softmax_columns(const T* x, O* y, int64_t n, int64_t inner, int64_t nc, bool log) {
  alignas(64) Acc mx[kCols], sum[kCols];
  for (int64_t c = 0; c < nc; ++c) {
    mx[c] = -std::numeric_limits<Acc>::infinity();
    sum[c] = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* p = x + j * inner;
    if constexpr (std::is_same_v<Acc, float> && std::is_same_v<T, BFloat16>) {
      column_max(p, mx, nc);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) {
        const Acc v = load_acc<Acc>(p, c);
        mx[c] = v > mx[c] ? v : mx[c];
      }
    }
  }
  for (int64_t c = 0; c < nc; ++c) mx[c] = math::softmax_shift(mx[c]);
  if constexpr (std::is_same_v<Acc, float> && !std::is_same_v<O, float>) {
    // A narrow output: the exps of up to kColumnBuffer / n columns at a time stay in an fp32
    // buffer, then are scaled and rounded (the loop below computed every exp twice: bf16 softmax
    // along a middle dim ran at 7 % of memcpy). Same sums, same results.
    if (!log && n * 16 <= kColumnBuffer) {
      float* buffer = column_buffer();
      const int64_t w = std::min(nc, kColumnBuffer / n / 16 * 16);
      for (int64_t c0 = 0; c0 < nc; c0 += w) {
        const int64_t cw = std::min(w, nc - c0);
        for (int64_t j = 0; j < n; ++j)
          column_exps<ResultPrecision<O>, true>(x + j * inner + c0, mx + c0, buffer + j * cw, sum + c0, cw);
        for (int64_t c = c0; c < c0 + cw; ++c) sum[c] = 1.0f / sum[c];
        for (int64_t j = 0; j < n; ++j) scale_columns_narrow(buffer + j * cw, sum + c0, y + j * inner + c0, cw);
      }
      return;
    }
  }
  if constexpr (std::is_same_v<O, Acc>) {
    if (!log) {  // keep the exps in the output and scale them in place: one exp per element
      for (int64_t j = 0; j < n; ++j) {
        const T* p = x + j * inner;
        O* q = y + j * inner;
        if constexpr (std::is_same_v<Acc, float>) {
          // Not column_exps: its stores into a 4M fp32 output, spaced by the exps' arithmetic,
          // made softmax along a middle dim 30 % slower than this pass of plain differences.
          shifted_exps<Fp32Result>(p, mx, q, nc);
#pragma omp simd
          for (int64_t c = 0; c < nc; ++c) sum[c] += q[c];
        } else {
#pragma omp simd
          for (int64_t c = 0; c < nc; ++c) {
            q[c] = math::exp_shifted_acc(load_acc<Acc>(p, c) - mx[c]);
            sum[c] += q[c];
          }
        }
      }
      for (int64_t c = 0; c < nc; ++c) sum[c] = Acc(1) / sum[c];
      for (int64_t j = 0; j < n; ++j) {
        O* q = y + j * inner;
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) q[c] *= sum[c];
      }
      return;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* p = x + j * inner;
    if constexpr (std::is_same_v<Acc, float>) {
      alignas(64) float e[kCols];
      if constexpr (std::is_same_v<O, BFloat16>) {
        column_exps<Bf16Result, false>(p, mx, e, sum, nc);
      } else {  // fp32: unchanged (through column_exps, no faster, and its code moved the fp32 softmax's by -7 %)
        shifted_exps<ResultPrecision<O>>(p, mx, e, nc);
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) sum[c] += e[c];
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) sum[c] += math::exp_shifted_acc(load_acc<Acc>(p, c) - mx[c]);
    }
  }
  for (int64_t c = 0; c < nc; ++c) sum[c] = log ? Acc(std::log(sum[c])) : Acc(1) / sum[c];
  for (int64_t j = 0; j < n; ++j) {
    const T* p = x + j * inner;
    O* q = y + j * inner;
    if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
      if constexpr (std::is_same_v<O, BFloat16> && std::is_same_v<Acc, float>) {  // as softmax_row_group
        alignas(64) float b[kCols];
        int64_t c0 = 0;
#if defined(__AVX512BF16__)
        if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, float>) {
          auto at = [&](int64_t c) {
            return _mm512_sub_ps(_mm512_sub_ps(load16(p + c), _mm512_loadu_ps(mx + c)), _mm512_loadu_ps(sum + c));
          };
          for (; c0 + 32 <= nc; c0 += 32) store_bf16x32(at(c0), at(c0 + 16), reinterpret_cast<uint16_t*>(q) + c0);
        }
#endif
#pragma omp simd
        for (int64_t c = c0; c < nc; ++c) b[c] = (load_acc<Acc>(p, c) - mx[c]) - sum[c];
        narrow_block(b + c0, q + c0, nc - c0);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) store_acc(q, c, Acc((load_acc<Acc>(p, c) - mx[c]) - sum[c]));
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c)
        store_acc(q, c, Acc(math::exp_shifted_acc(load_acc<Acc>(p, c) - mx[c]) * sum[c]));
    }
  }
}

// acc[k] += the backward's summand at k < m: g[k] (log_softmax) or g[k] * y[k] (softmax).
// Always inlined: the row sum calls it with m = kSumLanes, which must stay a constant for the
// 64 lanes to live in registers (called out of line, fwd+bwd rows were 10-18 % slower).
template <typename Acc, typename Y, typename D>
[[gnu::always_inline]] inline void add_backward_terms(const Y* y, const D* g, Acc* acc, int64_t m, bool log) {
  if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
#pragma omp simd
    for (int64_t k = 0; k < m; ++k) acc[k] += load_acc<Acc>(g, k);
  } else {
#pragma omp simd
    for (int64_t k = 0; k < m; ++k) acc[k] += load_acc<Acc>(g, k) * load_acc<Acc>(y, k);
  }
}

// The backward of one row in two phases: backward_row_sum gives s, backward_row_write gx.
// softmax gx = y * (g - sum(g * y)); log_softmax gx = g - exp(y) * sum(g).
template <typename Acc, typename Y, typename D>
Acc backward_row_sum(const Y* y, const D* g, int64_t n, bool log) {
  alignas(64) Acc acc[kSumLanes] = {};  // independent partial sums (sum_wide's reason)
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) add_backward_terms(y + i, g + i, acc, kSumLanes, log);
  Acc tail = 0;
  for (; i < n; ++i) tail += log ? load_acc<Acc>(g, i) : load_acc<Acc>(g, i) * load_acc<Acc>(y, i);
  return add_lanes(acc) + tail;
}

// log_softmax's exp(y) is the fp32 one whatever G is: g - exp(y) s cancels, and a bf16 gradient
// under autocast is one rounding of the fp32 gradient.
template <typename Acc, typename Y, typename D, typename G>
void backward_row_write(const Y* y, const D* g, G* gx, int64_t n, bool log, Acc s) {
  if (log) {
    if constexpr (std::is_same_v<Acc, float>) {  // exp(y) a chunk at a time through exp_floats
      alignas(64) float e[kRowBuffer];
      for (int64_t s0 = 0; s0 < n; s0 += kRowBuffer) {
        const int64_t m = std::min(kRowBuffer, n - s0);
        shifted_exps<Fp32Result>(y + s0, nullptr, e, m);
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) store_acc(gx, s0 + i, load_acc<float>(g, s0 + i) - e[i] * s);
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        store_acc(gx, i, Acc(load_acc<Acc>(g, i) - math::exp_shifted_acc(load_acc<Acc>(y, i)) * s));
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_acc(gx, i, Acc(load_acc<Acc>(y, i) * (load_acc<Acc>(g, i) - s)));
  }
}

#if defined(__AVX512F__)
// backward_row_sum and backward_row_write of one row on AVX-512, y and g float or bf16, gx float
// or bf16 (a bf16 one only where the CPU rounds in one instruction): the same operations in the
// same order, so the same bits. The sum keeps backward_row_sum's 64 partial sums in four
// registers (lane k of vector q: partial sum 16 q + k; from halves they are put back in that
// order before add_lanes' tree), the tail scalar; the products as the fmas GCC makes of those
// loops (C++ contracts by default). GCC's loops widened bf16 in two operations per vector and
// rounded the gradient by integer operations: bf16 rows of 256, fwd+bwd +20-25 % (1M, 4M).
template <bool Log, typename Y, typename D, typename G>
void softmax_backward_row_avx512(const Y* y, const D* g, G* gx, int64_t n) {
  constexpr bool kSplit = word_halves<Y, D, G>();
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  __m512 v[4], d[4];
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    load_vectors<4, kSplit>(g + i, d);
    if (!Log) load_vectors<4, kSplit>(y + i, v);
    for (int k = 0; k < 4; ++k) acc[k] = Log ? _mm512_add_ps(acc[k], d[k]) : _mm512_fmadd_ps(d[k], v[k], acc[k]);
  }
  alignas(64) float lanes[kSumLanes];
  if constexpr (kSplit) {  // even / odd of 32 elements back to elements 0-15 and 16-31
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int h = 0; h < 2; ++h) {
      _mm512_store_ps(lanes + 32 * h, _mm512_permutex2var_ps(acc[2 * h], lo, acc[2 * h + 1]));
      _mm512_store_ps(lanes + 32 * h + 16, _mm512_permutex2var_ps(acc[2 * h], hi, acc[2 * h + 1]));
    }
  } else {
    for (int k = 0; k < 4; ++k) _mm512_store_ps(lanes + 16 * k, acc[k]);
  }
  float tail = 0;
  for (int64_t t = i; t < n; ++t) tail += Log ? load_float(g, t) : load_float(g, t) * load_float(y, t);
  const float sum = add_lanes(lanes) + tail;
  const __m512 s = _mm512_set1_ps(sum);
  i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    load_vectors<4, kSplit>(y + i, v);
    load_vectors<4, kSplit>(g + i, d);
    for (int k = 0; k < 4; ++k)
      v[k] = Log ? _mm512_fnmadd_ps(exp16(v[k]), s, d[k]) : _mm512_mul_ps(v[k], _mm512_sub_ps(d[k], s));
    store_vectors<4, kSplit>(v, gx + i);
  }
  if (i < n) backward_row_write(y + i, g + i, gx + i, n - i, Log, sum);
}
#endif

// rows rows of n (rows <= kRowGroup): every row's sum, then every row's gradient, so that one
// row's reduction overlaps the next row's loads (as softmax_row_group).
template <typename Acc, typename Y, typename D, typename G>
void softmax_backward_rows(const Y* y, const D* g, G* gx, int64_t rows, int64_t n, bool log) {
#if defined(__AVX512F__)
  if constexpr (kLoad16Type<Y> && kLoad16Type<D> && column_block_output<G>()) {
    for (int64_t r = 0; r < rows; ++r) {
      if (log)
        softmax_backward_row_avx512<true>(y + r * n, g + r * n, gx + r * n, n);
      else
        softmax_backward_row_avx512<false>(y + r * n, g + r * n, gx + r * n, n);
      prefetch_lines(y + (rows + r) * n, n * sizeof(Y));  // the next group's row r
      prefetch_lines(g + (rows + r) * n, n * sizeof(D));
    }
    return;
  }
#endif
  Acc s[kRowGroup];
  for (int64_t r = 0; r < rows; ++r) s[r] = backward_row_sum<Acc>(y + r * n, g + r * n, n, log);
  for (int64_t r = 0; r < rows; ++r) {
    backward_row_write(y + r * n, g + r * n, gx + r * n, n, log, s[r]);
    prefetch_lines(y + (rows + r) * n, n * sizeof(Y));  // the next group's row r
    prefetch_lines(g + (rows + r) * n, n * sizeof(D));
  }
}

#if defined(__AVX512F__)
// softmax_backward_columns for a whole block of kCols columns, y, g float or bf16 (g bf16 for a float y too), gx
// float or bf16, with the block's sums in registers (as softmax_column_block): the same
// operations in the same order, so the same bits (s + g y and g - e s as the fmas GCC makes of
// the loops it replaces: C++ contracts by default). next: the offset of the next block's y and g
// rows (as softmax_column_block), prefetched in the second pass, or 0.
template <bool Log, typename Y, typename D, typename G>
void softmax_backward_column_block(const Y* y, const D* g, G* gx, int64_t n, int64_t inner, int64_t next) {
  constexpr int kV = int(kCols / 16);
  constexpr bool kSplit = word_halves<Y, D, G>();
  __m512 s[kV], v[kV], d[kV];
  for (int k = 0; k < kV; ++k) s[k] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    load_vectors<kV, kSplit>(g + j * inner, d);
    if (!Log) load_vectors<kV, kSplit>(y + j * inner, v);
    for (int k = 0; k < kV; ++k) s[k] = Log ? _mm512_add_ps(s[k], d[k]) : _mm512_fmadd_ps(d[k], v[k], s[k]);
  }
  for (int64_t j = 0; j < n; ++j) {
    if (next != 0)
      for (int64_t b = 0; b < kCols * int64_t(sizeof(Y)); b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(y + next + j * inner) + b, _MM_HINT_T0);
        if (b < kCols * int64_t(sizeof(D)))
          _mm_prefetch(reinterpret_cast<const char*>(g + next + j * inner) + b, _MM_HINT_T0);
      }
    load_vectors<kV, kSplit>(y + j * inner, v);
    load_vectors<kV, kSplit>(g + j * inner, d);
    for (int k = 0; k < kV; ++k)
      v[k] = Log ? _mm512_fnmadd_ps(exp16(v[k]), s[k], d[k]) : _mm512_mul_ps(v[k], _mm512_sub_ps(d[k], s[k]));
    store_vectors<kV, kSplit>(v, gx + j * inner);
  }
}
#endif

template <typename Acc, typename Y, typename D, typename G>
void softmax_backward_columns(const Y* y, const D* g, G* gx, int64_t n, int64_t inner, int64_t nc, bool log) {
  alignas(64) Acc s[kCols];
  for (int64_t c = 0; c < nc; ++c) s[c] = 0;
  for (int64_t j = 0; j < n; ++j) add_backward_terms(y + j * inner, g + j * inner, s, nc, log);
  for (int64_t j = 0; j < n; ++j) {
    const Y* py = y + j * inner;
    const D* pg = g + j * inner;
    G* q = gx + j * inner;
    if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
      if constexpr (std::is_same_v<Acc, float>) {
        alignas(64) float e[kCols];
        shifted_exps<Fp32Result>(py, nullptr, e, nc);
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c) store_acc(q, c, load_acc<float>(pg, c) - e[c] * s[c]);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < nc; ++c)
          store_acc(q, c, Acc(load_acc<Acc>(pg, c) - math::exp_shifted_acc(load_acc<Acc>(py, c)) * s[c]));
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) store_acc(q, c, Acc(load_acc<Acc>(py, c) * (load_acc<Acc>(pg, c) - s[c])));
    }
  }
}

template <typename A, typename B>
using pair_acc_t = std::conditional_t<std::is_same_v<A, double> || std::is_same_v<B, double>, double, float>;

}  // namespace

// in, out: contiguous [outer, n] or [outer, n, inner]; softmax along n.
void softmax(const Tensor& in, const Tensor& out, bool log) {
  const SoftmaxDims d = softmax_dims(in);
  if (d.outer * d.n * d.inner == 0) return;
  dispatch_floating(in.dtype(), "softmax", [&]<typename T>() {
    dispatch_floating(out.dtype(), "softmax", [&]<typename O>() {
      using Acc = pair_acc_t<T, O>;
      const T* x = static_cast<const T*>(in.raw_data());
      O* y = static_cast<O*>(out.raw_data());
      if constexpr (std::is_same_v<Acc, float>) {
#if defined(__AVX512F__)
        if constexpr (pipelined_types<T, O>()) {
          if (!log && d.inner == 1 && d.n >= kPipelinedRowMin && d.n <= kPipelinedRow) {
            parallel_for(0, d.outer, std::max<int64_t>(1, kParallelGrain / d.n),
                         [&](int64_t b, int64_t e) { softmax_rows_pipelined(x + b * d.n, y + b * d.n, e - b, d.n); });
            return;
          }
        }
#endif
        if (d.inner == 1 && d.n <= kRowBuffer) {
          for_each_row_group(d, [&](int64_t at, int64_t rows) { softmax_row_group(x + at, y + at, rows, d.n, log); });
          return;
        }
      }
      for_each_block(d, [&](int64_t o, int64_t c0, int64_t nc) {
        const int64_t base = o * d.n * d.inner + c0;
#if defined(__AVX512F__)
        if constexpr (kLoad16Type<T> && column_block_output<O>()) {
          // A bf16 output's exps wait in a buffer of n rows of the block (column_buffer).
          if (nc == kCols && (std::is_same_v<O, float> || d.n * kCols <= kColumnBuffer)) {
            const int64_t next = next_block_offset(d, o, c0, sizeof(T));
            const T* xn = next != 0 ? x + base + next : nullptr;
            float* e = std::is_same_v<O, float> ? nullptr : column_buffer();
            if (log)
              softmax_column_block<true>(x + base, y + base, d.n, d.inner, xn, e);
            else
              softmax_column_block<false>(x + base, y + base, d.n, d.inner, xn, e);
            return;
          }
        }
#endif
        if (d.inner == 1)
          softmax_row<Acc>(x + base, y + base, d.n, log);
        else
          softmax_columns<Acc>(x + base, y + base, d.n, d.inner, nc, log);
      });
    });
  });
}

namespace {
// softmax_backward with y of type Y, its gradient of type D, gx of type G.
template <typename Y, typename D, typename G>
void softmax_backward_typed(const SoftmaxDims& d, const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  using Acc = pair_acc_t<Y, G>;
  const Y* py = static_cast<const Y*>(y.raw_data());
  const D* pg = static_cast<const D*>(gy.raw_data());
  G* q = static_cast<G*>(gx.raw_data());
  if (d.inner == 1) {
    for_each_row_group(
        d, [&](int64_t at, int64_t rows) { softmax_backward_rows<Acc>(py + at, pg + at, q + at, rows, d.n, log); });
    return;
  }
  for_each_block(d, [&](int64_t o, int64_t c0, int64_t nc) {
    const int64_t base = o * d.n * d.inner + c0;
#if defined(__AVX512F__)
    if constexpr (kLoad16Type<Y> && kLoad16Type<D> && column_block_output<G>()) {
      if (nc == kCols) {
        const int64_t next = next_block_offset(d, o, c0, sizeof(Y));
        if (log)
          softmax_backward_column_block<true>(py + base, pg + base, q + base, d.n, d.inner, next);
        else
          softmax_backward_column_block<false>(py + base, pg + base, q + base, d.n, d.inner, next);
        return;
      }
    }
#endif
    softmax_backward_columns<Acc>(py + base, pg + base, q + base, d.n, d.inner, nc, log);
  });
}
}  // namespace

// y, gy: the forward's output and its gradient, of one dtype, or fp32 y and a bf16 gradient
// (autocast's fp32 softmax feeding a bf16 op: the gradient read as it comes, widened exactly in
// registers, not through an fp32 copy); gx: any floating dtype; all contiguous [outer, n, inner].
void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  const SoftmaxDims d = softmax_dims(y);
  if (d.outer * d.n * d.inner == 0) return;
  MT_CHECK(softmax_backward_takes(y.device(), y.dtype(), gy.dtype()), "softmax_backward", "the gradient's dtype ",
           dtype_name(gy.dtype()), " differs from the output's ", dtype_name(y.dtype()));
  if (gy.dtype() != y.dtype()) {  // fp32 y, bf16 gradient
    dispatch_floating(gx.dtype(), "softmax_backward",
                      [&]<typename G>() { softmax_backward_typed<float, BFloat16, G>(d, y, gy, gx, log); });
    return;
  }
  dispatch_floating(y.dtype(), "softmax_backward", [&]<typename Y>() {
    dispatch_floating(gx.dtype(), "softmax_backward",
                      [&]<typename G>() { softmax_backward_typed<Y, Y, G>(d, y, gy, gx, log); });
  });
}

}  // namespace mantissa::cpu
