// Small GEMMs with fp32 results for kernels that multiply tiles inside their own loops
// (core/cpu/attention.cpp: one thread per tile, where a oneDNN call or an Eigen product per tile
// costs more than the tile's arithmetic). C = alpha A B (+ C), fp32 accumulation:
//   bf16: AVX512-BF16 dot products, one rounding per output sum, denormal inputs read as zero
//         (as in oneDNN's bf16 kernels). vdpbf16ps multiplies pairs along k: A is read as 32-bit
//         words (A(i, 2p), A(i, 2p + 1)) where it lies (a bf16 matrix whose rows run along k, or
//         a packed one), B as packed words (B(2p, j), B(2p + 1, j)), 16 columns per vector. An
//         odd K reads its last pair's high halves as zero on both sides (whatever the memory past
//         the last k holds).
//   fp32: FMAs, A(i, k) broadcast at any strides, B's rows read in place.
// Both in blocks of up to 16 accumulators (4-12 rows of C by 1-4 vectors of 16 columns), passes
// of 128 steps along k, so that a 64-column panel of B stays in L1.
//
// The library's build decides (its -march): the forms are built where the compiler targets
// AVX512-BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids); elsewhere `available()` is false
// and the entries throw mantissa::Error. Kernels test __AVX512BF16__ at compile time.
#pragma once
#include <cstdint>

namespace mantissa::cpu::tile {

// Whether the library was built with the tile GEMMs.
bool available();

// Columns of a packed B rounded up to whole vectors: the least leading dimension in words.
inline int64_t padded_columns(int64_t n) { return (n + 15) / 16 * 16; }
// The leading dimension to pack or transpose a B into: whole vectors and one more, so that
// rows a power of two apart do not share L1 sets. In a 64-byte aligned buffer every row
// then starts a cache line: B's vector loads split across two lines halved the rate (fp32
// [64, 512] x [512, 32]: 124 against 215-233 GFLOP/s on one Zen 5 core).
inline int64_t packed_ld(int64_t n) { return padded_columns(n) + 16; }

// ---- bf16

// A [M, K] (bf16 bits): the pair (A(i, 2p), A(i, 2p + 1)) is the 32-bit word at element
// i * row + p * pair of `p`. A row-major bf16 matrix with leading dimension ld: {p, ld, 2};
// pack_rows' words read as the transposed matrix: {words, 2, 2 * ld}.
struct PairRows {
  const uint16_t* p;
  int64_t row, pair;
};

// B [K, N] packed: word p * ld + j of `w` holds (B(2p, j), B(2p + 1, j)); ld a multiple of 16,
// the words from N to ld zero.
struct PackedB {
  const uint32_t* w;
  int64_t ld;
};

// c[i * ldc + j] = alpha * sum_k A(i, k) B(k, j) (+ c[i * ldc + j] when accumulate), i < M, j < N.
void gemm(PairRows a, PackedB b, int64_t M, int64_t N, int64_t K, float alpha, bool accumulate, float* c, int64_t ldc);

// B = X^T for X [N, K] (bf16, leading dimension ld), whose rows run along k: dst[p * dld + j]
// = (X(j, 2p), X(j, 2p + 1)), the 32-bit words of X's rows transposed.
void pack_transposed(const uint16_t* x, int64_t ld, int64_t N, int64_t K, uint32_t* dst, int64_t dld);
// B = X for X [K, N] (leading dimension ld): dst[p * dld + j] = (X(2p, j), X(2p + 1, j)), two
// rows interleaved; fp32 rows are rounded to bf16 (nearest even) first.
void pack_rows(const uint16_t* x, int64_t ld, int64_t K, int64_t N, uint32_t* dst, int64_t dld);
void pack_rows(const float* x, int64_t ld, int64_t K, int64_t N, uint32_t* dst, int64_t dld);
// dst[i * dld + k] = x[i * ld + k] rounded to bf16 (nearest even) for k < K, 0 for k in [K, dld):
// an fp32 matrix as a row-major bf16 A ({dst, dld, 2}; dld >= K rounded up to even).
void round_rows(const float* x, int64_t ld, int64_t M, int64_t K, uint16_t* dst, int64_t dld);

// ---- fp32

// A [M, K]: A(i, k) = p[i * row + k * step] (a row-major matrix: {p, ld, 1}; its transpose: {p, 1, ld}).
struct StridedA {
  const float* p;
  int64_t row, step;
};
// B [K, N]: B(k, j) = p[k * ld + j], read in place (no padding needed).
struct RowsB {
  const float* p;
  int64_t ld;
};

// c[i * ldc + j] = alpha * sum_k A(i, k) B(k, j) (+ c[i * ldc + j] when accumulate), i < M, j < N.
void gemm(StridedA a, RowsB b, int64_t M, int64_t N, int64_t K, float alpha, bool accumulate, float* c, int64_t ldc);

// dst[k * dld + j] = x[j * ld + k] for j < N, k < K; zero for j in [N, dld): B = X^T for X [N, K].
void transpose(const float* x, int64_t ld, int64_t N, int64_t K, float* dst, int64_t dld);

}  // namespace mantissa::cpu::tile
