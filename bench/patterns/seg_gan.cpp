// Two user-written training steps (args: seg or gan, then anything for bf16 autocast); the
// PyTorch twin is seg_gan.py (tools/patterns.sh seg_gan seg [bf16]):
// seg: a small segmentation net (conv, BatchNorm, ReLU, strided conv, nearest 2x, 1x1 head,
//      cross-entropy over [N, 21, H, W] with ignore_index 255 pixels), Adam.
// gan: WGAN-GP critic step (an MLP critic on 784-d inputs; the gradient penalty via
//      autograd::grad with create_graph), Adam.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

#include "mantissa.h"
namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
struct Seg : nn::Module {
  nn::Conv2d c1{3, 32, 3, {.padding = 1}}, c2{32, 64, 3, {.stride = 2, .padding = 1}}, c3{64, 64, 3, {.padding = 1}},
      head{64, 21, 1};
  nn::BatchNorm2d b1{32}, b2{64}, b3{64};
  Seg() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("c3", c3);
    register_module("head", head);
    register_module("b1", b1);
    register_module("b2", b2);
    register_module("b3", b3);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = mt::relu(b1(c1(x)));
    h = mt::relu(b2(c2(h)));
    h = mt::relu(b3(c3(h)));
    return head(F::interpolate(h, {.scale_factor = {2.0}, .mode = "nearest"}));
  }
};
struct Critic : nn::Module {
  nn::Linear l1{784, 512}, l2{512, 256}, l3{256, 1};
  Critic() {
    register_module("l1", l1);
    register_module("l2", l2);
    register_module("l3", l3);
  }
  Tensor forward(const Tensor& x) override { return l3(mt::leaky_relu(l2(mt::leaky_relu(l1(x), 0.2)), 0.2)); }
};
int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "seg") != 0 && std::strcmp(argv[1], "gan") != 0)) {
    std::fprintf(stderr, "usage: seg_gan seg|gan [bf16]\n");
    return 2;
  }
  const char* which = argv[1];
  const bool bf16 = argc > 2;
  mt::manual_seed(0);
  double best = 1e30, first = 0, last = 0;
  // 30 steps of loss_fn (under bf16 autocast when asked), backward and the optimizer's step; the
  // best time of the last 25.
  auto train = [&](mt::optim::Optimizer& opt, const std::function<Tensor()>& loss_fn) {
    for (int it = 0; it < 30; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      opt.zero_grad();
      Tensor loss;
      {
        std::optional<mt::amp::Autocast> ac;
        if (bf16) ac.emplace(mt::kBFloat16, true, mt::DeviceType::CPU);
        loss = loss_fn();
      }
      loss.backward();
      opt.step();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (it >= 5) best = std::min(best, ms);
      if (it == 0) first = loss.item<double>();
      last = loss.item<double>();
    }
  };
  if (!std::strcmp(which, "seg")) {
    Seg net;
    mt::optim::Adam opt(net.parameters(), {.lr = 1e-3});
    Tensor x = mt::randn({8, 3, 64, 64});
    Tensor t = (mt::mean(x, {1}) > 0.0).to(mt::kInt64) + (mt::mean(x, {1}) > 0.7).to(mt::kInt64) * 5;
    t = mt::where(mt::mean(x, {1}) < -1.2, mt::full({}, 255, {.dtype = mt::kInt64}), t);
    train(opt, [&] { return F::cross_entropy(net(x), t, {.ignore_index = 255}); });
  } else {
    Critic D;
    mt::optim::Adam opt(D.parameters(), {.lr = 1e-4});
    Tensor real = mt::rand({256, 784}), fake = mt::rand({256, 784}) * 0.5;
    train(opt, [&] {
      Tensor eps = mt::rand({256, 1});
      Tensor xi = (eps * real + (1.0 - eps) * fake).detach().requires_grad_(true);
      Tensor g = mt::autograd::grad({D(xi).sum()}, {xi}, {}, true, true)[0];
      Tensor gp = mt::pow(mt::norm(g.to(mt::kFloat32), 2, {1}) - 1.0, 2.0).mean();
      return D(fake).mean() - D(real).mean() + 10.0 * gp;
    });
  }
  std::printf("mantissa %s %s: step %.2f ms (best of 25), loss %.4f -> %.4f\n", which, bf16 ? "bf16" : "fp32", best,
              first, last);
}
