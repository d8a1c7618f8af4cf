// ResNet for 32x32 images (He et al. 2016, section 4.2): a 3x3 conv, three stages of n
// basic blocks with 16, 32 and 64 channels (the 2nd and 3rd stage start with stride 2),
// global average pooling and a linear classifier; depth = 6n + 2 (20, 32, 44, 56, 110).
// Shortcuts are identities, and a 1x1 conv + batch norm where the shape changes.
//
//   mt::nn::CifarResNet net(20);                     // 0.27 M parameters, [N, 3, 32, 32] -> [N, 10]
//   mt::nn::CifarResNet net100(56, {.num_classes = 100});
//   // a block in a model of your own:
//   mt::nn::BasicBlock block(64, 128, /*stride=*/2);  // [N, 64, H, W] -> [N, 128, H / 2, W / 2]
#pragma once
#include <memory>

#include "nn/container.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace mantissa::nn {

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), 3x3 convs without bias.
class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;

  Conv2d conv1, conv2;
  BatchNorm2d bn1, bn2;
  // 1x1 conv (stride `stride`, no bias) + BatchNorm2d, present when the stride is not 1 or
  // the channel count changes; null for an identity shortcut.
  std::shared_ptr<Sequential> shortcut;
};

struct CifarResNetOptions {
  int64_t num_classes = 10;
  int64_t in_channels = 3;
  int64_t base_width = 16;  // channels of the first stage; the others are 2x and 4x
};

class CifarResNet : public Module {
 public:
  // depth: 6n + 2 with n >= 1. Convs are initialized kaiming_normal (fan_out, ReLU), batch
  // norms to weight 1 and bias 0, the classifier as nn::Linear.
  explicit CifarResNet(int64_t depth, const CifarResNetOptions& options = {});
  Tensor forward(const Tensor& x) override;  // [N, in_channels, H, W] -> logits [N, num_classes]

  int64_t depth, blocks_per_stage;
  CifarResNetOptions options;
  Conv2d conv1;
  BatchNorm2d bn1;
  Sequential layer1, layer2, layer3;  // of BasicBlock
  Linear fc;
};

}  // namespace mantissa::nn
