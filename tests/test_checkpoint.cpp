// Checkpoints: exact resume, atomic save, and loads that validate before changing anything.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <filesystem>
#include <fstream>

namespace mt = mantissa;
namespace fs = std::filesystem;

namespace {

struct Net : mt::nn::Module {
  mt::nn::Linear fc1{6, 8}, fc2{8, 3};
  Net() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return fc2(mt::relu(fc1(x))); }
};

struct TrainingRun {
  Net net;
  mt::optim::AdamW opt{net.parameters(), {.lr = 0.01}};
  mt::optim::StepLR sched{opt, 3, 0.5};
  mt::amp::GradScaler scaler{{.init_scale = 1024.0, .growth_interval = 4}};
  mt::optim::Checkpoint parts() { return {.model = &net, .optimizer = &opt, .scheduler = &sched, .scaler = &scaler}; }

  // Steps with fresh random data each time (drawn from the global RNG, also checkpointed).
  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      mt::Tensor x = mt::randn({5, 6});
      mt::Tensor y = mt::randint(0, 3, {5});
      mt::Tensor loss;
      {
        mt::amp::Autocast ac(mt::kHalf);
        loss = mt::nn::functional::cross_entropy(net(x), y);
      }
      opt.zero_grad();
      scaler.backward(loss);
      scaler.step(opt);
      scaler.update();
      sched.step();
    }
  }
};

std::vector<std::vector<float>> weights(const mt::nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const auto& p : m.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

fs::path temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / "mantissa_checkpoint_test";
  fs::create_directories(dir);
  return dir / name;
}

}  // namespace

TEST(Checkpoint, ResumeIsBitIdentical) {
  const fs::path path = temp_path("resume.safetensors");
  // N steps, save, load into a differently initialised run, N more steps ...
  mt::manual_seed(11);
  TrainingRun a;
  mt::manual_seed(12345);
  a.train(5);
  mt::optim::save_checkpoint(path.string(), a.parts(), {.epoch = 5, .extra = {}});
  mt::manual_seed(999);  // disturb the RNG: the checkpoint must restore it
  TrainingRun b;
  auto info = mt::optim::load_checkpoint(path.string(), b.parts());
  EXPECT_EQ(info.epoch, 5);
  b.train(5);
  // ... equals 2N steps straight.
  mt::manual_seed(11);
  TrainingRun c;
  mt::manual_seed(12345);
  c.train(10);
  EXPECT_EQ(weights(b.net), weights(c.net));
  EXPECT_EQ(b.scaler.scale(), c.scaler.scale());
  EXPECT_EQ(b.sched.get_last_lr(), c.sched.get_last_lr());
}

TEST(Checkpoint, FilesAreStandardSafetensorsWithModelNames) {
  const fs::path path = temp_path("names.safetensors");
  TrainingRun a;
  a.train(1);
  mt::optim::save_checkpoint(path.string(), a.parts());
  auto f = mt::load_safetensors(path.string());
  EXPECT_TRUE(f.tensors.count("fc1.weight"));
  EXPECT_TRUE(f.tensors.count("fc2.bias"));
  EXPECT_EQ(f.tensors.at("fc1.weight").to_vector<float>(), a.net.fc1.weight.to_vector<float>());
}

TEST(Checkpoint, BadFilesLeaveTheModelUntouched) {
  const fs::path path = temp_path("good.safetensors");
  TrainingRun a;
  a.train(2);
  mt::optim::save_checkpoint(path.string(), a.parts());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  TrainingRun b;
  b.train(1);
  const auto before = weights(b.net);
  const auto opt_before = b.opt.state_dict().size();

  // Truncated.
  const fs::path trunc = temp_path("trunc.safetensors");
  std::ofstream(trunc, std::ios::binary) << bytes.substr(0, bytes.size() - 7);
  EXPECT_THROW(mt::optim::load_checkpoint(trunc.string(), b.parts()), mt::Error);
  EXPECT_EQ(weights(b.net), before);

  // A model with a different shape: the error names the key; nothing changes.
  struct Other : mt::nn::Module {
    mt::nn::Linear fc1{6, 8}, fc2{8, 4};
    Other() {
      register_module("fc1", fc1);
      register_module("fc2", fc2);
    }
  } other;
  auto other_before = weights(other);
  try {
    mt::optim::load_checkpoint(path.string(), {.model = &other});
    FAIL() << "expected a shape mismatch";
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc2.weight"), std::string::npos) << e.what();
  }
  EXPECT_EQ(weights(other), other_before);

  // Optimizer of another type: refused before the model is touched.
  mt::optim::SGD sgd(b.net.parameters(), {.lr = 0.1});
  EXPECT_THROW(mt::optim::load_checkpoint(path.string(), {.model = &b.net, .optimizer = &sgd}), mt::Error);
  EXPECT_EQ(weights(b.net), before);
  EXPECT_EQ(b.opt.state_dict().size(), opt_before);
}

TEST(Checkpoint, SaveIsAtomic) {
  const fs::path path = temp_path("atomic.safetensors");
  TrainingRun a;
  mt::optim::save_checkpoint(path.string(), a.parts(), {.epoch = 1, .extra = {}});
  // A save into a missing directory fails and leaves nothing half-written.
  EXPECT_THROW(mt::optim::save_checkpoint((path.parent_path() / "missing" / "x.safetensors").string(), a.parts()),
               mt::Error);
  EXPECT_EQ(mt::optim::load_checkpoint(path.string(), a.parts()).epoch, 1);
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
}
