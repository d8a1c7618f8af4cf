// Exporters for custom autograd::Functions (docs/onnx.md):
//
//   mt::onnx::register_function_exporter("softplus", [](mt::onnx::NodeBuilder& g,
//       const std::vector<std::string>& in, const mt::autograd::Context& ctx) {
//     double beta = std::any_cast<double>(ctx.data.at("beta"));
//     return g.node("Softplus", {g.node("Mul", {in[0], g.scalar(beta)})}) ...;
//   });
//
// While exporting, a Function with a registered exporter is recorded as the nodes its exporter
// returns instead of the kernels its forward runs.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "core/tensor.h"

namespace mantissa::onnx {

// An ONNX node attribute: one of an int, a float, a string or a list of ints.
struct Attribute {
  std::string name;
  enum class Kind { Int, Float, String, Ints } kind = Kind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  static Attribute integer(std::string n, int64_t v) { return {std::move(n), Kind::Int, v, 0, {}, {}}; }
  static Attribute real(std::string n, float v) { return {std::move(n), Kind::Float, 0, v, {}, {}}; }
  static Attribute text(std::string n, std::string v) { return {std::move(n), Kind::String, 0, 0, std::move(v), {}}; }
  static Attribute list(std::string n, std::vector<int64_t> v) {
    return {std::move(n), Kind::Ints, 0, 0, {}, std::move(v)};
  }
};

// What an exporter adds nodes through; values are named by strings.
class NodeBuilder {
 public:
  virtual ~NodeBuilder() = default;
  // Adds a node of the default domain (opset 17) and returns its (first) output's name.
  virtual std::string node(const std::string& op_type, const std::vector<std::string>& inputs,
                           const std::vector<Attribute>& attributes = {}) = 0;
  // A constant initializer holding t's values (any CPU tensor).
  virtual std::string constant(const Tensor& t) = 0;
  // A 0-dim constant of `dtype` (a float dtype) holding v.
  virtual std::string scalar(double v, DType dtype) = 0;
  // The dtype of a value of the graph being built.
  virtual DType dtype_of(const std::string& value) const = 0;
};

// inputs: the names of the Function's tensor arguments (after autocast); ctx: its forward's
// context (ctx.data holds its non-tensor state). Returns the output's name.
using FunctionExporter =
    std::function<std::string(NodeBuilder& g, const std::vector<std::string>& inputs, const autograd::Context& ctx)>;
// Registers (or replaces) the exporter of the Function whose `name` is `function_name`.
void register_function_exporter(const std::string& function_name, FunctionExporter exporter);

}  // namespace mantissa::onnx
