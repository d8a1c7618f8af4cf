// Batched GEMM on the CPU through oneDNN (core/cpu/onednn) or Eigen. fp16/bf16 operands
// that oneDNN does not take are widened to fp32, multiplied in fp32 and rounded once (the
// numerics of tensor cores): Eigen's own half GEMM runs at well under 1 GFLOP/s.
// GCC 12 flags Eigen's AVX-512 GEMM kernels with -Wmaybe-uninitialized false positives
// (the "__Y" of avx512fintrin.h); they bury real warnings, so silence them in this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/onednn.h"

namespace mantissa::cpu {

namespace {

using Eigen::Dynamic;
using Eigen::OuterStride;
template <typename T>
using RowMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>;
template <typename T>
using ColMat = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::ColMajor>;

// A 2-D operand: rows x cols with element strides (rs, cs); one of them must be 1.
template <typename T>
struct Operand {
  const T* p;
  int64_t rows, cols, rs, cs;
};

// C (row-major, contiguous) = A * B for T in {float, double}.
template <typename T>
void gemm(const Operand<T>& a, const Operand<T>& b, T* c) {
  Eigen::Map<RowMat<T>> C(c, a.rows, b.cols);
  auto run = [&](const auto& A) {
    if (b.cs == 1)
      C.noalias() = A * Eigen::Map<const RowMat<T>, 0, OuterStride<>>(b.p, b.rows, b.cols, OuterStride<>(b.rs));
    else
      C.noalias() = A * Eigen::Map<const ColMat<T>, 0, OuterStride<>>(b.p, b.rows, b.cols, OuterStride<>(b.cs));
  };
  if (a.cs == 1)
    run(Eigen::Map<const RowMat<T>, 0, OuterStride<>>(a.p, a.rows, a.cols, OuterStride<>(a.rs)));
  else
    run(Eigen::Map<const ColMat<T>, 0, OuterStride<>>(a.p, a.rows, a.cols, OuterStride<>(a.cs)));
}

// Copies a half/bf16 operand into a contiguous fp32 buffer, keeping its orientation (a
// transposed view stays column-major) so that both the copy and the GEMM read memory in order.
template <typename T>
Operand<float> widen(const Operand<T>& o, std::vector<float>& buf) {
  buf.resize(size_t(o.rows * o.cols));
  float* w = buf.data();
  const bool col_major = o.cs != 1 && o.rs == 1;
  const int64_t lines = col_major ? o.cols : o.rows, len = col_major ? o.rows : o.cols;
  const int64_t stride = col_major ? o.cs : o.rs, step = col_major ? o.rs : o.cs;
  parallel_for(0, lines, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
    for (int64_t l = b; l < e; ++l) {
      const T* src = o.p + l * stride;
      float* dst = w + l * len;
      if (step == 1) {
#pragma omp simd
        for (int64_t k = 0; k < len; ++k) dst[k] = static_cast<float>(src[k]);
      } else {
        for (int64_t k = 0; k < len; ++k) dst[k] = static_cast<float>(src[k * step]);
      }
    }
  });
  if (col_major) return {w, o.rows, o.cols, 1, o.rows};
  return {w, o.rows, o.cols, o.cols, 1};
}

// c [M, N] (row-major, in the accumulator type Acc) += bias [N] on every row; bias may be null.
// For fp16/bf16 this runs on the fp32 accumulator, before the one rounding.
template <typename Acc, typename T>
void add_bias_rows(Acc* c, const T* bias, int64_t M, int64_t N) {
  if (!bias) return;
  parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(N, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      Acc* row = c + i * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) row[j] += static_cast<Acc>(bias[j]);
    }
  });
}

// c[i] = round(w[i]): the single rounding of an fp32-accumulated product.
template <typename T>
void narrow(const float* w, T* c, int64_t n) {
  parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t j = b; j < e; ++j) c[j] = T(w[j]);
  });
}

// t (3-D, or the 1-D bias) widened to fp32 with its orientation: a transposed operand stays
// a transposed view of a contiguous copy, so the copy reads and writes memory in order.
Tensor widened(const Tensor& t) {
  auto swap_last_two = [](const Tensor& x) {
    return make_view(x, {x.size(0), x.size(2), x.size(1)}, {x.stride(0), x.stride(2), x.stride(1)}, x.offset());
  };
  const bool transposed = t.dim() == 3 && !t.is_contiguous() && swap_last_two(t).is_contiguous();
  const Tensor src = transposed ? swap_last_two(t) : t;
  Tensor w = make_tensor(src.sizes(), DType::Float32, Device::cpu());
  copy(src, w);
  return transposed ? swap_last_two(w) : w;
}

// Whether t [B, R, C] repeats a row or a column (a stride 0 along a dim longer than 1): a
// gradient expanded from a sum, [256, 1] with strides (0, 1).
bool broadcast_inside_matrices(const Tensor& t) {
  return (t.size(1) > 1 && t.stride(1) == 0) || (t.size(2) > 1 && t.stride(2) == 0);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  // Such an operand sent oneDNN to its reference kernel (a GAN's gradient penalty: ones [256,
  // 1] expanded x [1, 512] took 4 ms, 12 us materialized): it is copied first, M K or K N
  // elements against the product's M N K multiply-adds.
  if (broadcast_inside_matrices(a) || broadcast_inside_matrices(b)) {
    auto dense = [](const Tensor& t) {
      if (!broadcast_inside_matrices(t)) return t;
      Tensor d = make_tensor(t.sizes(), t.dtype(), Device::cpu());
      copy(t, d);
      return d;
    };
    matmul(dense(a), dense(b), bias, out);
    return;
  }
  if (matvec(a, b, bias, out)) return;
  if (!bias.defined() && matmul_k_major(a, b, out)) return;
  if (onednn::matmul(a, b, bias, out)) return;
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  if (out.numel() == 0) return;
  if (a.dtype() == DType::Float16 && K > 0) {
    // No fp16 math on this CPU path: widen the operands once (vector conversions), multiply
    // with the fp32 path (oneDNN where enabled, 5x Eigen's widened blocks here), round once.
    Tensor out32 = make_tensor(out.sizes(), DType::Float32, Device::cpu());
    matmul(widened(a), widened(b), bias.defined() ? widened(bias) : Tensor(), out32);
    copy(out32, out);
    return;
  }
  dispatch_floating(a.dtype(), "matmul", [&]<typename T>() {
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    const T* pbias = bias.defined() ? static_cast<const T*>(bias.raw_data()) : nullptr;
    T* pc = static_cast<T*>(out.raw_data());
    auto batch = [&](int64_t i) {
      Operand<T> A{pa + i * a.stride(0), M, K, a.stride(1), a.stride(2)};
      Operand<T> Bm{pb + i * b.stride(0), K, N, b.stride(1), b.stride(2)};
      T* c = pc + i * M * N;
      if (K == 0) {  // an empty sum: the bias alone
        for (int64_t r = 0; r < M; ++r)
          for (int64_t j = 0; j < N; ++j) c[r * N + j] = pbias ? pbias[j] : T(0);
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        gemm<T>(A, Bm, c);
        add_bias_rows(c, pbias, M, N);
      } else {
        thread_local std::vector<float> wa, wb, wc;
        wc.resize(size_t(M * N));
        gemm<float>(widen(A, wa), widen(Bm, wb), wc.data());
        add_bias_rows(wc.data(), pbias, M, N);
        narrow(wc.data(), c, M * N);
      }
    };
    // Small matrices: spread the batch over threads (Eigen then stays single-threaded), unless
    // the whole batch is too little work to pay for the fork.
    if (B > 1 && M * N * K < (1 << 18) && B * M * N * K >= kParallelGrain) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < B; ++i) batch(i);
    } else {
      for (int64_t i = 0; i < B; ++i) batch(i);
    }
  });
}

}  // namespace mantissa::cpu
