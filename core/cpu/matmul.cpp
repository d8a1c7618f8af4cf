// Batched GEMM on the CPU through Eigen. fp16/bf16 operands are widened to fp32
// blocks, multiplied in fp32 and rounded once (the numerics of tensor cores):
// Eigen's own half GEMM runs at well under 1 GFLOP/s.
// GCC 12 flags Eigen's AVX-512 GEMM kernels with -Wmaybe-uninitialized false positives
// (the "__Y" of avx512fintrin.h); they bury real warnings, so silence them in this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

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
    if (b.cs == 1) C.noalias() = A * Eigen::Map<const RowMat<T>, 0, OuterStride<>>(b.p, b.rows, b.cols, OuterStride<>(b.rs));
    else C.noalias() = A * Eigen::Map<const ColMat<T>, 0, OuterStride<>>(b.p, b.rows, b.cols, OuterStride<>(b.cs));
  };
  if (a.cs == 1) run(Eigen::Map<const RowMat<T>, 0, OuterStride<>>(a.p, a.rows, a.cols, OuterStride<>(a.rs)));
  else run(Eigen::Map<const ColMat<T>, 0, OuterStride<>>(a.p, a.rows, a.cols, OuterStride<>(a.cs)));
}

// Copies a strided 2-D half/bf16 operand into a contiguous fp32 buffer.
template <typename T>
Operand<float> widen(const Operand<T>& o, std::vector<float>& buf) {
  buf.resize(size_t(o.rows * o.cols));
  for (int64_t i = 0; i < o.rows; ++i)
    for (int64_t j = 0; j < o.cols; ++j) buf[size_t(i * o.cols + j)] = static_cast<float>(o.p[i * o.rs + j * o.cs]);
  return {buf.data(), o.rows, o.cols, o.cols, 1};
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  dispatch_floating(a.dtype(), "matmul", [&]<typename T>() {
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    T* pc = static_cast<T*>(out.raw_data());
    auto batch = [&](int64_t i) {
      Operand<T> A{pa + i * a.stride(0), M, K, a.stride(1), a.stride(2)};
      Operand<T> Bm{pb + i * b.stride(0), K, N, b.stride(1), b.stride(2)};
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        gemm<T>(A, Bm, pc + i * M * N);
      } else {
        thread_local std::vector<float> wa, wb, wc;
        wc.resize(size_t(M * N));
        gemm<float>(widen(A, wa), widen(Bm, wb), wc.data());
        T* c = pc + i * M * N;
        for (int64_t j = 0; j < M * N; ++j) c[j] = T(wc[size_t(j)]);
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
