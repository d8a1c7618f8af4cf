// CPU softmax / log_softmax along the middle dim of a contiguous [outer, n, inner] view,
// forward and backward, without a transposing copy: with inner == 1 a task walks whole rows,
// otherwise it walks a block of kCols adjacent columns down the n dim, vectorized across them.
// fp32 math takes its exps from exp_floats (core/cpu/vec_math.h) over a row or a column block
// of differences x - max; the rest are `omp simd` loops that read bf16 through its bits, so a
// bf16 input feeding the fp32 softmax of autocast is widened on the way (double: libm's exp).
// log_softmax is (x - max) - log(sum): x - (max + log(sum)) loses log(sum) for huge logits.
#include <cmath>
#include <limits>
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

constexpr int64_t kCols = 128;           // columns per task when softmax runs along a non-last dim
constexpr int64_t kRowBuffer = 4096;     // rows up to this long keep their exps on the stack (16 KiB)
constexpr int64_t kColumnBuffer = 8192;  // a column block's exps for a narrow output (32 KiB)

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
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    auto load = [&](int64_t k, __mmask16 m) {
      if constexpr (std::is_same_v<T, float>)
        return _mm512_maskz_loadu_ps(m, p + k);
      else
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(p) + k)), 16));
    };
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

// One row p[0..n) -> q[0..n) (inner == 1). float: the exps go to the fp32 output or to a stack
// buffer in chunks of kRowBuffer, summed as they are made; a bf16 row is widened into the buffer
// first, so that the order of the additions, and so the rounding, does not depend on the input's
// dtype (a bf16 input under autocast gives the softmax of its fp32 copy bit for bit). double:
// libm's exp, summed in place.
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
      float* e = in_output ? reinterpret_cast<float*>(q) + s : buffer;
      if constexpr (std::is_same_v<T, float>) {
        sum += exp_floats<true>(p + s, e, m, mx);
      } else {
        widen_block(p + s, e, m);
        sum += exp_floats<true>(e, e, m, mx);
      }
    }
    if (in_output) {
      const float inv = 1.0f / sum;
      float* y = reinterpret_cast<float*>(q);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] *= inv;
      return;
    }
    if constexpr (!std::is_same_v<O, double>) {
      if (!log && n <= kRowBuffer) {  // a narrow output: the one chunk's exps are still in the buffer
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) buffer[i] *= inv;
        narrow_block(buffer, q, n);  // vcvtneps2bf16 where the CPU has it
        return;
      }
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

// e[c] = exp(p[c] - mx[c]) for c < nc (exp(p[c]) when mx is null), in fp32: exp_floats on the
// fp32 input itself or on the widened or shifted copy in e.
template <typename T>
void shifted_exps(const T* p, const float* mx, float* e, int64_t nc) {
  if constexpr (std::is_same_v<T, float>) {
    if (mx == nullptr) {
      exp_floats(p, e, nc);
      return;
    }
  }
  if (mx == nullptr) {
    widen_block(p, e, nc);
  } else {
#pragma omp simd
    for (int64_t c = 0; c < nc; ++c) e[c] = load_float(p, c) - mx[c];
  }
  exp_floats(e, e, nc);
}

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
#pragma omp simd
    for (int64_t c = 0; c < nc; ++c) {
      const Acc v = load_acc<Acc>(p, c);
      mx[c] = v > mx[c] ? v : mx[c];
    }
  }
  for (int64_t c = 0; c < nc; ++c) mx[c] = math::softmax_shift(mx[c]);
  if constexpr (std::is_same_v<Acc, float> && !std::is_same_v<O, float>) {
    // A narrow output: the exps of up to kColumnBuffer / n columns at a time stay in an fp32
    // buffer, then are scaled and rounded (the loop below computed every exp twice: bf16 softmax
    // along a middle dim ran at 7 % of memcpy). Same sums, same results.
    if (!log && n * 16 <= kColumnBuffer) {
      alignas(64) float buffer[kColumnBuffer];
      const int64_t w = std::min(nc, kColumnBuffer / n / 16 * 16);
      for (int64_t c0 = 0; c0 < nc; c0 += w) {
        const int64_t cw = std::min(w, nc - c0);
        for (int64_t j = 0; j < n; ++j) {
          const T* p = x + j * inner + c0;
          float* e = buffer + j * cw;
          shifted_exps(p, mx + c0, e, cw);
#pragma omp simd
          for (int64_t c = 0; c < cw; ++c) sum[c0 + c] += e[c];
        }
        for (int64_t c = c0; c < c0 + cw; ++c) sum[c] = 1.0f / sum[c];
        for (int64_t j = 0; j < n; ++j) {
          float* e = buffer + j * cw;
#pragma omp simd
          for (int64_t c = 0; c < cw; ++c) e[c] *= sum[c0 + c];
          narrow_block(e, y + j * inner + c0, cw);
        }
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
          shifted_exps(p, mx, q, nc);
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
      shifted_exps(p, mx, e, nc);
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) sum[c] += e[c];
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
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) store_acc(q, c, Acc((load_acc<Acc>(p, c) - mx[c]) - sum[c]));
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c)
        store_acc(q, c, Acc(math::exp_shifted_acc(load_acc<Acc>(p, c) - mx[c]) * sum[c]));
    }
  }
}

// One row of the backward: softmax gx = y * (g - sum(g * y)); log_softmax gx = g - exp(y) * sum(g).
template <typename Acc, typename Y, typename G>
void softmax_backward_row(const Y* y, const Y* g, G* gx, int64_t n, bool log) {
  Acc s = 0;
  if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += load_acc<Acc>(g, i);
    if constexpr (std::is_same_v<Acc, float>) {  // exp(y) a chunk at a time through exp_floats
      alignas(64) float e[kRowBuffer];
      for (int64_t s0 = 0; s0 < n; s0 += kRowBuffer) {
        const int64_t m = std::min(kRowBuffer, n - s0);
        shifted_exps(y + s0, nullptr, e, m);
#pragma omp simd
        for (int64_t i = 0; i < m; ++i) store_acc(gx, s0 + i, load_acc<float>(g, s0 + i) - e[i] * s);
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        store_acc(gx, i, Acc(load_acc<Acc>(g, i) - math::exp_shifted_acc(load_acc<Acc>(y, i)) * s));
    }
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += load_acc<Acc>(g, i) * load_acc<Acc>(y, i);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_acc(gx, i, Acc(load_acc<Acc>(y, i) * (load_acc<Acc>(g, i) - s)));
  }
}

template <typename Acc, typename Y, typename G>
void softmax_backward_columns(const Y* y, const Y* g, G* gx, int64_t n, int64_t inner, int64_t nc, bool log) {
  alignas(64) Acc s[kCols];
  for (int64_t c = 0; c < nc; ++c) s[c] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const Y* py = y + j * inner;
    const Y* pg = g + j * inner;
    if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) s[c] += load_acc<Acc>(pg, c);
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) s[c] += load_acc<Acc>(pg, c) * load_acc<Acc>(py, c);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const Y* py = y + j * inner;
    const Y* pg = g + j * inner;
    G* q = gx + j * inner;
    if (log) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
      if constexpr (std::is_same_v<Acc, float>) {
        alignas(64) float e[kCols];
        shifted_exps(py, nullptr, e, nc);
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
      for_each_block(d, [&](int64_t o, int64_t c0, int64_t nc) {
        const int64_t base = o * d.n * d.inner + c0;
        if (d.inner == 1)
          softmax_row<Acc>(x + base, y + base, d.n, log);
        else
          softmax_columns<Acc>(x + base, y + base, d.n, d.inner, nc, log);
      });
    });
  });
}

// y, gy: the forward's output and its gradient (one dtype); gx: any floating dtype; all
// contiguous [outer, n, inner].
void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  const SoftmaxDims d = softmax_dims(y);
  if (d.outer * d.n * d.inner == 0) return;
  MT_CHECK(gy.dtype() == y.dtype(), "softmax_backward", "the gradient's dtype ", dtype_name(gy.dtype()),
           " differs from the output's ", dtype_name(y.dtype()));
  dispatch_floating(y.dtype(), "softmax_backward", [&]<typename Y>() {
    dispatch_floating(gx.dtype(), "softmax_backward", [&]<typename G>() {
      using Acc = pair_acc_t<Y, G>;
      const Y* py = static_cast<const Y*>(y.raw_data());
      const Y* pg = static_cast<const Y*>(gy.raw_data());
      G* q = static_cast<G*>(gx.raw_data());
      for_each_block(d, [&](int64_t o, int64_t c0, int64_t nc) {
        const int64_t base = o * d.n * d.inner + c0;
        if (d.inner == 1)
          softmax_backward_row<Acc>(py + base, pg + base, q + base, d.n, log);
        else
          softmax_backward_columns<Acc>(py + base, pg + base, q + base, d.n, d.inner, nc, log);
      });
    });
  });
}

}  // namespace mantissa::cpu
