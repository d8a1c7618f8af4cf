// Row-major batched GEMMs mapped to cuBLAS's column-major arguments (cuda/matmul.cpp's
// gemm_batched), in plain C++ so the CPU tests can run the mapping against a column-major
// reference GEMM.
//
// A row-major [R, C] matrix is a column-major [C, R] one, so c = a b (row-major) is computed
// as c^T = b^T a^T (column-major): cuBLAS's first operand is our b, its second our a, m = N,
// n = M. An operand stored as its transpose is passed with op T.
#pragma once
#include <cstdint>

namespace mantissa {

// Matrix g of an operand starts at element offset + g * batch_stride of its buffer; stored
// rows of `ld` elements; `transposed`: the operand [R, C] is stored as [C, R].
struct RowMajorOperand {
  int64_t offset = 0;
  bool transposed = false;
  int64_t ld = 0, batch_stride = 0;
};

// c[g] (row-major [M, N], rows of ldc, at c_offset + g * c_stride) = alpha a[g] [M, K] b[g] [K, N].
struct RowMajorGemm {
  int64_t batch = 0, M = 0, N = 0, K = 0;
  float alpha = 1;
  RowMajorOperand a, b;
  int64_t c_offset = 0, ldc = 0, c_stride = 0;
};

// cublasGemmStridedBatchedEx's arguments: C (m x n, column-major) = alpha op(A) op(B), with
// A = our b and B = our a.
struct ColumnMajorGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, stride_a = 0, ldb = 0, stride_b = 0, ldc = 0, stride_c = 0;
  int64_t batch = 0;
};

inline ColumnMajorGemm column_major(const RowMajorGemm& g) {
  ColumnMajorGemm c;
  c.trans_a = g.b.transposed;
  c.trans_b = g.a.transposed;
  c.m = g.N;
  c.n = g.M;
  c.k = g.K;
  c.lda = g.b.ld;
  c.stride_a = g.b.batch_stride;
  c.ldb = g.a.ld;
  c.stride_b = g.a.batch_stride;
  c.ldc = g.ldc;
  c.stride_c = g.c_stride;
  c.batch = g.batch;
  return c;
}

}  // namespace mantissa
