// Loss modules next to the functions of nn/functional.h: each holds its options and is called
// with (input, target), as torch.nn's:
//   mt::nn::CrossEntropyLoss criterion({.label_smoothing = 0.1});
//   mt::Tensor loss = criterion(logits, labels);
// They take two tensors, so they do not sit in a Sequential (their one-tensor forward throws).
#pragma once
#include "nn/functional.h"
#include "nn/module.h"

namespace mantissa::nn {

// Shared by the loss modules: operator()(input, target) calls forward(input, target).
class Loss : public Module {
 public:
  using Module::forward;
  using Module::operator();
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  Reduction reduction;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  Reduction reduction;
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(Reduction reduction = Reduction::Mean, double beta = 1.0) : reduction(reduction), beta(beta) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  Reduction reduction;
  double beta;
};

class HuberLoss : public Loss {
 public:
  explicit HuberLoss(Reduction reduction = Reduction::Mean, double delta = 1.0) : reduction(reduction), delta(delta) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  Reduction reduction;
  double delta;
};

// On probabilities (after a sigmoid); prefer BCEWithLogitsLoss, which is also safe under autocast.
class BCELoss : public Loss {
 public:
  explicit BCELoss(functional::BceOptions opts = {}) : opts(std::move(opts)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  functional::BceOptions opts;
};

class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(functional::BceWithLogitsOptions opts = {}) : opts(std::move(opts)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  functional::BceWithLogitsOptions opts;
};

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(functional::CrossEntropyOptions opts = {}) : opts(std::move(opts)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  functional::CrossEntropyOptions opts;
};

class NLLLoss : public Loss {
 public:
  explicit NLLLoss(functional::NllLossOptions opts = {}) : opts(std::move(opts)) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  functional::NllLossOptions opts;
};

class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(functional::KlDivOptions opts = {}) : opts(opts) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string extra_repr() const override;
  functional::KlDivOptions opts;
};

}  // namespace mantissa::nn
