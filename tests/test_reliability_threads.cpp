// Two threads at once (docs/reliability.md "Threads"): the default generator is safe for
// concurrent use, two threads can each train their own model, and two threads can run
// inference on one shared fp32 model (oneDNN primitives included). In a normal build these
// check results; `bash tools/sanitize.sh tsan` runs them under ThreadSanitizer
// (OMP_NUM_THREADS=1: libgomp is not instrumented).
#include <algorithm>
#include <thread>
#include <vector>

#include "optim/adamw.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace mt = mantissa;
namespace F = mantissa::nn::functional;

namespace {

constexpr int kDraws = 200;
constexpr int64_t kChunk = 101;  // odd: a tensor's normals end on a cached spare deviate

std::vector<std::vector<double>> draw_chunks(int n) {
  std::vector<std::vector<double>> out;
  for (int i = 0; i < n; ++i) out.push_back(mt::randn({kChunk}, {.dtype = mt::kFloat64}).to_vector<double>());
  return out;
}

struct Mlp : mt::nn::Module {
  mt::nn::Linear fc1{8, 16}, fc2{16, 3};
  mt::nn::Dropout drop{0.25};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("drop", drop);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return fc2(drop(mt::relu(fc1(x)))); }
};

// Builds its own model and trains it for a few steps (randn, initialisers, dropout and the
// optimizer all run on this thread while another thread does the same).
double train_own_model(bool adamw) {
  Mlp net;
  std::unique_ptr<mt::optim::Optimizer> opt;
  if (adamw)
    opt = std::make_unique<mt::optim::AdamW>(net.parameters(), mt::optim::AdamWOptions{.lr = 0.01});
  else
    opt = std::make_unique<mt::optim::SGD>(net.parameters(), mt::optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  const mt::Tensor x = mt::randn({32, 8});
  const mt::Tensor y = mt::randint(0, 3, {32});
  double loss = 0;
  for (int step = 0; step < 20; ++step) {
    opt->zero_grad();
    mt::Tensor l = F::cross_entropy(net(x), y);
    l.backward();
    opt->step();
    loss = l.item<double>();
  }
  return loss;
}

}  // namespace

// Each randn call is one contiguous run of the stream, whichever thread drew it: the chunks of
// two concurrent threads are, as a set, exactly the chunks of one thread drawing them all.
TEST(ReliabilityThreads, DefaultGeneratorHandsOutWholeRunsToConcurrentThreads) {
  mt::manual_seed(1234);
  std::vector<std::vector<double>> serial = draw_chunks(2 * kDraws);
  mt::manual_seed(1234);
  std::vector<std::vector<double>> a, b;
  std::thread ta([&] { a = draw_chunks(kDraws); });
  std::thread tb([&] { b = draw_chunks(kDraws); });
  ta.join();
  tb.join();
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  std::sort(serial.begin(), serial.end());
  EXPECT_EQ(a, serial);
  // The scalar draws and the generator's state are consistent too.
  mt::manual_seed(99);
  const double u0 = mt::default_generator().uniform();
  mt::manual_seed(99);
  const std::string st = mt::default_generator().get_state();
  EXPECT_EQ(mt::default_generator().uniform(), u0);
  mt::default_generator().set_state(st);
  EXPECT_EQ(mt::default_generator().uniform(), u0);
}

TEST(ReliabilityThreads, TwoThreadsTrainTheirOwnModels) {
  mt::manual_seed(7);
  double la = 0, lb = 0;
  std::thread ta([&] { la = train_own_model(false); });
  std::thread tb([&] { lb = train_own_model(true); });
  ta.join();
  tb.join();
  // Both trained (3 classes: chance is log 3 = 1.10) without NaN.
  EXPECT_TRUE(std::isfinite(la) && std::isfinite(lb));
  EXPECT_LT(la, 1.0);
  EXPECT_LT(lb, 1.0);
}

// One shared fp32 model (a convolution and a linear layer: oneDNN primitives on the CPU),
// two threads running inference on it; each result equals the single-threaded one.
TEST(ReliabilityThreads, TwoThreadsRunInferenceOnOneSharedModel) {
  mt::manual_seed(11);
  mt::nn::Sequential net(mt::nn::Conv2d(3, 16, 3, {.padding = 1}), mt::nn::ReLU(), mt::nn::Flatten(),
                         mt::nn::Linear(16 * 8 * 8, 10));
  net.eval();
  const mt::Tensor x1 = mt::randn({4, 3, 8, 8}), x2 = mt::randn({2, 3, 8, 8});
  std::vector<float> want1, want2;
  {
    mt::NoGradGuard no_grad;
    want1 = net(x1).to_vector<float>();
    want2 = net(x2).to_vector<float>();
  }
  auto run = [&](const mt::Tensor& x, const std::vector<float>& want, int& mismatches) {
    mt::NoGradGuard no_grad;
    for (int i = 0; i < 20; ++i)
      if (net(x).to_vector<float>() != want) ++mismatches;
  };
  int m1 = 0, m2 = 0;
  std::thread ta([&] { run(x1, want1, m1); });
  std::thread tb([&] { run(x2, want2, m2); });
  ta.join();
  tb.join();
  EXPECT_EQ(m1, 0);
  EXPECT_EQ(m2, 0);
}
