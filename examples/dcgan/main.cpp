// Trains the DCGAN of the LibTorch example on Fashion-MNIST, in fp32 or under autocast: two
// models, two Adam optimizers and ONE GradScaler, as PyTorch's AMP recipe for several models
// and losses (scale each loss, step each optimizer, one update per iteration). Writes an
// 8x8 grid of samples from a fixed noise batch as a PNG after every epoch.
//
//   dcgan --epochs 5 --amp fp16 --samples-dir runs/fp16
//   dcgan --limit 2048 --epochs 1 --width 16      # a quick run
#include <mantissa.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "models.h"
#include "png.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;

namespace {

// images [64, 1, 28, 28] in [-1, 1] -> one 8x8 grid with 2-pixel gaps, 8-bit gray.
void write_grid(const mt::Tensor& images, const std::string& path) {
  const int64_t n = 8, s = 28, gap = 2, side = n * (s + gap) + gap;
  const std::vector<float> v = ((images.to(mt::kFloat32).to(mt::Device::cpu()) + 1.0) * 127.5).to_vector<float>();
  std::vector<unsigned char> px(size_t(side * side), 0);
  for (int64_t k = 0; k < n * n && k < images.size(0); ++k)
    for (int64_t y = 0; y < s; ++y)
      for (int64_t x = 0; x < s; ++x) {
        const float f = v[size_t(k * s * s + y * s + x)];
        const int64_t row = gap + (k / n) * (s + gap) + y, col = gap + (k % n) * (s + gap) + x;
        px[size_t(row * side + col)] = static_cast<unsigned char>(std::clamp(f, 0.0f, 255.0f) + 0.5f);
      }
  dcgan::write_gray_png(path, px, uint32_t(side), uint32_t(side));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a DCGAN on (Fashion-)MNIST with optional mixed precision"};
  std::string amp_name = "off", data_dir = mt::data::kFashionMnistDir, device_name = "cpu", samples_dir = ".";
  int epochs = 5;
  int64_t batch_size = 64, limit = 0, width = 32, noise = 100;
  double lr = 2e-4;
  uint64_t seed = 0;
  app.add_option("--epochs", epochs, "training epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch_size, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "Adam learning rate of both models (betas 0.5, 0.999)")->check(CLI::PositiveNumber);
  app.add_option("--width", width,
                 "channels of the first discriminator and last generator layer (LibTorch's example: 64)")
      ->check(CLI::PositiveNumber);
  app.add_option("--noise", noise, "noise size")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed");
  app.add_option("--data-dir", data_dir, "directory with the MNIST IDX files (plain or .gz)");
  app.add_option("--device", device_name, "cpu or cuda[:N]");
  app.add_option("--amp", amp_name, "mixed precision: off, fp16 (with loss scaling) or bf16")
      ->check(CLI::IsMember({"off", "fp16", "bf16"}));
  app.add_option("--samples-dir", samples_dir, "where samples-epoch<N>.png go");
  app.add_option("--limit", limit, "use only the first N training images (quick runs)")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    const mt::Device device = mt::Device::parse(device_name);
    mt::manual_seed(seed);
    mt::data::LabeledImages train;
    try {
      train = mt::data::load_mnist(data_dir, mt::data::Split::Train);
    } catch (const mt::Error& e) {
      std::cerr << "dcgan: cannot read the data set in '" << data_dir << "': " << e.what() << "\n"
                << "Install the default data with `apt-get install dataset-fashion-mnist`, or pass --data-dir.\n";
      return 2;
    }
    if (limit > 0) train.images = train.images.narrow(0, 0, std::min(limit, train.images.size(0))).contiguous();
    std::filesystem::create_directories(samples_dir);
    // [0, 1] -> [-1, 1], the generator's tanh range.
    mt::data::DataLoader loader(
        mt::data::TensorDataset(train.images * 2.0 - 1.0, train.labels.narrow(0, 0, train.images.size(0))),
        {.batch_size = batch_size, .shuffle = true, .seed = seed, .drop_last = true, .device = device});

    nn::Sequential gen = dcgan::generator(noise, width), disc = dcgan::discriminator(width);
    dcgan::dcgan_init(gen);
    dcgan::dcgan_init(disc);
    gen.to(device);
    disc.to(device);
    mt::optim::Adam g_opt(gen.parameters(), {.lr = lr, .betas = {0.5, 0.999}});
    mt::optim::Adam d_opt(disc.parameters(), {.lr = lr, .betas = {0.5, 0.999}});
    std::optional<mt::DType> amp;
    if (amp_name == "fp16") amp = mt::kHalf;
    if (amp_name == "bf16") amp = mt::kBFloat16;
    // One scaler for both models (fp16 needs loss scaling; bf16 does not).
    mt::amp::GradScaler scaler({.enabled = amp_name == "fp16"});
    const mt::Tensor fixed_noise = mt::randn({64, noise, 1, 1}).to(device);
    const mt::TensorOptions on{.device = device};
    std::printf("dcgan: %lld images, batch %lld, width %lld, amp %s, %lld + %lld parameters\n",
                (long long)train.images.size(0), (long long)batch_size, (long long)width, amp_name.c_str(),
                (long long)gen.num_parameters(), (long long)disc.num_parameters());

    double d_loss_epoch = 0, g_loss_epoch = 0, real_p = 0, fake_p = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      double d_sum = 0, g_sum = 0, real_sum = 0, fake_sum = 0;
      int64_t steps = 0;
      for (auto& batch : loader) {
        const mt::Tensor real = batch.data;
        const int64_t n = real.size(0);
        const mt::Tensor real_target = mt::full({n}, 0.9, on), fake_target = mt::zeros({n}, on),
                         gen_target = mt::ones({n}, on);  // one-sided label smoothing on real
        // Discriminator: real images towards 0.9, generated ones towards 0.
        mt::Tensor fake, d_loss, real_logits, fake_logits;
        {
          mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value());
          real_logits = disc(real);
          fake = gen(mt::randn({n, noise, 1, 1}, on));
          fake_logits = disc(fake.detach());
          d_loss = F::binary_cross_entropy_with_logits(real_logits, real_target) +
                   F::binary_cross_entropy_with_logits(fake_logits, fake_target);
        }
        d_opt.zero_grad();
        scaler.backward(d_loss);
        scaler.step(d_opt);
        // Generator: make the (just updated) discriminator call its images real.
        mt::Tensor g_loss;
        {
          mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value());
          g_loss = F::binary_cross_entropy_with_logits(disc(fake), gen_target);
        }
        g_opt.zero_grad();
        scaler.backward(g_loss);
        scaler.step(g_opt);
        scaler.update();  // once per iteration, after both optimizers
        d_sum += d_loss.item<double>();
        g_sum += g_loss.item<double>();
        real_sum += mt::mean(mt::sigmoid(real_logits.to(mt::kFloat32))).item<double>();
        fake_sum += mt::mean(mt::sigmoid(fake_logits.to(mt::kFloat32))).item<double>();
        ++steps;
      }
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      d_loss_epoch = d_sum / double(std::max<int64_t>(steps, 1));
      g_loss_epoch = g_sum / double(std::max<int64_t>(steps, 1));
      real_p = real_sum / double(std::max<int64_t>(steps, 1));
      fake_p = fake_sum / double(std::max<int64_t>(steps, 1));
      mt::Tensor samples;
      {
        mt::NoGradGuard no_grad;
        gen.eval();
        mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value());
        samples = gen(fixed_noise);
        gen.train();
      }
      const std::string path =
          (std::filesystem::path(samples_dir) / ("samples-epoch" + std::to_string(epoch) + ".png")).string();
      write_grid(samples, path);
      std::printf(
          "epoch %d/%d  d_loss %.4f  g_loss %.4f  D(x) %.3f  D(G(z)) %.3f  scale %g  skipped %lld  %.1f s  -> %s\n",
          epoch, epochs, d_loss_epoch, g_loss_epoch, real_p, fake_p, scaler.scale(), (long long)scaler.skipped_steps(),
          secs, path.c_str());
      std::fflush(stdout);
    }
    std::printf("final: amp=%s epochs=%d d_loss=%.4f g_loss=%.4f D(x)=%.3f D(G(z))=%.3f skipped=%lld\n",
                amp_name.c_str(), epochs, d_loss_epoch, g_loss_epoch, real_p, fake_p,
                (long long)scaler.skipped_steps());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "dcgan: " << e.what() << "\n";
    return 1;
  }
}
