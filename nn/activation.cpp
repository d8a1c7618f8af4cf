#include "nn/activation.h"

#include "nn/functional.h"

namespace mantissa::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  MT_CHECK(approximate == "none" || approximate == "tanh", "GELU", "approximate must be 'none' or 'tanh', got '",
           approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELU::extra_repr() const { return approximate == "none" ? "" : "approximate='" + approximate + "'"; }

Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

Dropout::Dropout(double p_) : p(p_) { MT_CHECK(p >= 0 && p <= 1, "Dropout", "probability must be in [0, 1], got ", p); }
Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }
std::string Dropout::extra_repr() const { return mantissa::detail::concat("p=", p); }

Tensor Flatten::forward(const Tensor& x) { return x.flatten(start_dim, end_dim); }
std::string Flatten::extra_repr() const {
  return mantissa::detail::concat("start_dim=", start_dim, ", end_dim=", end_dim);
}

}  // namespace mantissa::nn
