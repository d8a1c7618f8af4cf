// End-to-end: writes a small MNIST-format data set (IDX files), loads it through the
// reader, and trains the MLP for a few hundred AMP steps; the loss must fall and the
// accuracy must rise far above chance.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace mt = mantissa;
namespace F = mantissa::nn::functional;
namespace fs = std::filesystem;

namespace {

void write_be32(std::ofstream& f, uint32_t v) {
  const unsigned char b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
  f.write(reinterpret_cast<const char*>(b), 4);
}

// Ten classes, each a fixed random 28x28 pattern; examples add pixel noise.
void write_synthetic_mnist(const fs::path& dir, const std::string& prefix, int n, uint32_t seed) {
  std::mt19937 rng(1234);  // prototypes shared by train and test
  std::vector<std::vector<uint8_t>> proto(10, std::vector<uint8_t>(784));
  for (auto& p : proto)
    for (auto& v : p) v = uint8_t(rng() % 2 ? 200 : 30);
  std::mt19937 noise(seed);
  std::ofstream img(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary);
  std::ofstream lab(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  write_be32(img, 0x803);
  write_be32(img, uint32_t(n));
  write_be32(img, 28);
  write_be32(img, 28);
  write_be32(lab, 0x801);
  write_be32(lab, uint32_t(n));
  for (int i = 0; i < n; ++i) {
    uint8_t label = uint8_t(noise() % 10);
    lab.put(char(label));
    for (int j = 0; j < 784; ++j) {
      int v = int(proto[label][size_t(j)]) + int(noise() % 161) - 80;  // heavy noise
      img.put(char(std::clamp(v, 0, 255)));
    }
  }
}

struct Mlp : mt::nn::Module {
  mt::nn::Linear fc1{784, 256}, fc2{256, 128}, fc3{128, 10};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return fc3(mt::relu(fc2(mt::relu(fc1(x.flatten(1)))))); }
};

}  // namespace

TEST(Train, MlpLearnsGeneratedMnistWithFp16Amp) {
  fs::path dir = fs::temp_directory_path() / "mantissa_train_test";
  fs::create_directories(dir);
  write_synthetic_mnist(dir, "train", 2048, 1);
  write_synthetic_mnist(dir, "t10k", 512, 2);
  auto train = mt::data::load_mnist(dir.string(), mt::data::Split::Train);
  auto test = mt::data::load_mnist(dir.string(), mt::data::Split::Test);
  ASSERT_EQ(train.images.sizes(), (mt::Shape{2048, 1, 28, 28}));

  mt::manual_seed(0);
  Mlp net;
  mt::optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  mt::amp::GradScaler scaler;
  mt::data::DataLoader loader(mt::data::TensorDataset(train.images, train.labels),
                              {.batch_size = 32, .shuffle = true, .seed = 3});
  double first = 0, last = 0;
  int steps = 0;
  for (int epoch = 0; epoch < 4; ++epoch)
    for (auto& batch : loader) {
      mt::Tensor loss;
      {
        mt::amp::Autocast ac(mt::kHalf);
        loss = F::cross_entropy(net(batch.data), batch.target);
      }
      opt.zero_grad();
      scaler.backward(loss);
      scaler.step(opt);
      scaler.update();
      if (steps < 10) first += loss.item<double>() / 10;
      last = loss.item<double>();
      ++steps;
    }
  EXPECT_EQ(steps, 4 * 64);
  EXPECT_LT(last, first * 0.5);
  mt::NoGradGuard no_grad;
  mt::Tensor logits;
  {
    mt::amp::Autocast ac(mt::kHalf);
    logits = net(test.images);
  }
  double acc = mt::mean((mt::argmax(logits, 1) == test.labels).to(mt::kFloat32)).item<double>();
  EXPECT_GT(acc, 0.6);  // chance is 0.1
  for (const auto& p : net.parameters()) EXPECT_EQ(p.dtype(), mt::kFloat32);
}
