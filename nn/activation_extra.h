// More stateless layers and the learnable PReLU: LeakyReLU, ELU, Hardtanh, PReLU, Softmax,
// LogSoftmax, Softplus, Identity, Unflatten, and Functional (a module around a callable), each
// a wrapper over its op so it can sit in a Sequential.
#pragma once
#include <functional>
#include <string>

#include "nn/module.h"

namespace mantissa::nn {

// x where x > 0, else negative_slope x.    mt::nn::LeakyReLU act(0.2);
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double negative_slope;
};

// x where x > 0, else alpha (exp(x) - 1).    mt::nn::ELU act(1.0);
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double alpha;
};

// x clamped to [min_val, max_val].    mt::nn::Hardtanh act(-2, 2);
class Hardtanh : public Module {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double min_val, max_val;
};

// x where x > 0, else a x with a learnable a: one shared value, or one per channel (dim 1 of the
// input, or dim 0 of a 1-D input). `weight` is [num_parameters], initialised to `init`.
//   mt::nn::PReLU act(64);   // per channel of [N, 64, H, W]
class PReLU : public Module {
 public:
  explicit PReLU(int64_t num_parameters = 1, double init = 0.25);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t num_parameters;
  Tensor weight;
};

// softmax / log_softmax along dim.    mt::nn::Softmax sm(1);
class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
};
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

// log(1 + exp(beta x)) / beta, and x where beta x > threshold.    mt::nn::Softplus sp;
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0) : beta(beta), threshold(threshold) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double beta, threshold;
};

// Returns its input (a placeholder, e.g. an optional projection that is off).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
};

// Splits dim into `sizes` (one may be -1).    mt::nn::Unflatten u(1, {16, 7, 7});  // [N, 784] -> [N, 16, 7, 7]
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Shape sizes) : dim(dim), sizes(std::move(sizes)) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
  Shape sizes;
};

// A module around a callable, so any tensor function can sit in a Sequential:
//   mt::nn::Functional pool([](const mt::Tensor& x) { return mt::amax(x, {2, 3}); });
// It holds no parameters of its own (a callable capturing tensors keeps them out of parameters()).
class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> fn, std::string label = "Functional");
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return label_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string label_;
};

}  // namespace mantissa::nn
