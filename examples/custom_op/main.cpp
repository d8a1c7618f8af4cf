// Defining your own differentiable op with mt::autograd::Function.
//
// Softplus with a sharpness parameter:  y = log(1 + exp(beta * x)) / beta,
// whose derivative is dy/dx = sigmoid(beta * x). The forward saves x for the
// backward and keeps beta (a plain number) in ctx.data. The backward is written
// with differentiable ops, so gradients of gradients work too.
#include <mantissa.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#ifdef MANTISSA_WITH_ONNX
#include <filesystem>

#include "onnx/custom.h"
#include "onnx/export.h"
#endif

namespace mt = mantissa;

struct Softplus : mt::autograd::Function<Softplus> {
  static constexpr const char* name = "softplus";  // also its key in the autocast policy table

  // Runs without recording a graph; any Tensor argument can receive a gradient.
  static mt::Tensor forward(mt::autograd::Context& ctx, const mt::Tensor& x, double beta) {
    ctx.save_for_backward({x});  // version-checked: an in-place change to x is reported at backward
    ctx.data["beta"] = beta;
    mt::Tensor bx = x * beta;
    // log(1 + exp(bx)) = max(bx, 0) + log1p(exp(-|bx|)), which cannot overflow.
    return (mt::relu(bx) + mt::log1p(mt::exp(-mt::abs(bx)))) / beta;
  }

  // One gradient per Tensor argument of forward.
  static std::vector<mt::Tensor> backward(mt::autograd::Context& ctx, const mt::Tensor& grad) {
    mt::Tensor x = ctx.saved()[0];
    double beta = std::any_cast<double>(ctx.data.at("beta"));
    return {grad * mt::sigmoid(x * beta)};
  }
};

// The example itself; main() reports any exception instead of letting it abort.
static int run() {
  // Declare the op's precision under autocast: softplus is exp/log heavy, so float32.
  mt::amp::register_cast_policy(Softplus::name, mt::amp::CastPolicy::Fp32);

  mt::Tensor x = mt::from_vector<double>({-2, -0.5, 0, 0.5, 2}, {}, {.dtype = mt::kDouble, .requires_grad = true});
  mt::Tensor y = Softplus::apply(x, 2.0);
  y.sum().backward();
  std::cout << "x         = " << x.detach() << "\n";
  std::cout << "softplus  = " << y.detach() << "\n";
  std::cout << "d/dx      = " << x.grad() << "\n";
  std::cout << "grad_fn   = " << y.grad_fn()->name() << "\n";

  // Compare the gradient with sigmoid(beta * x) and with finite differences.
  std::vector<double> g = x.grad().to_vector<double>(), xv = x.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - 1 / (1 + std::exp(-2 * xv[i]))));
  mt::Tensor small = mt::from_vector<double>({-1.5, 0.25, 2}, {}, {.dtype = mt::kDouble, .requires_grad = true});
  std::string why;
  bool ok = mt::autograd::gradcheck([](const std::vector<mt::Tensor>& in) { return Softplus::apply(in[0], 2.0); },
                                    {small}, {}, &why) &&
            mt::autograd::gradgradcheck([](const std::vector<mt::Tensor>& in) { return Softplus::apply(in[0], 2.0); },
                                        {small}, {}, &why);
  std::printf("max |grad - sigmoid(2x)| = %.3g, gradcheck: %s\n", worst, ok ? "passed" : why.c_str());
#ifdef MANTISSA_WITH_ONNX
  // ONNX export (docs/onnx.md): without an exporter the Function is traced as the kernels its
  // forward runs (Mul, Relu, Abs, Exp, Log, ...); with one it becomes the nodes we choose.
  mt::onnx::register_function_exporter(Softplus::name, [](mt::onnx::NodeBuilder& g, const std::vector<std::string>& in,
                                                          const mt::autograd::Context& ctx) {
    const double beta = std::any_cast<double>(ctx.data.at("beta"));
    const mt::DType t = g.dtype_of(in[0]);
    return g.node("Div", {g.node("Softplus", {g.node("Mul", {in[0], g.scalar(beta, t)})}), g.scalar(beta, t)});
  });
  const std::string path = (std::filesystem::temp_directory_path() / "mantissa_custom_op.onnx").string();
  mt::onnx::export_function(
      [](const std::vector<mt::Tensor>& in) { return std::vector<mt::Tensor>{Softplus::apply(in[0], 2.0)}; }, nullptr,
      {mt::randn({4, 3})}, path, {.input_names = {"x"}, .output_names = {"y"}});
  std::printf("exported %s: softplus as ONNX Mul -> Softplus -> Div\n", path.c_str());
  std::filesystem::remove(path);
#endif
  return ok && worst < 1e-12 ? 0 : 1;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "custom_op: " << e.what() << "\n";
    return 1;
  }
}
