#include "nn/resnet.h"

#include "autograd/ops.h"
#include "nn/init.h"

namespace mantissa::nn {

namespace {

int64_t checked_blocks(int64_t depth) {
  MT_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "CifarResNet",
           "depth must be 6n + 2 with n >= 1 (20, 32, 44, 56, 110), got ", depth);
  return (depth - 2) / 6;
}

void add_stage(Sequential& stage, int64_t in_channels, int64_t out_channels, int64_t blocks, int64_t stride) {
  for (int64_t i = 0; i < blocks; ++i)
    stage.push_back(
        std::make_shared<BasicBlock>(i == 0 ? in_channels : out_channels, out_channels, i == 0 ? stride : 1));
}

}  // namespace

BasicBlock::BasicBlock(int64_t in, int64_t out, int64_t stride)
    : conv1(in, out, 3, {.stride = stride, .padding = 1, .bias = false}),
      conv2(out, out, 3, {.stride = 1, .padding = 1, .bias = false}),
      bn1(out),
      bn2(out) {
  MT_CHECK(stride >= 1, "BasicBlock", "stride must be positive, got ", stride);
  register_module("conv1", conv1);
  register_module("bn1", bn1);
  register_module("conv2", conv2);
  register_module("bn2", bn2);
  if (stride != 1 || in != out) {
    shortcut = register_module(
        "shortcut",
        std::make_shared<Sequential>(Conv2d(in, out, 1, {.stride = stride, .bias = false}), BatchNorm2d(out)));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor h = relu(bn1(conv1(x)));
  h = bn2(conv2(h));
  return relu(h + (shortcut ? (*shortcut)(x) : x));
}

CifarResNet::CifarResNet(int64_t d, const CifarResNetOptions& o)
    : depth(d),
      blocks_per_stage(checked_blocks(d)),
      options(o),
      conv1(o.in_channels, o.base_width, 3, {.padding = 1, .bias = false}),
      bn1(o.base_width),
      fc(4 * o.base_width, o.num_classes) {
  MT_CHECK(o.num_classes > 0 && o.in_channels > 0 && o.base_width > 0, "CifarResNet",
           "num_classes, in_channels and base_width must be positive, got ", o.num_classes, ", ", o.in_channels, ", ",
           o.base_width);
  const int64_t w = o.base_width;
  add_stage(layer1, w, w, blocks_per_stage, 1);
  add_stage(layer2, w, 2 * w, blocks_per_stage, 2);
  add_stage(layer3, 2 * w, 4 * w, blocks_per_stage, 2);
  register_module("conv1", conv1);
  register_module("bn1", bn1);
  register_module("layer1", layer1);
  register_module("layer2", layer2);
  register_module("layer3", layer3);
  register_module("fc", fc);
  // He et al.'s initialization for the convs (the paper's reference [13]).
  apply([](Module& m) {
    if (auto* conv = dynamic_cast<Conv2d*>(&m))
      init::kaiming_normal_(conv->weight, 0, init::FanMode::FanOut, init::Nonlinearity::ReLU);
  });
}

Tensor CifarResNet::forward(const Tensor& x) {
  MT_CHECK(x.defined() && x.dim() == 4 && x.size(1) == options.in_channels, "CifarResNet", "expected input [N, ",
           options.in_channels, ", H, W], got ", x.defined() ? x.shape_str() : "undefined");
  Tensor h = relu(bn1(conv1(x)));
  h = layer3(layer2(layer1(h)));
  return fc(mean(h, {2, 3}));  // global average pooling: [N, 64, H/4, W/4] -> [N, 64]
}

}  // namespace mantissa::nn
