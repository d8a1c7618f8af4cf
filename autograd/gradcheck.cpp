#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace mantissa::autograd {

namespace {

Tensor forward_detached(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  NoGradGuard g;
  return fn(in).contiguous();
}

}  // namespace

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               const GradcheckOptions& o, std::string* why) {
  for (const Tensor& x : inputs)
    MT_CHECK(!x.requires_grad() || (x.dtype() == DType::Float64 && x.device().is_cpu() && x.is_contiguous()),
             "gradcheck", "inputs that require grad must be contiguous float64 CPU tensors, got ", x.shape_str(), " ",
             dtype_name(x.dtype()));
  Tensor y0 = fn(inputs);
  MT_CHECK(y0.dtype() == DType::Float64, "gradcheck", "the function must return float64, got ", dtype_name(y0.dtype()));
  const int64_t m = y0.numel();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    const int64_t n = x.numel();
    // Analytical Jacobian, one output element at a time.
    std::vector<double> analytic(size_t(m * n), 0.0);
    for (int64_t i = 0; i < m; ++i) {
      Tensor y = fn(inputs);
      if (!y.requires_grad()) break;  // constant function: Jacobian is zero
      Tensor seed = zeros(y.sizes(), {.dtype = DType::Float64});
      seed.data_ptr<double>()[i] = 1.0;
      auto g = grad({y}, {x}, {seed}, false, false, true);
      if (!g[0].defined()) continue;
      std::vector<double> gv = g[0].to_vector<double>();
      for (int64_t j = 0; j < n; ++j) analytic[size_t(i * n + j)] = gv[size_t(j)];
    }
    // Numerical Jacobian by central differences.
    double* p = x.data_ptr<double>();
    for (int64_t j = 0; j < n; ++j) {
      double orig = p[j];
      p[j] = orig + o.eps;
      std::vector<double> plus = forward_detached(fn, inputs).to_vector<double>();
      p[j] = orig - o.eps;
      std::vector<double> minus = forward_detached(fn, inputs).to_vector<double>();
      p[j] = orig;
      for (int64_t i = 0; i < m; ++i) {
        double num = (plus[size_t(i)] - minus[size_t(i)]) / (2 * o.eps);
        double ana = analytic[size_t(i * n + j)];
        if (!(std::fabs(num - ana) <= o.atol + o.rtol * std::fabs(num))) {
          if (why) {
            std::ostringstream os;
            os << "Jacobian mismatch for input " << k << " (shape " << x.shape_str() << "), output element " << i
               << ", input element " << j << ": numerical " << num << " vs analytical " << ana;
            *why = os.str();
          }
          return false;
        }
      }
    }
  }
  return true;
}

bool gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                   const GradcheckOptions& o, std::string* why) {
  // The function whose Jacobian is checked: the sum of all first-order gradients,
  // weighted by a fixed vector so every entry matters.
  auto first = [&](const std::vector<Tensor>& in) {
    EnableGradGuard enable;  // also when the numerical pass evaluates it
    Tensor y = fn(in);
    std::vector<Tensor> diff;
    for (const Tensor& x : in)
      if (x.requires_grad()) diff.push_back(x);
    Tensor w = arange(0, double(y.numel()), 1, {.dtype = DType::Float64}).reshape(y.sizes()) * 0.1 + 1.0;
    auto gs = grad({y}, diff, {w}, true, true, true);
    Tensor total = zeros({}, {.dtype = DType::Float64});
    for (size_t i = 0; i < gs.size(); ++i)
      if (gs[i].defined()) total = total + (gs[i] * gs[i]).sum();
    return total;
  };
  return gradcheck(first, inputs, o, why);
}

}  // namespace mantissa::autograd
