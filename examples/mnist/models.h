// The two models of the MNIST example, shared with bench/bench_train_step.cpp so that the
// benchmark times exactly what the example trains.
#pragma once
#include <mantissa.h>

namespace mnist {

namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;

// 784-256-128-10 with ReLU; input [N, 1, 28, 28] or [N, 784] -> logits [N, 10].
struct Mlp : nn::Module {
  nn::Linear fc1{784, 256}, fc2{256, 128}, fc3{128, 10};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  mantissa::Tensor forward(const mantissa::Tensor& x) override {
    mantissa::Tensor h = x.flatten(1);
    return fc3(mantissa::relu(fc2(mantissa::relu(fc1(h)))));
  }
};

// Two conv + pool blocks and two linear layers; input [N, 1, 28, 28] -> logits [N, 10].
struct Cnn : nn::Module {
  nn::Conv2d conv1{1, 32, 3, {.padding = 1}}, conv2{32, 64, 3, {.padding = 1}};
  nn::Linear fc1{64 * 7 * 7, 128}, fc2{128, 10};
  Cnn() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  mantissa::Tensor forward(const mantissa::Tensor& x) override {
    mantissa::Tensor h = F::max_pool2d(mantissa::relu(conv1(x)), 2);
    h = F::max_pool2d(mantissa::relu(conv2(h)), 2);
    return fc2(mantissa::relu(fc1(h.flatten(1))));
  }
};

}  // namespace mnist
