// Uses only the umbrella header and the exported target: exits 0 when a small backward
// through matmul, relu and a reduction gives the hand-computed gradient.
#include <mantissa.h>

#include <cstdio>
#include <vector>

namespace mt = mantissa;

int main() {
  mt::Tensor w = mt::from_vector<float>({1, -2, 3, 4}, {2, 2}).requires_grad_();
  mt::Tensor x = mt::from_vector<float>({1, 1}, {1, 2});
  // x @ w = [4, 2]; relu keeps both; loss = 4 + 2 = 6; d loss/dw = x^T @ ones = all ones.
  mt::Tensor loss = mt::relu(mt::matmul(x, w)).sum();
  loss.backward();
  const std::vector<float> g = w.grad().to_vector<float>();
  const bool ok = loss.item<float>() == 6.0f && g == std::vector<float>{1, 1, 1, 1};
  std::printf("consumer: loss %g, grad [%g %g %g %g]: %s\n", loss.item<float>(), g[0], g[1], g[2], g[3],
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
