// The models the ONNX tests export (tests/onnx/test_onnx_*.cpp): the MNIST example's MLP and CNN,
// ResNet-20, a small GPT, an MLP of the LibTorch-style activation layers, cumulative sums and
// products, a model with fills shaped after the batch, group and instance norms and the custom_layer example's model,
// each with an example input.
#pragma once
#include <mantissa.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../examples/custom_layer/layers.h"
#include "../../examples/mnist/models.h"

namespace onnx_test {

namespace mt = mantissa;

// Fills shaped after the batch, as an RNN's zero initial state is: the export must not bake the
// traced batch into them (onnx/symbolic_batch.h).
struct BatchFills : mt::nn::Module {
  mt::nn::Linear fc{8, 6};
  BatchFills() { register_module("fc", fc); }
  mt::Tensor forward(const mt::Tensor& x) override {
    const int64_t n = x.size(0);
    mt::Tensor state = mt::zeros({n, 2});
    mt::Tensor h = mt::cat({fc(x), state}, 1);  // [n, 8]
    return mt::tanh(h + mt::full({n, 8}, 0.25) + mt::full({8, n}, -0.5).t());
  }
};

// cumsum along the features and along the batch, and cumprod (ONNX has no CumProd: the export
// multiplies log2(n) shifted copies).
struct Cumulative : mt::nn::Module {
  mt::nn::Linear fc{8, 12};
  Cumulative() { register_module("fc", fc); }
  mt::Tensor forward(const mt::Tensor& x) override {
    mt::Tensor h = mt::tanh(fc(x));  // [n, 12]
    return mt::cumsum(h, 1) + mt::cumsum(h, 0) + mt::cumprod(h * 0.5 + 1.0, 1);
  }
};

// Group and instance norm with their per-channel affine between convolutions.
struct Norms : mt::nn::Module {
  mt::nn::Conv2d conv{3, 8, 3, {.padding = 1}};
  mt::nn::GroupNorm group{4, 8};
  mt::nn::InstanceNorm2d instance{8, {.affine = true}};
  Norms() {
    register_module("conv", conv);
    register_module("group", group);
    register_module("instance", instance);
    mt::NoGradGuard g;  // weights and biases other than ones and zeros
    for (auto& [name, p] : named_parameters())
      if (name.find("conv") == std::string::npos) p.copy_(mt::randn(p.sizes()) * 0.5 + 1.0);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return instance(mt::silu(group(conv(x)))); }
};

struct Case {
  std::string name;
  std::shared_ptr<mt::nn::Module> model;
  std::function<mt::Tensor(int64_t batch)> input;  // a fresh example input of `batch` rows
};

inline std::vector<Case> cases() {
  mt::manual_seed(7);
  std::vector<Case> out;
  out.push_back({"mlp", std::make_shared<mnist::Mlp>(), [](int64_t n) { return mt::randn({n, 1, 28, 28}); }});
  out.push_back({"cnn", std::make_shared<mnist::Cnn>(), [](int64_t n) { return mt::randn({n, 1, 28, 28}); }});
  auto resnet = std::make_shared<mt::nn::CifarResNet>(20);
  // Non-trivial running statistics, so that batch norm in eval mode is really exercised.
  {
    mt::NoGradGuard g;
    for (auto& [name, b] : resnet->named_buffers())
      if (name.find("running_mean") != std::string::npos)
        b.copy_(mt::randn(b.sizes()) * 0.1);
      else if (name.find("running_var") != std::string::npos)
        b.copy_(mt::rand(b.sizes()) + 0.5);
  }
  out.push_back({"resnet20", resnet, [](int64_t n) { return mt::randn({n, 3, 32, 32}); }});
  auto gpt = std::make_shared<mt::nn::GPT>(
      mt::nn::GPTConfig{.vocab_size = 65, .context = 32, .n_layer = 2, .n_head = 4, .d_model = 64});
  out.push_back({"gpt", gpt, [](int64_t n) { return mt::randint(0, 65, {n, 32}); }});
  // The activation modules a LibTorch port reaches for, built from the generic ops they run on.
  auto layers = std::make_shared<mt::nn::Sequential>(
      mt::nn::Linear(32, 64), mt::nn::LeakyReLU(0.1), mt::nn::Linear(64, 64), mt::nn::ELU(1.0), mt::nn::Hardtanh(-2, 2),
      mt::nn::PReLU(1), mt::nn::Identity(), mt::nn::Linear(64, 10), mt::nn::LogSoftmax(1));
  out.push_back({"layers", layers, [](int64_t n) { return mt::randn({n, 32}) * 2.0; }});
  out.push_back({"cumulative", std::make_shared<Cumulative>(), [](int64_t n) { return mt::randn({n, 8}); }});
  out.push_back({"fills", std::make_shared<BatchFills>(), [](int64_t n) { return mt::randn({n, 8}); }});
  out.push_back({"norms", std::make_shared<Norms>(), [](int64_t n) { return mt::randn({n, 3, 6, 5}); }});
  // A user's own layers (examples/custom_layer): RMSNorm with a buffer, residual SiLU blocks.
  out.push_back({"custom", custom_layer::make_model(), [](int64_t n) { return mt::randn({n, 3}); }});
  return out;
}

}  // namespace onnx_test
