// Fits a 1-16-1 MLP to sin(x) with plain SGD, then runs one step under fp16 autocast to show
// that gradients still land in the fp32 masters. Exits non-zero if training did not converge.
#include <mantissa.h>

#include <cmath>
#include <cstdio>
#include <iostream>

namespace mt = mantissa;

// The example itself; main() reports any exception instead of letting it abort.
static int run() {
  mt::manual_seed(0);
  mt::Tensor x = mt::linspace(-3, 3, 256).reshape({256, 1});
  mt::Tensor y = mt::sin(x);

  // Parameters are fp32 leaves; autograd records every op that touches them.
  mt::Tensor w1 = (mt::randn({1, 16}) * 0.5).requires_grad_();
  mt::Tensor b1 = mt::zeros({16}, {.requires_grad = true});
  mt::Tensor w2 = (mt::randn({16, 1}) * 0.5).requires_grad_();
  mt::Tensor b2 = mt::zeros({1}, {.requires_grad = true});
  auto forward = [&](const mt::Tensor& in) { return mt::matmul(mt::tanh(mt::matmul(in, w1) + b1), w2) + b2; };

  float first = 0, last = 0;
  for (int step = 0; step < 2000; ++step) {
    mt::Tensor loss = mt::square(forward(x) - y).mean();
    for (mt::Tensor* p : {&w1, &b1, &w2, &b2}) p->set_grad({});
    loss.backward();
    {
      mt::NoGradGuard no_grad;  // the update itself is not part of the graph
      for (mt::Tensor* p : {&w1, &b1, &w2, &b2}) p->sub_(p->grad() * 0.05);
    }
    last = loss.item<float>();
    if (step == 0) first = last;
    if (step % 500 == 0) std::printf("step %4d  mse %.5f\n", step, last);
  }
  std::printf("mse: %.5f -> %.5f\n", first, last);

  // Under autocast the matmuls run on cached fp16 working copies; grads arrive in fp32.
  mt::Tensor loss16;
  {
    mt::amp::Autocast ac(mt::kHalf);
    loss16 = mt::square(forward(x) - y).mean();
  }
  w1.set_grad({});
  loss16.backward();
  std::printf("autocast loss %.5f (%s), w1.grad %s\n", loss16.item<float>(), mt::dtype_name(loss16.dtype()),
              mt::dtype_name(w1.grad().dtype()));

  const bool ok =
      last < 0.01f && last < first && w1.grad().dtype() == mt::kFloat32 && std::isfinite(loss16.item<float>());
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "autograd_demo: " << e.what() << "\n";
    return 1;
  }
}
