// The CPU row of the dispatch table (contracts in core/backend.h, declarations generated from
// its kernel list).
#pragma once
#include "core/backend.h"

namespace mantissa::cpu {
MT_BACKEND_KERNELS(MT_BACKEND_DECLARATION)

// Whether these kernels were compiled with AVX-512 (MANTISSA_NATIVE on such a CPU). The tests are
// compiled for the baseline CPU, so their own __AVX512F__ says nothing about the library's;
// assertions that hold for the AVX-512 vector forms only ask this.
bool kernels_use_avx512();

// out [B, M, N] = a [B, M, K] @ b [B, K, N], all bf16 or all fp32, B >= 2, for a transposed view
// a (a.stride(1) == 1) when N <= 64, or M <= 64 with b's rows contiguous, and for a transposed
// view b (b.stride(1) == 1) when N <= 64: AVX512-BF16 dot products over k-pairs, or fp32 FMAs
// (core/cpu/matmul_k_major.cpp; built where the compiler targets AVX512-BF16). False where it
// does not apply: the caller runs oneDNN or Eigen.
bool matmul_k_major(const Tensor& a, const Tensor& b, const Tensor& out);

// The same product when it is a matrix times a vector (N == 1 or M == 1), fp32 or fp64, with the
// matrix contiguous along k or along the output (core/cpu/matvec.cpp); false otherwise.
bool matvec(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);
}  // namespace mantissa::cpu
