// --export FILE.onnx for the examples: the trained model as ONNX (onnx/export.h, docs/onnx.md),
// with a dynamic batch dim, in the run's --amp precision. Builds without the exporter (no
// libonnx-dev) keep the flag and explain why it fails.
#pragma once
#include <mantissa.h>

#include <cstdio>
#include <optional>
#include <string>

#ifdef MANTISSA_WITH_ONNX
#include "onnx/export.h"
#endif

namespace examples {

// Traces `model` on the CPU (moving it there and back when it lives on a GPU) on `example`.
inline void export_onnx(mantissa::nn::Module& model, const mantissa::Tensor& example, const std::string& path,
                        std::optional<mantissa::DType> amp, mantissa::Device device, const std::string& input_name,
                        const std::string& output_name) {
#ifdef MANTISSA_WITH_ONNX
  namespace mt = mantissa;
  if (!device.is_cpu()) model.to(mt::Device::cpu());
  try {
    mt::onnx::export_model(model, {example.to(mt::Device::cpu())}, path,
                           {.input_names = {input_name},
                            .output_names = {output_name},
                            .dynamic_batch = true,
                            .dtype = amp.value_or(mt::kFloat32)});
  } catch (...) {
    if (!device.is_cpu()) model.to(device);
    throw;
  }
  if (!device.is_cpu()) model.to(device);
  std::printf("exported %s (ONNX opset 17, %s, input '%s' %s, dynamic batch)\n", path.c_str(),
              mt::dtype_name(amp.value_or(mt::kFloat32)), input_name.c_str(), example.shape_str().c_str());
#else
  (void)model, (void)example, (void)amp, (void)device, (void)input_name, (void)output_name;
  throw mantissa::Error("--export: '" + path +
                        "' not written: this build has no ONNX exporter (install libonnx-dev libprotobuf-dev and "
                        "reconfigure)");
#endif
}

}  // namespace examples
