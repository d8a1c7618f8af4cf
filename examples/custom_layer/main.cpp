// Writing your own layer: derive from mt::nn::Module, register parameters, buffers and
// submodules in the constructor, and implement forward. Everything else — dotted
// parameter names, state_dict, to(dtype), train/eval, printing — comes from Module.
//
// layers.h defines RMSNorm (a parameter and a buffer) and a residual MLP block (member
// submodules); this program stacks them in a Sequential, and fits a toy regression with a
// hand-written SGD step.
#include <mantissa.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "layers.h"

namespace mt = mantissa;
namespace nn = mt::nn;
namespace F = mt::nn::functional;

// The example itself; main() reports any exception instead of letting it abort.
static int run() {
  mt::manual_seed(0);
  std::shared_ptr<nn::Sequential> model_ptr = custom_layer::make_model();
  nn::Sequential& model = *model_ptr;
  std::cout << model << "\n\n";
  for (auto& [name, p] : model.named_parameters()) std::cout << "  " << name << " " << p.shape_str() << "\n";

  // Toy data: y = sin(x0) + x1 * x2.
  mt::Tensor x = mt::randn({256, 3});
  std::vector<float> xv = x.to_vector<float>(), yv(256);
  for (int i = 0; i < 256; ++i) yv[i] = std::sin(xv[3 * i]) + xv[3 * i + 1] * xv[3 * i + 2];
  mt::Tensor y = mt::from_vector(yv, {256, 1});

  const double lr = 0.05;
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    mt::Tensor loss = F::mse_loss(model(x), y);
    model.zero_grad();
    loss.backward();
    {
      mt::NoGradGuard no_grad;
      for (mt::Tensor& p : model.parameters()) p.sub_(p.grad() * lr);
    }
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    if (step % 50 == 0) std::cout << "step " << step << "  mse " << last << "\n";
  }
  model.eval();
  std::cout << "final mse " << last << " (from " << first << ")\n";
  // The state dict names every parameter and buffer, ready to save and load.
  std::cout << model.state_dict().size() << " state dict entries, e.g. '" << model.state_dict().keys()[2] << "'\n";
  return last < first * 0.5 ? 0 : 1;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "custom_layer: " << e.what() << "\n";
    return 1;
  }
}
