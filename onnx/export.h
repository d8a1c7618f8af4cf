// ONNX export (library mantissa::onnx, built when Debian's libonnx-dev is found; docs/onnx.md).
//
//   mt::onnx::export_model(net, {x}, "net.onnx", {.input_names = {"x"}, .output_names = {"logits"},
//                                                 .dynamic_batch = true});
//
// Runs one eval-mode, no-grad forward of `module` on the example inputs with a tracer installed
// (core/trace.h): every kernel the forward dispatches becomes ONNX nodes (opset 17); parameters
// and buffers become initializers named by their state-dict names. The model is checked
// (onnx::checker, strict shape inference) and written atomically: on any error nothing is left
// at `path`, and a previous file there is unchanged.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace mantissa::onnx {

struct ExportOptions {
  std::vector<std::string> input_names;   // default "input0", "input1", ...
  std::vector<std::string> output_names;  // default "output0", ...
  // Dim 0 of every input and output becomes the symbolic "batch".
  bool dynamic_batch = false;
  // Float32, or Float16 / BFloat16: the forward runs under amp::Autocast(dtype), so weights feeding
  // matmul/linear/conv are stored in that dtype and ops the autocast policy keeps in fp32
  // (softmax, norms, losses) read fp32 through Cast nodes.
  DType dtype = DType::Float32;
  std::string graph_name = "mantissa";
};

// Exports `module` (its forward on inputs[0]; CPU tensors) to `path`. Throws mantissa::Error
// naming the op and module path for a kernel without an ONNX mapping.
void export_model(nn::Module& module, const std::vector<Tensor>& inputs, const std::string& path,
                  const ExportOptions& options = {});

// The same for any function of tensors; `module` (may be null) supplies the initializer names and
// the eval mode. Every output must be a defined tensor computed from the inputs.
using TracedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
void export_function(const TracedFn& fn, nn::Module* module, const std::vector<Tensor>& inputs, const std::string& path,
                     const ExportOptions& options = {});

}  // namespace mantissa::onnx
