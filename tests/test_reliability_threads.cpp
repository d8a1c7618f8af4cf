// Two threads at once (docs/reliability.md "Threads"): the default generator is safe for
// concurrent use, two threads can each train their own model, and two threads can run
// inference on one shared fp32 model (oneDNN primitives included). In a normal build these
// check results; `bash tools/sanitize.sh tsan` runs them under ThreadSanitizer
// (OMP_NUM_THREADS=1: libgomp is not instrumented).
#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "core/cpu/onednn.h"
#include "core/profile.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace mt = mantissa;
namespace F = mantissa::nn::functional;
namespace onednn = mantissa::cpu::onednn;

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

// The model two threads share: a convolution and a linear layer (oneDNN primitives on the CPU).
mt::nn::Sequential shared_model() {
  mt::nn::Sequential net(mt::nn::Conv2d(3, 16, 3, {.padding = 1}), mt::nn::ReLU(), mt::nn::Flatten(),
                         mt::nn::Linear(16 * 8 * 8, 10));
  net.eval();
  return net;
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
// two threads running inference on it. Both threads first run a batch size nobody has run
// yet, so they create the same primitives at the same time (oneDNN's global primitive cache
// shared by two creators); then each repeats its own input. Every result equals the
// single-threaded one, and each thread's calls went through its own primitive cache.
TEST(ReliabilityThreads, TwoThreadsRunInferenceOnOneSharedModel) {
  mt::manual_seed(11);
  mt::nn::Sequential net = shared_model();
  const mt::Tensor x1 = mt::randn({4, 3, 8, 8}), x2 = mt::randn({2, 3, 8, 8}), fresh = mt::randn({3, 3, 8, 8});
  std::vector<float> want1, want2;
  {
    mt::NoGradGuard no_grad;
    want1 = net(x1).to_vector<float>();
    want2 = net(x2).to_vector<float>();
  }
  struct Result {
    std::vector<float> fresh;
    int mismatches = 0;
    onednn::CacheCounts counts;
  };
  auto run = [&](const mt::Tensor& x, const std::vector<float>& want, Result& r) {
    mt::NoGradGuard no_grad;
    r.fresh = net(fresh).to_vector<float>();
    for (int i = 0; i < 20; ++i)
      if (net(x).to_vector<float>() != want) ++r.mismatches;
    r.counts = onednn::thread_cache_counts();
  };
  Result r1, r2;
  std::thread ta([&] { run(x1, want1, r1); });
  std::thread tb([&] { run(x2, want2, r2); });
  ta.join();
  tb.join();
  std::vector<float> want_fresh;
  {
    mt::NoGradGuard no_grad;
    want_fresh = net(fresh).to_vector<float>();
  }
  for (const Result* r : {&r1, &r2}) {
    EXPECT_EQ(r->fresh, want_fresh);
    EXPECT_EQ(r->mismatches, 0);
    if (onednn::use_onednn(onednn::OpKind::Conv, mt::kFloat32) &&
        onednn::use_onednn(onednn::OpKind::Matmul, mt::kFloat32)) {
      // A new thread starts with empty caches: the convolution and the matmul of each of its
      // two batch sizes are made once, and the 19 repeats of its own input are hits.
      EXPECT_EQ(r->counts.made, 4);
      EXPECT_EQ(r->counts.hits, 2 * 19);
    }
  }
}

// The same while a Profile records: both threads push the shared root module's range (its
// name is computed on first use, by whichever thread gets there first), and every forward of
// each thread is recorded.
TEST(ReliabilityThreads, TwoThreadsRunInferenceOnOneSharedModelWhileProfiling) {
  mt::manual_seed(12);
  mt::nn::Sequential net = shared_model();
  const mt::Tensor x1 = mt::randn({4, 3, 8, 8}), x2 = mt::randn({2, 3, 8, 8});
  std::vector<float> want1, want2;
  {
    mt::NoGradGuard no_grad;
    want1 = net(x1).to_vector<float>();
    want2 = net(x2).to_vector<float>();
  }
  constexpr int kForwards = 5;
  auto run = [&](const mt::Tensor& x, const std::vector<float>& want, int& mismatches) {
    mt::NoGradGuard no_grad;
    for (int i = 0; i < kForwards; ++i)
      if (net(x).to_vector<float>() != want) ++mismatches;
  };
  int m1 = 0, m2 = 0;
  mt::profiler::Profile prof;
  std::thread ta([&] { run(x1, want1, m1); });
  std::thread tb([&] { run(x2, want2, m2); });
  ta.join();
  tb.join();
  prof.stop();
  EXPECT_EQ(m1, 0);
  EXPECT_EQ(m2, 0);
  std::map<int, int> roots, ops;  // by profile thread: forwards of the root module, dispatched ops
  for (const mt::profiler::Event& e : prof.events()) {
    if (e.kind == mt::profiler::Kind::Module && e.name == "Sequential") ++roots[e.thread];
    if (e.kind == mt::profiler::Kind::Op) ++ops[e.thread];
  }
  EXPECT_EQ(roots, (std::map<int, int>{{0, kForwards}, {1, kForwards}}));
  // The same forwards on both threads: the same ops.
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_GT(ops[0], 0);
  EXPECT_EQ(ops[0], ops[1]);
}
