// The example's own layers, shared with the ONNX export tests (tests/onnx/onnx_models.h), which
// export a model built from them: a user's layer, not a library one.
#pragma once
#include <mantissa.h>

#include <memory>
#include <string>

namespace custom_layer {

namespace mt = mantissa;
namespace nn = mantissa::nn;

// y = x / sqrt(mean(x^2) + eps) * gain: a layer with one parameter and one buffer.
struct RMSNorm : nn::Module {
  mt::Tensor gain;
  mt::Tensor eps;  // a buffer: saved in the state dict, not trained
  explicit RMSNorm(int64_t dim, double epsilon = 1e-6) {
    gain = register_parameter("gain", mt::ones({dim}));
    eps = register_buffer("eps", mt::full({}, epsilon));
  }
  mt::Tensor forward(const mt::Tensor& x) override {
    mt::Tensor rms = mt::sqrt(mt::mean(x * x, {-1}, true) + eps);
    return x / rms * gain;
  }
  std::string extra_repr() const override { return std::to_string(gain.size(0)); }
};

// h + W2 silu(W1 norm(h)): member submodules registered by reference.
struct ResidualBlock : nn::Module {
  RMSNorm norm;
  nn::Linear up, down;
  nn::Dropout drop{0.1};
  ResidualBlock(int64_t dim, int64_t hidden) : norm(dim), up(dim, hidden), down(hidden, dim) {
    register_module("norm", norm);
    register_module("up", up);
    register_module("down", down);
    register_module("drop", drop);
  }
  mt::Tensor forward(const mt::Tensor& h) override { return h + drop(down(mt::silu(up(norm(h))))); }
};

// The example's model: 3 features -> 1, two residual blocks between RMSNorms.
inline std::shared_ptr<nn::Sequential> make_model() {
  return std::make_shared<nn::Sequential>(nn::Linear(3, 16), ResidualBlock(16, 32), ResidualBlock(16, 32), RMSNorm(16),
                                          nn::Linear(16, 1));
}

}  // namespace custom_layer
