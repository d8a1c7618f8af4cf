#include "nn/activation_extra.h"

#include "core/shape.h"
#include "nn/functional.h"

namespace mantissa::nn {

using mantissa::detail::concat;

Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope); }
std::string LeakyReLU::extra_repr() const { return concat("negative_slope=", negative_slope); }

Tensor ELU::forward(const Tensor& x) { return elu(x, alpha); }
std::string ELU::extra_repr() const { return concat("alpha=", alpha); }

Hardtanh::Hardtanh(double lo, double hi) : min_val(lo), max_val(hi) {
  MT_CHECK(lo <= hi, "Hardtanh", "min_val (", lo, ") must not exceed max_val (", hi, ")");
}
Tensor Hardtanh::forward(const Tensor& x) { return hardtanh(x, min_val, max_val); }
std::string Hardtanh::extra_repr() const { return concat("min_val=", min_val, ", max_val=", max_val); }

PReLU::PReLU(int64_t n, double init) : num_parameters(n) {
  MT_CHECK(n >= 1, "PReLU", "num_parameters must be >= 1, got ", n);
  weight = register_parameter("weight", full({n}, init));
}
Tensor PReLU::forward(const Tensor& x) { return prelu(x, weight); }
std::string PReLU::extra_repr() const { return concat("num_parameters=", num_parameters); }

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }
std::string Softmax::extra_repr() const { return concat("dim=", dim); }
Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, dim); }
std::string LogSoftmax::extra_repr() const { return concat("dim=", dim); }

Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta, threshold); }
std::string Softplus::extra_repr() const { return concat("beta=", beta, ", threshold=", threshold); }

Tensor Unflatten::forward(const Tensor& x) {
  const int64_t d = wrap_dim(dim, x.dim(), "Unflatten");
  Shape s(x.sizes().begin(), x.sizes().begin() + d);
  s.insert(s.end(), sizes.begin(), sizes.end());
  s.insert(s.end(), x.sizes().begin() + d + 1, x.sizes().end());
  int64_t known = 1, unknown = 0;
  for (int64_t v : sizes) v == -1 ? ++unknown : known *= v;
  MT_CHECK(unknown <= 1 && (unknown == 1 ? known > 0 && x.size(d) % known == 0 : known == x.size(d)), "Unflatten",
           "cannot split dim ", d, " of ", x.shape_str(), " into ", shape_str(sizes));
  return x.reshape(s);
}
std::string Unflatten::extra_repr() const { return concat("dim=", dim, ", unflattened_size=", shape_str(sizes)); }

Functional::Functional(std::function<Tensor(const Tensor&)> fn, std::string label)
    : fn_(std::move(fn)), label_(std::move(label)) {
  MT_CHECK(fn_ != nullptr, "Functional", "got an empty callable");
}
Tensor Functional::forward(const Tensor& x) { return fn_(x); }

}  // namespace mantissa::nn
