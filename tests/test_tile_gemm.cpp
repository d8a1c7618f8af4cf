// The tile GEMMs (core/cpu/tile_gemm.h) that the CPU attention kernels multiply their tiles
// with, bf16 and fp32: every A layout and B packing against a float64 product of the same
// values, at shapes that leave partial vectors, row blocks and passes along k, odd K, alpha and
// accumulation; an odd bf16 K never reads the values past the last k (NaN there stays out).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu/tile_gemm.h"
#include "core/error.h"

namespace tile = mantissa::cpu::tile;

namespace {

// The library decides by its own build flags (this test's may differ).
#define SKIP_WITHOUT_BF16_TILES() \
  if (!tile::available()) GTEST_SKIP() << "this build of Mantissa does not target AVX512-BF16"

uint16_t bf16_bits(float f) {  // truncation: the test needs bf16 values, not a rounding
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return uint16_t(u >> 16);
}
double bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// rows x cols of random bf16 values, row-major with leading dimension ld (padding NaN).
std::vector<uint16_t> random_bf16(int64_t rows, int64_t cols, int64_t ld, std::mt19937& gen) {
  std::normal_distribution<float> d;
  std::vector<uint16_t> x(size_t(rows * ld), bf16_bits(std::numeric_limits<float>::quiet_NaN()));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) x[size_t(i * ld + j)] = bf16_bits(d(gen));
  return x;
}

// c (fp32) against alpha * A B + c0 in float64: within fp32 accumulation over K terms of the
// products' magnitudes (one rounding per add, the scaling and the accumulation).
void expect_product(const std::vector<float>& c, const std::vector<double>& want, const std::vector<double>& mag,
                    int64_t K, const char* what) {
  for (size_t i = 0; i < c.size(); ++i)
    ASSERT_NEAR(c[i], want[i], mag[i] * double(K + 4) * 0x1p-24 + 1e-30) << what << ", K " << K << ", element " << i;
}

}  // namespace

TEST(TileGemm, PlainAAndTransposedPackedBMatchFloat64) {
  SKIP_WITHOUT_BF16_TILES();
  // C = alpha A X^T (A [M, K] row-major, X [N, K] rows along k): attention's Q K^T and dO V^T.
  std::mt19937 gen(3);
  for (auto [M, N, K] :
       {std::array<int64_t, 3>{64, 150, 32}, {7, 33, 31}, {13, 64, 1}, {5, 17, 300}, {12, 48, 128}, {9, 40, 70}}) {
    // A read in place (its rows NaN past K: an odd K's last pair reads one); X's rows NaN past K
    // too, 4-byte aligned for an even K (16 x 16 register transposes of its words) and not for
    // an odd one (gathers).
    const int64_t la = (K + 4) / 2 * 2, ldx = K + 2, ldb = tile::padded_columns(N);
    std::vector<uint16_t> a = random_bf16(M, K, la, gen), x = random_bf16(N, K, ldx, gen);
    std::vector<uint32_t> packed(size_t((K + 1) / 2 * ldb));
    tile::pack_transposed(x.data(), ldx, N, K, packed.data(), ldb);
    for (bool accumulate : {false, true}) {
      const int64_t ldc = N + 5;
      std::vector<float> c(size_t(M * ldc), 0.5f);
      std::vector<double> want(c.size()), mag(c.size());
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          double s = 0, m = 0;
          for (int64_t k = 0; j < N && k < K; ++k) {
            const double p = bf16_value(a[size_t(i * la + k)]) * bf16_value(x[size_t(j * ldx + k)]);
            s += p;
            m += std::fabs(p);
          }
          const bool inside = j < N;
          want[size_t(i * ldc + j)] = inside ? 0.75 * s + (accumulate ? 0.5 : 0.0) : 0.5;  // columns past N untouched
          mag[size_t(i * ldc + j)] = 0.75 * m + 1.0;
        }
      tile::gemm({a.data(), la, 2}, {packed.data(), ldb}, M, N, K, 0.75f, accumulate, c.data(), ldc);
      expect_product(c, want, mag, K, accumulate ? "accumulate" : "overwrite");
    }
  }
}

TEST(TileGemm, TransposedAAndRowPackedBMatchFloat64) {
  SKIP_WITHOUT_BF16_TILES();
  // C = X^T Y (X [K, M] fp32 rounded to bf16, Y [K, N] bf16 or fp32): attention's P^T dO and
  // dS^T Q; and A = fp32 rows rounded (dS K).
  std::mt19937 gen(4);
  std::normal_distribution<float> d;
  for (auto [M, N, K] : {std::array<int64_t, 3>{150, 32, 64}, {33, 17, 7}, {64, 128, 63}, {9, 5, 1}, {20, 40, 301}}) {
    std::vector<float> x(size_t(K * M)), xf(size_t(K * N));
    for (auto& v : x) v = float(bf16_value(bf16_bits(d(gen))));  // exact in bf16: rounding is the identity
    for (auto& v : xf) v = float(bf16_value(bf16_bits(d(gen))));
    std::vector<uint16_t> y = random_bf16(K, N, N, gen);
    const int64_t lda = tile::padded_columns(M), ldb = tile::padded_columns(N);
    std::vector<uint32_t> xa(size_t((K + 1) / 2 * lda)), yb(size_t((K + 1) / 2 * ldb)), fb(yb.size());
    tile::pack_rows(x.data(), M, K, M, xa.data(), lda);
    tile::pack_rows(y.data(), N, K, N, yb.data(), ldb);
    tile::pack_rows(xf.data(), N, K, N, fb.data(), ldb);
    std::vector<float> c(size_t(M * N)), cf(size_t(M * N));
    const tile::PairRows at{reinterpret_cast<const uint16_t*>(xa.data()), 2, 2 * lda};
    tile::gemm(at, {yb.data(), ldb}, M, N, K, 1.0f, false, c.data(), N);
    tile::gemm(at, {fb.data(), ldb}, M, N, K, 1.0f, false, cf.data(), N);
    std::vector<double> want(c.size()), wantf(c.size()), mag(c.size()), magf(c.size());
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(x[size_t(k * M + i)]) * bf16_value(y[size_t(k * N + j)]);
          const double pf = double(x[size_t(k * M + i)]) * double(xf[size_t(k * N + j)]);
          want[size_t(i * N + j)] += p;
          mag[size_t(i * N + j)] += std::fabs(p);
          wantf[size_t(i * N + j)] += pf;
          magf[size_t(i * N + j)] += std::fabs(pf);
        }
    expect_product(c, want, mag, K, "bf16 rows");
    expect_product(cf, wantf, magf, K, "fp32 rows");
    // The same X as a row-major fp32 A (its transpose, rounded by round_rows).
    std::vector<float> xt(size_t(M * K));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) xt[size_t(i * K + k)] = x[size_t(k * M + i)];
    const int64_t ldr = K + (K & 1);
    std::vector<uint16_t> rounded(size_t(M * ldr));
    tile::round_rows(xt.data(), K, M, K, rounded.data(), ldr);
    std::vector<float> cr(size_t(M * N));
    tile::gemm({rounded.data(), ldr, 2}, {yb.data(), ldb}, M, N, K, 1.0f, false, cr.data(), N);
    expect_product(cr, want, mag, K, "rounded rows");
  }
}

TEST(TileGemm, RoundsToNearestEvenAndEmptySums) {
  SKIP_WITHOUT_BF16_TILES();
  // 1 + 2^-8 (a tie between 1 and 1 + 2^-7) rounds to 1; 1 + 3 * 2^-8 to 1 + 2^-6.
  const float x[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  uint16_t r[2];
  tile::round_rows(x, 2, 1, 2, r, 2);
  EXPECT_EQ(bf16_value(r[0]), 1.0);
  EXPECT_EQ(bf16_value(r[1]), 1.0 + 0x1p-6);
  // K = 0: C = 0 (or left as it is when accumulating).
  float c[3] = {1, 2, 3};
  const uint32_t b[16] = {};
  tile::gemm({r, 2, 2}, {b, 16}, 1, 3, 0, 1.0f, true, c, 3);
  EXPECT_EQ(c[2], 3.0f);
  tile::gemm({r, 2, 2}, {b, 16}, 1, 3, 0, 1.0f, false, c, 3);
  EXPECT_EQ(c[0], 0.0f);
  EXPECT_EQ(c[2], 0.0f);
}

TEST(TileGemm, UnavailableEntriesThrow) {
  if (tile::available()) GTEST_SKIP() << "built with AVX512-BF16";
  float c = 0;
  EXPECT_THROW(tile::gemm(tile::PairRows{nullptr, 0, 2}, tile::PackedB{nullptr, 16}, 1, 1, 1, 1.0f, false, &c, 1),
               mantissa::Error);
}

TEST(TileGemm, Fp32FormsAndTransposeMatchFloat64) {
  // The fp32 form: A at any strides (row-major, and a transposed view), B's rows in place (no
  // padding: its last vector masked), and transpose at widths that are not whole vectors.
  SKIP_WITHOUT_BF16_TILES();
  std::mt19937 gen(5);
  std::normal_distribution<float> d;
  for (auto [M, N, K] : {std::array<int64_t, 3>{64, 150, 32}, {7, 33, 31}, {13, 5, 1}, {5, 17, 300}, {130, 64, 65}}) {
    std::vector<float> x(size_t(M * K)), y(size_t(K * (N + 3)));
    for (auto& v : x) v = d(gen);
    for (auto& v : y) v = d(gen);
    // A = X [M, K] row-major; A' = (X^T)^T read through the transposed copy with strides {1, M}.
    std::vector<float> xt(size_t(K * M), -1.0f);
    tile::transpose(x.data(), K, M, K, xt.data(), M);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) ASSERT_EQ(xt[size_t(k * M + i)], x[size_t(i * K + k)]);
    std::vector<double> want(size_t(M * N)), mag(size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(x[size_t(i * K + k)]) * double(y[size_t(k * (N + 3) + j)]);
          want[size_t(i * N + j)] += 2.0 * p;
          mag[size_t(i * N + j)] += 2.0 * std::fabs(p);
        }
    std::vector<float> c(size_t(M * N)), ct(size_t(M * N), 1.0f);
    tile::gemm(tile::StridedA{x.data(), K, 1}, tile::RowsB{y.data(), N + 3}, M, N, K, 2.0f, false, c.data(), N);
    tile::gemm(tile::StridedA{xt.data(), 1, M}, tile::RowsB{y.data(), N + 3}, M, N, K, 2.0f, true, ct.data(), N);
    expect_product(c, want, mag, K, "fp32 row-major A");
    for (size_t i = 0; i < want.size(); ++i) {  // c held 1: its rounding too
      want[i] += 1.0;
      mag[i] += 1.0;
    }
    expect_product(ct, want, mag, K, "fp32 transposed A, accumulated");
  }
}
