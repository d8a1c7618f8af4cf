// Deterministic training with 2 threads: two identical runs give bit-identical weights, and
// a run interrupted by a checkpoint and resumed ends bit-identical to the uninterrupted one,
// for the MNIST example's MLP and CNN in fp32 and fp16 (autocast + GradScaler). The CNN's
// convolutions are big enough here to take the multi-threaded weight-gradient path.
#include <gtest/gtest.h>
#include <mantissa.h>
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "../examples/mnist/models.h"

namespace mt = mantissa;
namespace F = mantissa::nn::functional;
namespace fs = std::filesystem;

namespace {

struct Config {
  bool cnn, fp16;
};

struct TrainingRun {
  std::unique_ptr<mt::nn::Module> net;
  std::unique_ptr<mt::optim::AdamW> opt;
  std::unique_ptr<mt::optim::WarmupCosineLR> sched;
  mt::amp::GradScaler scaler;
  Config cfg;

  explicit TrainingRun(Config c, int total_steps)
      : scaler({.init_scale = 1024.0, .growth_interval = 2, .enabled = c.fp16}), cfg(c) {
    mt::manual_seed(42);
    if (c.cnn)
      net = std::make_unique<mnist::Cnn>();
    else
      net = std::make_unique<mnist::Mlp>();
    opt = std::make_unique<mt::optim::AdamW>(net->parameters(), mt::optim::AdamWOptions{.lr = 1e-3});
    sched = std::make_unique<mt::optim::WarmupCosineLR>(*opt, 1, total_steps);
  }
  mt::optim::Checkpoint parts() {
    return {.model = net.get(), .optimizer = opt.get(), .scheduler = sched.get(), .scaler = &scaler};
  }
  // Steps on batches drawn from the global RNG (which the checkpoint saves and restores).
  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      mt::Tensor x = mt::randn({16, 1, 28, 28});
      mt::Tensor y = mt::randint(0, 10, {16});
      mt::Tensor loss;
      {
        mt::amp::Autocast ac(mt::kHalf, cfg.fp16);
        loss = F::cross_entropy((*net)(x), y);
      }
      opt->zero_grad();
      scaler.backward(loss);
      scaler.step(*opt);
      scaler.update();
      sched->step();
    }
  }
  std::vector<std::vector<float>> weights() const {
    std::vector<std::vector<float>> out;
    for (const auto& p : net->parameters()) out.push_back(p.to_vector<float>());
    return out;
  }
};

class Determinism : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override { omp_set_num_threads(2); }
  void TearDown() override { omp_set_num_threads(omp_get_num_procs()); }
};

constexpr int kSteps = 4;

TEST_P(Determinism, TwoRunsAreBitIdentical) {
  // One after the other: each run seeds the RNG, builds its model and draws its batches.
  TrainingRun a(GetParam(), kSteps);
  a.train(kSteps);
  TrainingRun b(GetParam(), kSteps);
  b.train(kSteps);
  EXPECT_EQ(a.weights(), b.weights());
}

TEST_P(Determinism, ResumeMatchesTheUninterruptedRun) {
  const fs::path ckpt =
      fs::temp_directory_path() / ("mantissa_determinism_" + std::to_string(getpid()) + ".safetensors");
  TrainingRun straight(GetParam(), kSteps);
  straight.train(kSteps / 2);
  mt::optim::save_checkpoint(ckpt.string(), straight.parts(), {.epoch = 1, .extra = {}});
  straight.train(kSteps / 2);

  TrainingRun resumed(GetParam(), kSteps);
  mt::randn({3});  // disturb the RNG: the checkpoint must restore it
  EXPECT_EQ(mt::optim::load_checkpoint(ckpt.string(), resumed.parts()).epoch, 1);
  resumed.train(kSteps / 2);
  EXPECT_EQ(straight.weights(), resumed.weights());
  fs::remove(ckpt);
}

INSTANTIATE_TEST_SUITE_P(Models, Determinism,
                         ::testing::Values(Config{false, false}, Config{false, true}, Config{true, false},
                                           Config{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.cnn ? "Cnn" : "Mlp") + (info.param.fp16 ? "Fp16" : "Fp32");
                         });

}  // namespace
