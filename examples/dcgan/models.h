// The DCGAN of the LibTorch example, for 28x28 images: a generator of transposed
// convolutions from noise [N, noise, 1, 1] to [N, 1, 28, 28] in [-1, 1] (tanh), and a
// discriminator of strided convolutions with LeakyReLU(0.2) to one logit per image. The
// discriminator ends at the logit (no sigmoid): the loss is binary_cross_entropy_with_logits,
// which autocast runs in fp32 (the probability form is refused under fp16 autocast, as in
// PyTorch). `width` scales every layer's channels (the LibTorch example's is 64).
#pragma once
#include <mantissa.h>

namespace dcgan {

namespace nn = mantissa::nn;

// noise [N, z, 1, 1] -> 4x4 -> 7x7 -> 14x14 -> [N, 1, 28, 28]
inline nn::Sequential generator(int64_t z, int64_t w) {
  return nn::Sequential(
      nn::ConvTranspose2d(z, 4 * w, 4, {.bias = false}), nn::BatchNorm2d(4 * w), nn::ReLU(),
      nn::ConvTranspose2d(4 * w, 2 * w, 3, {.stride = 2, .padding = 1, .bias = false}), nn::BatchNorm2d(2 * w),
      nn::ReLU(), nn::ConvTranspose2d(2 * w, w, 4, {.stride = 2, .padding = 1, .bias = false}), nn::BatchNorm2d(w),
      nn::ReLU(), nn::ConvTranspose2d(w, 1, 4, {.stride = 2, .padding = 1}), nn::Tanh());
}

// images [N, 1, 28, 28] -> 14x14 -> 7x7 -> 3x3 -> logits [N]
inline nn::Sequential discriminator(int64_t w) {
  return nn::Sequential(nn::Conv2d(1, w, 4, {.stride = 2, .padding = 1}), nn::LeakyReLU(0.2),
                        nn::Conv2d(w, 2 * w, 4, {.stride = 2, .padding = 1, .bias = false}), nn::BatchNorm2d(2 * w),
                        nn::LeakyReLU(0.2), nn::Conv2d(2 * w, 4 * w, 4, {.stride = 2, .padding = 1, .bias = false}),
                        nn::BatchNorm2d(4 * w), nn::LeakyReLU(0.2), nn::Conv2d(4 * w, 1, 3), nn::Flatten(0));
}

// The DCGAN paper's initialisation: convolution weights N(0, 0.02), batch-norm scales
// N(1, 0.02) and shifts 0.
inline void dcgan_init(nn::Module& m) {
  mantissa::NoGradGuard g;
  auto params = m.named_parameters();
  auto weight_dim = [&](const std::string& bias_name) {  // dims of the weight next to this bias
    const std::string w = bias_name.substr(0, bias_name.size() - 4) + "weight";
    for (auto& [n, p] : params)
      if (n == w) return p.dim();
    return int64_t(0);
  };
  for (auto& [name, p] : params) {
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    if (p.dim() == 4)
      nn::init::normal_(p, 0.0, 0.02);  // convolution weights
    else if (!is_bias)
      nn::init::normal_(p, 1.0, 0.02);  // batch-norm scales
    else if (weight_dim(name) == 1)
      nn::init::zeros_(p);  // batch-norm shifts (convolution biases keep their default)
  }
}

}  // namespace dcgan
