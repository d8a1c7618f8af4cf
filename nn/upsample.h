// nn::Upsample: functional::interpolate as a module (torch.nn.Upsample).
//   mt::nn::Upsample up({.scale_factor = {2.0}, .mode = "bilinear", .align_corners = false});
//   Tensor y = up.forward(x);   // [N, C, H, W] -> [N, C, 2H, 2W]
#pragma once
#include <string>

#include "nn/functional.h"
#include "nn/module.h"

namespace mantissa::nn {

class Upsample : public Module {
 public:
  explicit Upsample(const functional::InterpolateOptions& options);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;

  functional::InterpolateOptions options;
};

}  // namespace mantissa::nn
