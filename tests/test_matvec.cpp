// Matrix-vector products (core/cpu/matvec.cpp): mt::matmul of a matrix and a vector in each
// layout the kernel reads (rows contiguous along k: dot products; columns contiguous along the
// output: accumulated columns), against a float64 loop in this file, at sizes that leave vector
// tails and row remainders, with a strided vector, a bias, a broadcast batch, fp64, NaN and inf;
// and which products the kernel takes.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cpu/kernels.h"

namespace mt = mantissa;

namespace {

// out[b, i, j] = sum_k a[b, i, k] b[b, k, j] (+ bias[j]) in double, from the tensors' values.
std::vector<double> loop_product(const mt::Tensor& a3, const mt::Tensor& b3, const mt::Tensor& bias = {}) {
  const int64_t B = std::max(a3.size(0), b3.size(0)), M = a3.size(1), K = a3.size(2), N = b3.size(2);
  const mt::Tensor a = a3.expand({B, M, K}).contiguous().to(mt::kDouble),
                   b = b3.expand({B, K, N}).contiguous().to(mt::kDouble);
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const std::vector<double> vbias = bias.defined() ? bias.to(mt::kDouble).to_vector<double>() : std::vector<double>();
  std::vector<double> out(size_t(B * M * N));
  for (int64_t i = 0; i < B; ++i)
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < N; ++c) {
        double s = vbias.empty() ? 0.0 : vbias[size_t(c)];
        for (int64_t k = 0; k < K; ++k) s += va[size_t((i * M + r) * K + k)] * vb[size_t((i * K + k) * N + c)];
        out[size_t((i * M + r) * N + c)] = s;
      }
  return out;
}

void expect_product(const mt::Tensor& got, const std::vector<double>& want, int64_t K, const std::string& what) {
  const std::vector<double> g = got.contiguous().to(mt::kDouble).to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  const double ulp = got.dtype() == mt::kFloat64 ? 0x1p-52 : 0x1p-23;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << ", element " << i;
      continue;
    }
    // |values| < 4 and K terms: the sum's rounding is bounded by K * 4 * 4 ulp of 1.
    ASSERT_NEAR(g[i], want[i], double(K) * 16 * ulp + std::abs(want[i]) * ulp) << what << ", element " << i;
  }
}

}  // namespace

TEST(Matvec, EveryLayoutMatchesALoop) {
  mt::manual_seed(11);
  for (mt::DType dt : {mt::kFloat32, mt::kFloat64}) {
    const std::string d = mt::dtype_name(dt);
    for (int64_t M : {1, 3, 37, 130}) {
      for (int64_t K : {1, 15, 16, 33, 300}) {
        const mt::Tensor a = mt::randn({M, K}, {.dtype = dt}), at = mt::randn({K, M}, {.dtype = dt}).t();
        const mt::Tensor v = mt::randn({K}, {.dtype = dt});
        const mt::Tensor v_strided = mt::randn({K, 3}, {.dtype = dt}).select(1, 1);  // stride 3
        const std::string s = d + " M " + std::to_string(M) + " K " + std::to_string(K);
        // matrix @ vector: rows along k (dots), columns along the output (accumulated), strided vector
        expect_product(mt::matmul(a, v), loop_product(a.unsqueeze(0), v.reshape({1, K, 1})), K, "a @ v " + s);
        expect_product(mt::matmul(at, v), loop_product(at.unsqueeze(0), v.reshape({1, K, 1})), K, "a^T @ v " + s);
        expect_product(mt::matmul(a, v_strided), loop_product(a.unsqueeze(0), v_strided.reshape({1, K, 1})), K,
                       "a @ strided v " + s);
        // vector @ matrix, and a linear layer on one row (the weight's rows along k) with a bias
        expect_product(mt::matmul(v, a.t()), loop_product(v.reshape({1, 1, K}), a.t().unsqueeze(0)), K, "v @ a^T " + s);
        expect_product(mt::matmul(v, at.t()), loop_product(v.reshape({1, 1, K}), at.t().unsqueeze(0)), K,
                       "v @ (a^T)^T " + s);
        const mt::Tensor bias = mt::randn({M}, {.dtype = dt});
        expect_product(mt::nn::functional::linear(v.reshape({1, K}), a, bias),
                       loop_product(v.reshape({1, 1, K}), a.t().unsqueeze(0), bias), K, "linear of one row " + s);
      }
    }
    // A batch of matrices times one broadcast vector, and a dot product.
    const mt::Tensor batch = mt::randn({5, 21, 40}, {.dtype = dt}), col = mt::randn({1, 40, 1}, {.dtype = dt});
    expect_product(mt::matmul(batch, col), loop_product(batch, col), 40, d + " batch @ broadcast vector");
    const mt::Tensor x = mt::randn({77}, {.dtype = dt}), y = mt::randn({77}, {.dtype = dt});
    expect_product(mt::matmul(x, y).reshape({1}), loop_product(x.reshape({1, 1, 77}), y.reshape({1, 77, 1})), 77,
                   d + " dot");
  }
  // NaN and inf reach only their own outputs.
  mt::Tensor a = mt::randn({9, 20});
  std::vector<float> va = a.to_vector<float>();
  va[2 * 20 + 5] = NAN;
  va[6 * 20 + 19] = INFINITY;
  a = mt::from_vector<float>(va).reshape({9, 20});
  const mt::Tensor v = mt::rand({20}) + 0.5;
  const std::vector<float> got = mt::matmul(a, v).to_vector<float>();
  for (int64_t r = 0; r < 9; ++r) {
    if (r == 2)
      EXPECT_TRUE(std::isnan(got[size_t(r)]));
    else if (r == 6)
      EXPECT_EQ(got[size_t(r)], INFINITY);
    else
      EXPECT_TRUE(std::isfinite(got[size_t(r)])) << r;
  }
}

// Which products the kernel takes: fp32 / fp64 with N == 1 or M == 1 and a unit stride along k or
// along the output; the others go to the GEMM paths.
TEST(Matvec, TakesOnlyMatrixVectorProducts) {
  auto takes = [](const mt::Tensor& a, const mt::Tensor& b) {
    mt::Tensor out = mt::empty({a.size(0), a.size(1), b.size(2)}, {.dtype = a.dtype()});
    return mt::cpu::matvec(a, b, mt::Tensor(), out);
  };
  EXPECT_TRUE(takes(mt::randn({1, 8, 5}), mt::randn({1, 5, 1})));
  EXPECT_TRUE(takes(mt::randn({1, 1, 5}), mt::randn({1, 5, 8})));
  EXPECT_TRUE(takes(mt::randn({2, 1, 5}, {.dtype = mt::kFloat64}), mt::randn({2, 5, 1}, {.dtype = mt::kFloat64})));
  EXPECT_FALSE(takes(mt::randn({1, 8, 5}), mt::randn({1, 5, 2})));
  EXPECT_FALSE(takes(mt::randn({1, 8, 5}, {.dtype = mt::kBFloat16}), mt::randn({1, 5, 1}, {.dtype = mt::kBFloat16})));
  // Neither stride of the matrix is 1: a column of every other column.
  EXPECT_FALSE(takes(mt::make_view(mt::randn({1, 8, 10}), {1, 8, 5}, {80, 10, 2}, 0), mt::randn({1, 5, 1})));
  EXPECT_FALSE(takes(mt::randn({1, 8, 0}), mt::randn({1, 0, 1})));
}
