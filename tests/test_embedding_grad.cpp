// Embedding backward through the nn kernel (core/nn_kernels.h embedding_backward), which never
// expands the index to [tokens, dim]: float64 gradcheck, a brute-force per-row sum with repeated
// indices and padding_idx, and fp16/bf16 rows summed in fp32 and rounded once.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gradcheck.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

TEST(EmbeddingGrad, Gradcheck) {
  mt::manual_seed(3);
  mt::Tensor w = mt::randn({5, 3}, {.dtype = mt::kFloat64, .requires_grad = true});
  mt::Tensor idx = mt::from_vector<int64_t>({4, 0, 4, 2, 4, 0}, {2, 3});
  std::string why;
  EXPECT_TRUE(mt::autograd::gradcheck([&](const auto& in) { return F::embedding(idx, in[0]); }, {w}, {}, &why)) << why;
  // (padding_idx zeroes a row's gradient by definition, not as a derivative: tested below.)
}

TEST(EmbeddingGrad, RowSumsWithRepeatsAndPadding) {
  mt::manual_seed(4);
  const int64_t num = 7, D = 5;
  const std::vector<int64_t> ids = {3, 3, 0, 6, 3, 1, 6, 3, 2, 2};
  for (std::optional<int64_t> pad : {std::optional<int64_t>(), std::optional<int64_t>(3), std::optional<int64_t>(-1)}) {
    mt::Tensor w = mt::randn({num, D}, {.dtype = mt::kFloat64, .requires_grad = true});
    mt::Tensor y = F::embedding(mt::from_vector<int64_t>(ids), w, pad);
    mt::Tensor g = mt::randn({int64_t(ids.size()), D}, {.dtype = mt::kFloat64});
    y.backward(g);
    const std::vector<double> gv = g.to_vector<double>(), got = w.grad().to_vector<double>();
    const int64_t padrow = pad ? (*pad < 0 ? *pad + num : *pad) : -1;
    for (int64_t r = 0; r < num; ++r)
      for (int64_t d = 0; d < D; ++d) {
        double want = 0;
        for (size_t n = 0; n < ids.size(); ++n)
          if (ids[n] == r && r != padrow) want += gv[n * size_t(D) + size_t(d)];
        EXPECT_EQ(got[size_t(r * D + d)], want) << "row " << r << " col " << d;  // same order: exact
      }
  }
}

TEST(EmbeddingGrad, ReducedFloatsSumInFp32AndRoundOnce) {
  // 300 tokens of one row with gradient 1 + 2^-10: adding in fp16 (spacing 0.25 above 256)
  // would drop the 2^-10 parts and end at 300; the fp32 sum is exact and rounds once to 300.25.
  const int64_t T = 300, D = 2;
  for (mt::DType t : {mt::kFloat16, mt::kBFloat16}) {
    mt::Tensor w = mt::zeros({3, D}, {.dtype = t, .requires_grad = true});
    mt::Tensor y = F::embedding(mt::full({T}, int64_t(1), {.dtype = mt::kInt64}), w);
    mt::Tensor g = mt::full({T, D}, 1.0 + 1.0 / 1024, {.dtype = t});
    y.backward(g);
    const double gi = g.to(mt::kFloat64).to_vector<double>()[0];
    const double want = mt::full({1}, double(T) * gi, {.dtype = mt::kFloat64}).to(t).to(mt::kFloat64).item<double>();
    const std::vector<double> got = w.grad().to(mt::kFloat64).to_vector<double>();
    EXPECT_EQ(got[0], 0.0);
    EXPECT_EQ(got[2], want) << mt::dtype_name(t);
    EXPECT_EQ(got[3], want) << mt::dtype_name(t);
    EXPECT_EQ(got[4], 0.0);
  }
}

// Rows without a token are +0; a row with one token is 0 + its gradient (exact, -0 -> +0 as the
// GPU's sum from zero gives, NaN and inf kept); with several, the sum from 0 in token order.
TEST(EmbeddingGrad, EmptySingleAndRepeatedRowsInEveryFloatType) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> gv = {-0.0, 1.5, nan, -inf, 3.25, -0.0, -0.0, -0.0};  // 4 tokens, 2 columns
  const std::vector<int64_t> ids = {0, 2, 3, 3};  // row 0: one token; rows 1, 4: none; row 3: two
  for (mt::DType t : {mt::kFloat32, mt::kFloat64, mt::kBFloat16, mt::kFloat16}) {
    mt::Tensor w = mt::ones({5, 2}, {.dtype = t, .requires_grad = true});
    // autograd::grad: the kernel's own result (accumulating into .grad would add it to 0 again)
    const mt::Tensor gw = mt::autograd::grad({F::embedding(mt::from_vector<int64_t>(ids), w)}, {w},
                                             {mt::from_vector<double>(gv, {4, 2}).to(t)})[0];
    const std::vector<double> got = gw.to(mt::kFloat64).to_vector<double>();
    const std::string name = mt::dtype_name(t);
    EXPECT_EQ(got[0], 0.0) << name;
    EXPECT_FALSE(std::signbit(got[0])) << name << ": -0 + the sum's start 0 is +0";
    EXPECT_EQ(got[1], 1.5) << name;
    for (int64_t k : {2, 3, 8, 9}) {
      EXPECT_EQ(got[size_t(k)], 0.0) << name << " element " << k;
      EXPECT_FALSE(std::signbit(got[size_t(k)])) << name << " element " << k;
    }
    EXPECT_TRUE(std::isnan(got[4])) << name;
    EXPECT_EQ(got[5], -inf) << name;
    EXPECT_EQ(got[6], 3.25) << name;  // 0 + 3.25 + -0
    EXPECT_EQ(got[7], 0.0) << name;   // 0 + -0 + -0
    EXPECT_FALSE(std::signbit(got[7])) << name;
  }
}
