// The bf16 and fp32 products with a transposed first operand, or a transposed second operand
// (core/cpu/matmul_k_major.cpp): attention's dV = P^T dY, dK^T = Q^T dS and dQ = dS K. Against a float64 product of the
// same bf16 values (one bf16 rounding of an fp32 sum), at shapes that leave partial vectors and blocks, odd K, a
// broadcast batch, NaN and infinity; and that mt::matmul on such views takes this path (its bits) where the CPU has
// AVX512-BF16.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cpu/kernels.h"

namespace mt = mantissa;

namespace {

mt::Tensor bf16_randn(const mt::Shape& shape, mt::DType dtype = mt::kBFloat16) { return mt::randn(shape).to(dtype); }

// a [B|1, M, K] (any strides), b [B|1, K, N] -> the float64 product of their bf16 values.
mt::Tensor reference(const mt::Tensor& a, const mt::Tensor& b) {
  return mt::matmul(a.to(mt::kDouble), b.to(mt::kDouble));
}

// |got - want| within one bf16 rounding of want plus fp32 accumulation over K terms.
void expect_close(const mt::Tensor& got, const mt::Tensor& a, const mt::Tensor& b, const char* what) {
  const std::vector<double> g = got.to(mt::kDouble).to_vector<double>();
  const std::vector<double> w = reference(a, b).contiguous().to_vector<double>();
  const std::vector<double> mag = reference(a.abs(), b.abs()).contiguous().to_vector<double>();
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], std::abs(w[i]) * 0x1p-8 + mag[i] * 0x1p-16) << what << ", element " << i;
}

// Whether the library was built with AVX512-BF16 (the path's only requirement).
bool available() {
  mt::Tensor out = mt::empty({2, 4, 4}, {.dtype = mt::kBFloat16});
  return mt::cpu::matmul_k_major(bf16_randn({2, 4, 4}).transpose(1, 2), bf16_randn({2, 4, 4}), out);
}

struct Case {
  int64_t B, M, N, K;
  bool broadcast_b;  // b's batch stride 0
};

// a [B, M, K] (a transposed view when a_transposed), b [B, K, N] (likewise): the path computes
// the product within tolerance, and mt::matmul on the same views takes the path (same bits).
void check_one(const Case& c, bool a_transposed, bool b_transposed, mt::DType dtype) {
  auto operand = [dtype](int64_t B, int64_t r, int64_t cols, bool transposed, bool broadcast) {
    const mt::Shape stored = transposed ? mt::Shape{B, cols, r} : mt::Shape{B, r, cols};
    mt::Tensor t = broadcast ? bf16_randn({1, stored[1], stored[2]}, dtype).expand(stored) : bf16_randn(stored, dtype);
    return transposed ? t.transpose(1, 2) : t;
  };
  mt::Tensor a = operand(c.B, c.M, c.K, a_transposed, false), b = operand(c.B, c.K, c.N, b_transposed, c.broadcast_b);
  mt::Tensor out = mt::empty({c.B, c.M, c.N}, {.dtype = dtype});
  const std::string what = std::string(mt::dtype_name(dtype)) + " B " + std::to_string(c.B) + " M " +
                           std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K);
  ASSERT_TRUE(mt::cpu::matmul_k_major(a, b, out)) << what;
  expect_close(out, a, b, what.c_str());
  EXPECT_EQ(mt::matmul(a, b).to(mt::kDouble).to_vector<double>(), out.to(mt::kDouble).to_vector<double>()) << what;
}

// The case in bf16 (k-pair dot products) and in fp32 (FMAs).
void check(const Case& c, bool a_transposed, bool b_transposed) {
  check_one(c, a_transposed, b_transposed, mt::kBFloat16);
  check_one(c, a_transposed, b_transposed, mt::kFloat32);
}

}  // namespace

// dV's form: a = X^T with X [B, K, M] contiguous, N <= 64 (lanes along M, C written by elements).
TEST(MatmulKMajor, TransposedFirstOperandSmallN) {
  if (!available()) GTEST_SKIP() << "no AVX512-BF16 in this build";
  for (Case c : {Case{3, 512, 32, 512, false}, Case{2, 50, 17, 33, false}, Case{2, 16, 64, 2, false},
                 Case{4, 97, 8, 7, true}, Case{2, 48, 2, 130, false}})
    check(c, true, false);
}

// dK^T's form: a = X^T with M <= 64, b [B, K, N] with contiguous rows (lanes along N, vector stores).
TEST(MatmulKMajor, TransposedFirstOperandSmallM) {
  if (!available()) GTEST_SKIP() << "no AVX512-BF16 in this build";
  for (Case c : {Case{3, 32, 512, 512, false}, Case{2, 17, 100, 33, false}, Case{2, 64, 65, 3, false},
                 Case{2, 5, 200, 64, true}})
    check(c, true, false);
}

// dQ's form: b = Y^T with Y [B, N, K] contiguous, N <= 64 (b packed, a's rows read as k-pair words).
TEST(MatmulKMajor, TransposedSecondOperandSmallN) {
  if (!available()) GTEST_SKIP() << "no AVX512-BF16 in this build";
  for (Case c : {Case{3, 512, 32, 512, false}, Case{2, 100, 17, 33, false}, Case{2, 37, 64, 3, true},
                 Case{2, 5, 40, 2, false}, Case{2, 200, 48, 64, false}})
    check(c, false, true);
}

// NaN and infinity reach exactly the outputs whose sums hold them.
TEST(MatmulKMajor, NonFiniteInputsPropagate) {
  mt::Tensor x = bf16_randn({2, 9, 20});  // a = x^T: [2, 20, 9], M = 20, K = 9
  mt::Tensor b = bf16_randn({2, 9, 5});
  {
    mt::NoGradGuard ng;
    x.index_put_({0, 4, 3}, NAN);       // k 4, m 3: row 3 of C is NaN
    b.index_put_({0, 8, 2}, INFINITY);  // k 8 (the unpaired last), n 2
  }
  mt::Tensor out = mt::empty({2, 20, 5}, {.dtype = mt::kBFloat16});
  if (!mt::cpu::matmul_k_major(x.transpose(1, 2), b, out)) GTEST_SKIP() << "no AVX512-BF16 in this build";
  const std::vector<double> c = out.to(mt::kDouble).to_vector<double>();
  for (int64_t m = 0; m < 20; ++m)
    for (int64_t n = 0; n < 5; ++n) {
      const double v = c[size_t(m * 5 + n)];  // batch 0
      if (m == 3)
        EXPECT_TRUE(std::isnan(v)) << m << ", " << n;
      else if (n == 2)
        EXPECT_TRUE(std::isinf(v)) << m << ", " << n;  // x[8, m] is finite and nonzero
      else
        EXPECT_TRUE(std::isfinite(v)) << m << ", " << n;
    }
}

// Where the path does not apply it says so, and the caller's path computes the product.
TEST(MatmulKMajor, DeclinesOtherOperands) {
  mt::Tensor out = mt::empty({2, 100, 100}, {.dtype = mt::kBFloat16});
  mt::Tensor plain = bf16_randn({2, 100, 80}), b = bf16_randn({2, 80, 100});
  EXPECT_FALSE(mt::cpu::matmul_k_major(plain, b, out)) << "plain operands, K > 64";
  EXPECT_FALSE(mt::cpu::matmul_k_major(bf16_randn({2, 80, 100}).transpose(1, 2), b, out)) << "M, N, K > 64";
  EXPECT_FALSE(mt::cpu::matmul_k_major(bf16_randn({1, 40, 100}).transpose(1, 2), bf16_randn({1, 40, 8}),
                                       mt::empty({1, 100, 8}, {.dtype = mt::kBFloat16})))
      << "not batched (a linear layer's product)";
  mt::Tensor f = mt::randn({2, 40, 8}, {.dtype = mt::kDouble}).transpose(1, 2);
  EXPECT_FALSE(mt::cpu::matmul_k_major(f, mt::randn({2, 40, 8}, {.dtype = mt::kDouble}),
                                       mt::empty({2, 8, 8}, {.dtype = mt::kDouble})))
      << "fp64";
}
