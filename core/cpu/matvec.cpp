// Matrix-vector products (out [B, M, N] with N == 1 or M == 1, fp32 / fp64): memory-bound, one
// pass over the matrix, where a GEMM library packs the operands for a product that has no reuse
// (oneDNN's matmul ran [1024, 1024] @ [1024] at 7 GFLOP/s, a fifth of a read of the matrix).
// Two loops cover every layout with a unit stride along k or along the output:
//   dots: each output is a dot product of a matrix row (contiguous along k) with the vector;
//   axpy: the output vector accumulates the matrix's columns (contiguous along the output),
//         each times one element of the vector.
// Sums in T (fp32 in fp32, as a BLAS sgemv), 4 rows at a time in `dots` (16 lanes each on AVX-512).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mantissa::cpu {

namespace {

// sum_k w[k] x[k].
template <typename T>
T dot1(const T* w, const T* x, int64_t K) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < K; ++k) s += w[k] * x[k];
  return s;
}

// The dot products of 4 rows w0..w3 with x over K elements (GCC turned the loop over four rows
// into gathers; written out, it is 5 loads and 4 FMAs per 16 elements).
template <typename T>
void dot4(const T* w0, int64_t ld, const T* x, int64_t K, T* y) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const float *w1 = w0 + ld, *w2 = w1 + ld, *w3 = w2 + ld;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      const __m512 v = _mm512_loadu_ps(x + k);
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(w0 + k), v, s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(w1 + k), v, s1);
      s2 = _mm512_fmadd_ps(_mm512_loadu_ps(w2 + k), v, s2);
      s3 = _mm512_fmadd_ps(_mm512_loadu_ps(w3 + k), v, s3);
    }
    if (k < K) {
      const __mmask16 m = __mmask16((1u << (K - k)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + k), v, s0);
      s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + k), v, s1);
      s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + k), v, s2);
      s3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + k), v, s3);
    }
    y[0] = _mm512_reduce_add_ps(s0), y[1] = _mm512_reduce_add_ps(s1);
    y[2] = _mm512_reduce_add_ps(s2), y[3] = _mm512_reduce_add_ps(s3);
    return;
  }
#endif
  for (int r = 0; r < 4; ++r) y[r] = dot1(w0 + r * ld, x, K);
}

// y[r] = sum_k w[r * ld + k] x[k] for r < rows (x contiguous).
template <typename T>
void dots(const T* w, int64_t ld, const T* x, int64_t rows, int64_t K, T* y) {
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(K, 1)), [&](int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) dot4(w + r * ld, ld, x, K, y + r);
    for (; r < r1; ++r) y[r] = dot1(w + r * ld, x, K);
  });
}

// y[i] = sum_k x[k * xs] w[k * ld + i] for i < n (w's columns k contiguous along i).
template <typename T>
void axpy(const T* w, int64_t ld, const T* x, int64_t xs, int64_t n, int64_t K, T* y) {
  // Chunks of 1024 outputs stay in L1 while every column passes over them.
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(0, chunks, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(K * kChunk, 1)),
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   const int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
                   T* yc = y + i0;
                   std::fill(yc, yc + len, T(0));
                   for (int64_t k = 0; k < K; ++k) {
                     const T xk = x[k * xs];
                     const T* wk = w + k * ld + i0;
#pragma omp simd
                     for (int64_t i = 0; i < len; ++i) yc[i] += xk * wk[i];
                   }
                 }
               });
}

// One product of the batch: y [n] = the matrix (rows along the output, `out_stride` apart;
// columns along k, `k_stride` apart; one of them 1) times the vector v [K] (stride vs).
template <typename T>
void matvec_one(const T* m, int64_t out_stride, int64_t k_stride, const T* v, int64_t vs, int64_t n, int64_t K, T* y,
                std::vector<T>& packed) {
  if (k_stride == 1) {
    const T* x = v;
    if (vs != 1) {  // the dot products read the vector K times over: contiguous first
      packed.resize(size_t(K));
      for (int64_t k = 0; k < K; ++k) packed[size_t(k)] = v[k * vs];
      x = packed.data();
    }
    dots(m, out_stride, x, n, K, y);
  } else {
    axpy(m, k_stride, v, vs, n, K, y);
  }
}

}  // namespace

bool matvec(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  if ((M != 1 && N != 1) || K == 0 || out.numel() == 0) return false;
  if (a.dtype() != DType::Float32 && a.dtype() != DType::Float64) return false;
  // The matrix operand: a when N == 1 (its rows are the outputs), b when M == 1 (its columns are).
  const bool a_is_matrix = N == 1 && M > 1;
  const Tensor& mat = a_is_matrix ? a : b;
  const int64_t out_stride = a_is_matrix ? a.stride(1) : b.stride(2);
  const int64_t k_stride = a_is_matrix ? a.stride(2) : b.stride(1);
  if (k_stride != 1 && out_stride != 1 && M * N > 1) return false;  // neither loop reads it in runs
  dispatch_floating(a.dtype(), "matmul", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* pm = static_cast<const T*>(mat.raw_data());
      const T* pv = static_cast<const T*>((a_is_matrix ? b : a).raw_data());
      const Tensor& vec = a_is_matrix ? b : a;
      const int64_t vs = a_is_matrix ? b.stride(1) : a.stride(2), n = M * N;
      T* py = static_cast<T*>(out.raw_data());
      std::vector<T> packed;
      for (int64_t i = 0; i < B; ++i) {
        T* y = py + i * n;
        const T* m = pm + i * mat.stride(0);
        const T* v = pv + i * vec.stride(0);
        matvec_one(m, out_stride, k_stride, v, vs, n, K, y, packed);
        if (bias.defined()) {
          const T* pb = static_cast<const T*>(bias.raw_data());
          for (int64_t j = 0; j < n; ++j) y[j] += pb[N == 1 ? 0 : j];
        }
      }
    }
  });
  return true;
}

}  // namespace mantissa::cpu
