// Profiler ranges (core/profiler.h): the run-time switch, balanced push/pop, and the names
// a training step records — ops at the dispatch table, modules by dotted path, backward,
// optimizer step, scaler update, data loading. Runs on the CPU: the hooks are swapped for a
// recorder, so no NVTX or GPU is needed.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/profiler.h"
#include "test_util.h"

namespace mt = mantissa;
namespace prof = mantissa::profiler;
using mantissa::test::Net;

namespace {

std::mutex g_mutex;
std::vector<std::string> g_names;  // every push, from any thread
int g_open = 0;                    // pushes minus pops

void record_push(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_names.emplace_back(name);
  ++g_open;
}
void record_pop() {
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_open;
}

// Installs the recorder and switches profiling on for the scope.
struct Recording {
  prof::Hooks prev;
  bool was_on;
  Recording() : prev(prof::set_hooks({record_push, record_pop})), was_on(prof::enabled()) {
    g_names.clear();
    g_open = 0;
    prof::set_enabled(true);
  }
  ~Recording() {
    prof::set_enabled(was_on);
    prof::set_hooks(prev);
  }
  static bool saw(const std::string& name) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return std::find(g_names.begin(), g_names.end(), name) != g_names.end();
  }
};

}  // namespace

TEST(Profiler, SwitchDecidesWhetherRangesArePushed) {
  Recording rec;
  prof::set_enabled(false);
  const prof::Counts before = prof::thread_counts();
  { prof::Range r("off"); }
  (mt::ones({4}) + mt::ones({4})).sum();
  EXPECT_EQ(prof::thread_counts().pushed, before.pushed);  // off: nothing recorded
  EXPECT_FALSE(Recording::saw("off"));

  prof::set_enabled(true);
  { prof::Range r("on"); }
  EXPECT_EQ(prof::thread_counts().pushed, before.pushed + 1);
  EXPECT_EQ(prof::thread_counts().popped, before.popped + 1);
  EXPECT_TRUE(Recording::saw("on"));

  // A range opened while on is closed even if profiling is switched off inside it.
  {
    prof::Range r("switched");
    prof::set_enabled(false);
  }
  EXPECT_EQ(g_open, 0);
}

TEST(Profiler, ModulePathsFollowRegistration) {
  Net net;
  EXPECT_EQ(net.path(), "");
  EXPECT_EQ(net.block.path(), "block");
  EXPECT_EQ(net.block.fc.path(), "block.fc");
  // Registering the model into an outer one renames the whole subtree.
  struct Outer : mt::nn::Module {
    Net net;
    Outer() { register_module("model", net); }
  } outer;
  EXPECT_EQ(outer.net.block.fc.path(), "model.block.fc");
}

TEST(Profiler, TrainingStepRecordsNamedBalancedRanges) {
  mt::manual_seed(3);
  Net net;
  mt::optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  mt::amp::GradScaler scaler({.init_scale = 256.0});
  auto data = std::make_shared<mt::data::TensorDataset>(mt::randn({8, 4}), mt::randint(0, 3, {8}));
  mt::data::DataLoader loader(data, {.batch_size = 4});

  Recording rec;
  const prof::Counts before = prof::thread_counts();
  int batches = 0;
  for (auto& batch : loader) {
    mt::Tensor loss = mt::nn::functional::cross_entropy(net(batch.data), batch.target);
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    ++batches;
  }
  EXPECT_EQ(batches, 2);
  const prof::Counts after = prof::thread_counts();
  EXPECT_GT(after.pushed, before.pushed + 20);
  EXPECT_EQ(after.pushed - before.pushed, after.popped - before.popped);  // balanced on this thread
  EXPECT_EQ(g_open, 0);                                           // and over all threads (the loader's worker included)
  for (const char* name : {"Net", "block", "block.fc", "head",    // modules by dotted path
                           "matmul", "relu", "cross_entropy",     // ops, at the dispatch table
                           "backward", "accumulate_grad",         // the engine and leaves
                           "AdamW.step", "fused_optimizer_step",  // optimizer
                           "GradScaler.update", "update_scale",   // loss scaling
                           "DataLoader.next"})                    // data loading
    EXPECT_TRUE(Recording::saw(name)) << name;
}
