// The CUDA attention's host half, checked on the CPU: the choice between batched GEMMs and
// the row kernels and its chunks (core/attention_plan.h); the GEMM schedule itself, each
// GEMM's operands mapped to cuBLAS's column-major arguments (core/gemm_args.h) and run by a
// column-major reference GEMM, round by round, must give attention and its gradients; and the
// row steps between the GEMMs (core/attention_rows.h, the kernels' own code run with a team
// of one lane) against softmax, dropout and its backward written out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "core/attention_plan.h"
#include "core/attention_rows.h"

namespace ap = mantissa::attention_plan;

namespace {

using Buffers = std::map<ap::Buffer, std::vector<double>>;

// cublasGemmStridedBatched's semantics on column-major buffers: C = alpha op(A) op(B).
void column_major_gemm(const mantissa::ColumnMajorGemm& c, float alpha, const double* A, const double* B, double* C) {
  for (int64_t g = 0; g < c.batch; ++g)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          const double a = c.trans_a ? A[g * c.stride_a + k + i * c.lda] : A[g * c.stride_a + i + k * c.lda];
          const double b = c.trans_b ? B[g * c.stride_b + j + k * c.ldb] : B[g * c.stride_b + k + j * c.ldb];
          s += a * b;
        }
        C[g * c.stride_c + i + j * c.ldc] = alpha * s;
      }
}

// Runs one GEMM of the plan as gemm_batched does: cuBLAS's A is our b, its B our a.
void run(Buffers& buf, const ap::Gemm& g) {
  const mantissa::ColumnMajorGemm c = mantissa::column_major(g.gemm);
  column_major_gemm(c, g.gemm.alpha, buf.at(g.b).data() + g.gemm.b.offset, buf.at(g.a).data() + g.gemm.a.offset,
                    buf.at(g.c).data() + g.gemm.c_offset);
}

std::vector<double> random_vector(size_t n, std::mt19937& rng) {
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST(AttentionPlan, ChunksFitTheBudget) {
  // GPT-sized: 256 problems of 128 x 128 in bf16, 12 bytes per score element: 196608 per problem.
  EXPECT_EQ(ap::score_bytes_per_problem(128, 128, 2), 128 * 128 * 12);
  EXPECT_EQ(ap::gemm_chunk(256, 128, 128, 32, 32, 2, ap::kRecommendedScoreMemory), 256);
  // A budget of two and a half problems: chunks of two.
  const int64_t per = ap::score_bytes_per_problem(70, 90, 4);
  EXPECT_EQ(ap::gemm_chunk(6, 70, 90, 16, 8, 4, per * 5 / 2), 2);
  EXPECT_EQ(ap::gemm_chunk(6, 70, 90, 16, 8, 4, per), 1);
  // Long rows: 16 problems of 8192 x 8192 fp16 (768 MiB each) do not fit 256 MiB: row kernels.
  EXPECT_EQ(ap::gemm_chunk(16, 8192, 8192, 64, 64, 2, ap::kRecommendedScoreMemory), 0);
  EXPECT_EQ(ap::gemm_chunk(16, 8192, 8192, 64, 64, 2, int64_t(1) << 30), 1);
  for (int64_t G = 1; G <= 40; ++G)
    for (int64_t budget : {per, 3 * per, 7 * per + 1, 100 * per}) {
      const int64_t c = ap::gemm_chunk(G, 70, 90, 16, 8, 4, budget);
      ASSERT_GE(c, 1);
      EXPECT_LE(c, G);
      EXPECT_LE(c * per, budget);
      EXPECT_TRUE(c == G || (c + 1) * per > budget) << "the chunk could be larger";
    }
}

TEST(AttentionPlan, RowKernelsWhereGemmsCannotRun) {
  const int64_t big = ap::kRecommendedScoreMemory;
  EXPECT_EQ(ap::gemm_chunk(0, 8, 8, 4, 4, 4, big), 0);  // nothing to do: the row kernels return early
  EXPECT_EQ(ap::gemm_chunk(2, 0, 8, 4, 4, 4, big), 0);
  EXPECT_EQ(ap::gemm_chunk(2, 8, 0, 4, 4, 4, big), 0);  // no keys: out = 0, lse = -inf
  EXPECT_EQ(ap::gemm_chunk(2, 8, 8, 0, 4, 4, big), 0);  // E = 0: every score is the mask alone
  EXPECT_EQ(ap::gemm_chunk(2, 8, 8, 4, 0, 4, big), 0);
  EXPECT_EQ(ap::gemm_chunk(2, 8, 8, 4, 4, 8, big), 0);  // fp64
  EXPECT_EQ(ap::gemm_chunk(2, 8, 8, 4, 4, 4, 0), 0);    // the budget says: row kernels
  // L * S beyond int64 must not overflow into a small product.
  EXPECT_EQ(ap::gemm_chunk(1, int64_t(1) << 40, int64_t(1) << 40, 4, 4, 2, big), 0);
  EXPECT_EQ(ap::gemm_chunk(1, int64_t(1) << 31, 1, 4, 4, 2, int64_t(1) << 62), 0);  // past cuBLAS's int
}

// 5 problems in rounds of 2 (offsets of the last, short round), L != S, E != Ev, causal:
// the schedule's forward and every gradient against attention written out directly.
TEST(AttentionPlan, GemmScheduleComputesAttention) {
  const int64_t G = 5, L = 7, S = 6, E = 3, Ev = 4, chunk = 2;
  const double scale = 0.6;
  std::mt19937 rng(4);
  Buffers buf;
  buf[ap::Buffer::Q] = random_vector(G * L * E, rng);
  buf[ap::Buffer::K] = random_vector(G * S * E, rng);
  buf[ap::Buffer::V] = random_vector(G * S * Ev, rng);
  buf[ap::Buffer::Gout] = random_vector(G * L * Ev, rng);
  for (ap::Buffer b : {ap::Buffer::Scores, ap::Buffer::GradP, ap::Buffer::P, ap::Buffer::GradS})
    buf[b].assign(chunk * L * S, 0);
  buf[ap::Buffer::Out].assign(G * L * Ev, 0);
  buf[ap::Buffer::GradQ].assign(G * L * E, 0);
  buf[ap::Buffer::GradK].assign(G * S * E, 0);
  buf[ap::Buffer::GradV].assign(G * S * Ev, 0);
  const std::vector<double>&q = buf[ap::Buffer::Q], &k = buf[ap::Buffer::K], &v = buf[ap::Buffer::V],
        &go = buf[ap::Buffer::Gout];

  // Direct: P[g, i, j] (causal), out, and the gradients.
  std::vector<double> P(G * L * S, 0.0), out(G * L * Ev, 0.0), gq(G * L * E, 0.0), gk(G * S * E, 0.0),
      gv(G * S * Ev, 0.0);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < L; ++i) {
      const int64_t nk = std::min(S, i + 1);
      std::vector<double> s(nk), dp(nk);
      double m = -INFINITY, sum = 0, D = 0;
      for (int64_t j = 0; j < nk; ++j) {
        s[j] = 0;
        for (int64_t e = 0; e < E; ++e) s[j] += q[(g * L + i) * E + e] * k[(g * S + j) * E + e];
        s[j] *= scale;
        m = std::max(m, s[j]);
      }
      for (int64_t j = 0; j < nk; ++j) sum += std::exp(s[j] - m);
      for (int64_t j = 0; j < nk; ++j) {
        const double p = std::exp(s[j] - m) / sum;
        P[(g * L + i) * S + j] = p;
        dp[j] = 0;
        for (int64_t e = 0; e < Ev; ++e) {
          out[(g * L + i) * Ev + e] += p * v[(g * S + j) * Ev + e];
          dp[j] += go[(g * L + i) * Ev + e] * v[(g * S + j) * Ev + e];
          gv[(g * S + j) * Ev + e] += p * go[(g * L + i) * Ev + e];
        }
        D += p * dp[j];
      }
      for (int64_t j = 0; j < nk; ++j) {
        const double ds = P[(g * L + i) * S + j] * (dp[j] - D) * scale;
        for (int64_t e = 0; e < E; ++e) {
          gq[(g * L + i) * E + e] += ds * k[(g * S + j) * E + e];
          gk[(g * S + j) * E + e] += ds * q[(g * L + i) * E + e];
        }
      }
    }

  // The schedule, with the row kernels' steps written out on the round buffers.
  auto row_forward = [&](int64_t g0, int64_t n) {
    for (int64_t r = 0; r < n * L; ++r) {
      const int64_t i = r % L, nk = std::min(S, i + 1);
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < nk; ++j) m = std::max(m, scale * buf[ap::Buffer::Scores][r * S + j]);
      for (int64_t j = 0; j < nk; ++j) sum += std::exp(scale * buf[ap::Buffer::Scores][r * S + j] - m);
      for (int64_t j = 0; j < S; ++j)
        buf[ap::Buffer::P][r * S + j] = j < nk ? std::exp(scale * buf[ap::Buffer::Scores][r * S + j] - m) / sum : 0;
      // The round's rows are those of problems g0.. against the direct P.
      for (int64_t j = 0; j < S; ++j)
        EXPECT_NEAR(buf[ap::Buffer::P][r * S + j], P[(g0 * L + r) * S + j], 1e-12) << "round " << g0;
    }
  };
  for (int64_t g0 = 0; g0 < G; g0 += chunk) {
    const int64_t n = std::min(chunk, G - g0);
    const auto f = ap::forward_gemms(L, S, E, Ev, g0, n);
    run(buf, f[0]);
    row_forward(g0, n);
    run(buf, f[1]);
  }
  for (size_t x = 0; x < out.size(); ++x) EXPECT_NEAR(buf[ap::Buffer::Out][x], out[x], 1e-12) << x;

  for (int64_t g0 = 0; g0 < G; g0 += chunk) {
    const int64_t n = std::min(chunk, G - g0);
    const auto b = ap::backward_gemms(L, S, E, Ev, float(scale), g0, n);
    run(buf, b[0]);
    run(buf, b[1]);
    row_forward(g0, n);
    for (int64_t r = 0; r < n * L; ++r) {
      double D = 0;
      for (int64_t j = 0; j < S; ++j) D += buf[ap::Buffer::P][r * S + j] * buf[ap::Buffer::GradP][r * S + j];
      for (int64_t j = 0; j < S; ++j)
        buf[ap::Buffer::GradS][r * S + j] = buf[ap::Buffer::P][r * S + j] * (buf[ap::Buffer::GradP][r * S + j] - D);
    }
    run(buf, b[2]);
    run(buf, b[3]);
    run(buf, b[4]);
  }
  // alpha is a float: the gradients through scale carry its rounding.
  const double tol = 1e-6;
  for (size_t x = 0; x < gv.size(); ++x) EXPECT_NEAR(buf[ap::Buffer::GradV][x], gv[x], 1e-12) << x;
  for (size_t x = 0; x < gq.size(); ++x) EXPECT_NEAR(buf[ap::Buffer::GradQ][x], gq[x], tol) << x;
  for (size_t x = 0; x < gk.size(); ++x) EXPECT_NEAR(buf[ap::Buffer::GradK][x], gk[x], tol) << x;
}

// Rows with a mask broadcast over heads (one row fully masked), causal visibility with more
// keys than queries, dropout, a NaN score and a row of NaN scores.
TEST(AttentionPlan, RowStepsMatchAttentionWrittenOut) {
  const int64_t B = 2, H = 2, L = 5, S = 7, G = B * H;
  std::mt19937 rng(7);
  std::vector<float> mask(B * L * S);  // [B, 1, L, S]
  for (float& m : mask) m = float(random_vector(1, rng)[0]);
  for (int64_t j = 0; j < S; ++j) mask[(1 * L + 3) * S + j] = -INFINITY;  // batch 1, query 3: nothing visible
  mask[(0 * L + 4) * S + 2] = -INFINITY;
  const float keep = 0.75f;
  const mantissa::attention_rows::Scores<float> a{H,        L,    S,           4,     4, 0.5f, true, keep,
                                                  1 / keep, 1234, mask.data(), L * S, 0, S,    1};
  auto identity = [](float v) { return v; };
  for (int64_t p = 0; p < G; ++p)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<float> dots(S), grad_dots(S);
      for (int64_t j = 0; j < S; ++j) {
        dots[j] = float(random_vector(1, rng)[0]);
        grad_dots[j] = float(random_vector(1, rng)[0]);
      }
      // One NaN score, and a row of only NaN scores (a NaN query), which must not look fully masked.
      const bool nan_row = (p == 2 && i == 4) || (p == 1 && i == 3);
      if (p == 2 && i == 4) dots[1] = NAN;
      if (p == 1 && i == 3) std::fill(dots.begin(), dots.end(), NAN);
      // Written out in double.
      const int64_t b = p / H, nk = std::min(S, i + 1);
      std::vector<double> s(S, -INFINITY), P(S, 0.0), drop(S, 0.0);
      double m = -INFINITY;
      for (int64_t j = 0; j < nk; ++j) {
        s[j] = double(dots[j]) * 0.5 + mask[(b * L + i) * S + j];
        if (s[j] > m) m = s[j];
        drop[j] = mantissa::math::DropoutKeep{1234, keep}(uint64_t((p * L + i) * S + j)) ? 1 / keep : 0.0;
      }
      double sum = 0;
      for (int64_t j = 0; j < nk; ++j)
        if (s[j] != -INFINITY) sum += std::exp(s[j] - m);
      const double lse = m == -INFINITY ? -INFINITY : m + std::log(sum);
      for (int64_t j = 0; j < nk; ++j) P[j] = lse == -INFINITY ? 0 : std::exp(s[j] - lse);
      double D = 0;
      for (int64_t j = 0; j < nk; ++j) D += P[j] * grad_dots[j] * drop[j];

      std::vector<float> pd(S, -1.0f), pd2(S, -1.0f), ds(S, -1.0f);
      const float got_lse = mantissa::attention_rows::forward_row(
          a, p, i, dots.data(), 0, 1, [&](int64_t j, float v) { pd[size_t(j)] = v; }, identity, identity);
      mantissa::attention_rows::backward_row(
          a, p, i, got_lse, dots.data(), grad_dots.data(), 0, 1,
          [&](int64_t j, float x, float y) {
            pd2[size_t(j)] = x;
            ds[size_t(j)] = y;
          },
          identity);
      const std::string where = "problem " + std::to_string(p) + " query " + std::to_string(i);
      if (nan_row) {
        EXPECT_TRUE(std::isnan(got_lse)) << where;
        for (int64_t j = 0; j < nk; ++j) {
          EXPECT_TRUE(std::isnan(pd[size_t(j)])) << where;
          EXPECT_TRUE(std::isnan(ds[size_t(j)])) << where;
        }
        continue;
      }
      if (lse == -INFINITY)
        EXPECT_EQ(got_lse, -INFINITY) << where;
      else
        EXPECT_NEAR(got_lse, lse, 1e-5) << where;
      for (int64_t j = 0; j < S; ++j) {
        EXPECT_NEAR(pd[size_t(j)], P[j] * drop[j], 1e-6) << where << " key " << j;
        EXPECT_EQ(pd2[size_t(j)], pd[size_t(j)]) << where << " key " << j;
        EXPECT_NEAR(ds[size_t(j)], P[j] * (grad_dots[j] * drop[j] - D), 1e-5) << where << " key " << j;
      }
    }
}
