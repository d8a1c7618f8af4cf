// Stateless layers: activations, Dropout and Flatten (wrappers over nn::functional,
// so they can sit in a Sequential).
#pragma once
#include <string>

#include "nn/module.h"

namespace mantissa::nn {

// max(x, 0).    mt::nn::Sequential mlp(mt::nn::Linear(784, 256), mt::nn::ReLU(), mt::nn::Linear(256, 10));
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// x * Phi(x); approximate "tanh" uses the tanh formula.    mt::nn::GELU gelu("tanh");
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

// x * sigmoid(x).    mt::nn::SiLU act;
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// tanh(x).    mt::nn::Tanh act;
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// 1 / (1 + exp(-x)).    mt::nn::Sigmoid act;
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// Zeroes elements with probability p in training mode (scaling the rest by 1 / (1 - p));
// the identity in eval mode. Uses the default generator (mt::manual_seed).
//
//   mt::nn::Dropout drop(0.1);
//   net.eval();                        // drop(x) is now x
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
};

// Channel dropout (functional::dropout1d / dropout2d): whole channels zeroed with probability p
// in training mode, the identity in eval mode. Dropout1d: [N, C, L] or [C, L]; Dropout2d:
// [N, C, H, W] or [C, H, W].
class Dropout1d : public Dropout {
 public:
  explicit Dropout1d(double p = 0.5) : Dropout(p) {}
  Tensor forward(const Tensor& x) override;
};
class Dropout2d : public Dropout {
 public:
  explicit Dropout2d(double p = 0.5) : Dropout(p) {}
  Tensor forward(const Tensor& x) override;
};

// Flattens dims start_dim..end_dim into one.    mt::nn::Flatten flat;   // [N, C, H, W] -> [N, C*H*W]
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

}  // namespace mantissa::nn
