#include <gtest/gtest.h>
#include <mantissa.h>

namespace mt = mantissa;

TEST(Smoke, MatmulBackward) {
  mt::Tensor a = mt::from_vector<float>({1, 2, 3, 4}, {2, 2}).requires_grad_();
  mt::Tensor b = mt::from_vector<float>({5, 6, 7, 8}, {2, 2});
  mt::Tensor y = mt::matmul(a, b).sum();
  y.backward();
  EXPECT_FLOAT_EQ(y.item<float>(), 1 * 5 + 2 * 7 + 1 * 6 + 2 * 8 + 3 * 5 + 4 * 7 + 3 * 6 + 4 * 8);
  // d/da sum(a @ b) = ones @ b^T: each row is the row sums of b.
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{11, 15, 11, 15}));
}
