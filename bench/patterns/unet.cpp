// A small user-written U-Net-like denoiser: GroupNorm, SiLU, strided conv, bilinear upsampling,
// a skip connection, MSE loss, AdamW; fp32, or bf16 autocast with any argument. Step time and
// loss curve; the PyTorch twin is unet.py (tools/patterns.sh unet [bf16]).
#include <chrono>
#include <cstdio>

#include "mantissa.h"
namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
struct Net : nn::Module {
  nn::Conv2d c1{3, 32, 3, {.padding = 1}}, c2{32, 64, 3, {.stride = 2, .padding = 1}}, c3{64, 32, 3, {.padding = 1}},
      c4{32, 3, 3, {.padding = 1}};
  nn::GroupNorm g1{8, 32}, g2{8, 64}, g3{8, 32};
  Net() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("c3", c3);
    register_module("c4", c4);
    register_module("g1", g1);
    register_module("g2", g2);
    register_module("g3", g3);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h1 = mt::silu(g1(c1(x)));
    Tensor h2 = mt::silu(g2(c2(h1)));
    Tensor u = F::interpolate(h2, {.scale_factor = {2.0}, .mode = "bilinear"});
    Tensor h3 = mt::silu(g3(c3(u))) + h1;
    return c4(h3);
  }
};
int main(int argc, char** argv) {
  const bool bf16 = argc > 1;
  mt::manual_seed(0);
  Net net;
  mt::optim::AdamW opt(net.parameters(), {.lr = 2e-3});
  Tensor clean = mt::rand({16, 3, 32, 32});
  double best = 1e30;
  double first = 0, last = 0;
  for (int it = 0; it < 30; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor noisy = clean + mt::randn(clean.sizes()) * 0.3;
    opt.zero_grad();
    Tensor loss;
    {
      std::optional<mt::amp::Autocast> ac;
      if (bf16) ac.emplace(mt::kBFloat16, true, mt::DeviceType::CPU);
      loss = F::mse_loss(net(noisy), clean);
    }
    loss.backward();
    opt.step();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (it >= 5) best = std::min(best, ms);
    if (it == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  printf("mantissa %s: step %.2f ms (best of 25), loss %.4f -> %.4f\n", bf16 ? "bf16" : "fp32", best, first, last);
}
