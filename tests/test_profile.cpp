// The built-in profiler (core/profile.h): what a Profile records for a small model, the
// Chrome trace it exports (valid JSON, nested per thread, the expected names), op counts
// against the ops the model calls, FLOPs, the summary tables, and a clean close when an
// exception crosses an active profile.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/profile.h"
#include "gpu_test.h"
#include "test_util.h"

namespace mt = mantissa;
namespace prof = mantissa::profiler;
using mantissa::test::Net;
using nlohmann::json;

namespace {

int64_t count(const prof::Profile& p, const std::string& name, prof::Kind kind) {
  const auto& ev = p.events();
  return std::count_if(ev.begin(), ev.end(), [&](const prof::Event& e) { return e.name == name && e.kind == kind; });
}

// Checks that the "X" events of each thread nest: every event lies inside the one open
// around it, and returns the names of the complete events.
std::vector<std::string> check_nested(const json& trace) {
  std::map<int, std::vector<std::pair<double, double>>> open;  // per tid: (start, end) stack
  std::vector<std::string> names;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts").get<double>(), end = ts + e.at("dur").get<double>();
    auto& stack = open[e.at("tid").get<int>()];
    while (!stack.empty() && stack.back().second <= ts && !(stack.back().first == ts && end <= stack.back().second))
      stack.pop_back();
    if (!stack.empty()) {
      EXPECT_GE(ts, stack.back().first) << e.dump();
      EXPECT_LE(end, stack.back().second + 1e-9) << e.dump();
    }
    stack.emplace_back(ts, end);
    names.push_back(e.at("name").get<std::string>());
  }
  return names;
}

}  // namespace

TEST(Profile, RecordsOpsModulesAndCountsOfAForward) {
  mt::manual_seed(1);
  Net net;
  mt::NoGradGuard no_grad;
  const mt::Tensor x = mt::randn({8, 4});
  net(x);  // warm-up outside the profile
  prof::Profile p;
  EXPECT_TRUE(prof::enabled());
  for (int i = 0; i < 3; ++i) {
    net(x);
    p.step();
  }
  p.stop();
  EXPECT_EQ(p.steps(), 3);
  // Per forward: two linears (one matmul each, bias in the epilogue) and one relu.
  EXPECT_EQ(count(p, "matmul", prof::Kind::Op), 6);
  EXPECT_EQ(count(p, "relu", prof::Kind::Op), 3);
  EXPECT_EQ(count(p, "Net", prof::Kind::Module), 3);
  EXPECT_EQ(count(p, "block.fc", prof::Kind::Module), 3);
  EXPECT_EQ(count(p, "head", prof::Kind::Module), 3);

  for (const prof::Event& e : p.events()) {
    EXPECT_FALSE(e.truncated);
    EXPECT_LE(e.start_ns, e.end_ns);
    if (e.name != "matmul") continue;
    // block.fc: x [8, 4] @ W^T [4, 6]; head: [8, 6] @ [6, 3] — 2 M N K FLOPs each.
    const auto& parent = p.events()[size_t(e.parent)];
    EXPECT_EQ(parent.kind, prof::Kind::Module);
    EXPECT_EQ(e.phase, prof::Phase::Forward);
    EXPECT_EQ(e.op.compute, mt::kFloat32);
    EXPECT_TRUE(e.op.device.is_cpu());
    ASSERT_GE(e.op.tensors.size(), 4u);
    EXPECT_EQ(e.op.tensors[0].shape.back(), e.op.gemm_k);
    if (parent.name == "block.fc") {
      EXPECT_GE(e.alloc_bytes, 8 * 6 * 4);  // its output, allocated just before the kernel
      EXPECT_EQ(e.op.flops, 2.0 * 8 * 6 * 4);
      EXPECT_EQ(e.op.gemm_m, 8);
      EXPECT_EQ(e.op.gemm_n, 6);
      EXPECT_EQ(e.op.gemm_k, 4);
    } else {
      EXPECT_EQ(parent.name, "head");
      EXPECT_EQ(e.op.flops, 2.0 * 8 * 3 * 6);
    }
  }
  const std::vector<prof::OpStats> stats = p.op_stats();
  ASSERT_FALSE(stats.empty());
  for (size_t i = 1; i < stats.size(); ++i) EXPECT_GE(stats[i - 1].total_ms, stats[i].total_ms);
  const auto mm = std::find_if(stats.begin(), stats.end(), [](const prof::OpStats& s) { return s.name == "matmul"; });
  ASSERT_NE(mm, stats.end());
  EXPECT_EQ(mm->calls, 6);
  EXPECT_EQ(mm->flops, 3 * (2.0 * 8 * 6 * 4 + 2.0 * 8 * 3 * 6));
  EXPECT_EQ(mm->dtypes, "float32");
  const std::string table = p.summary_table();
  EXPECT_NE(table.find("matmul"), std::string::npos);
  EXPECT_NE(table.find("GFLOP/s"), std::string::npos);
  EXPECT_NE(p.module_table().find("block.fc"), std::string::npos);
  EXPECT_NE(p.phase_table().find("forward"), std::string::npos);
}

TEST(Profile, ChromeTraceOfATrainingStepIsValidNestedJson) {
  mt::manual_seed(2);
  Net net;
  mt::optim::AdamW opt(net.parameters(), {.lr = 1e-3});
  mt::amp::GradScaler scaler({.init_scale = 256.0});
  auto data = std::make_shared<mt::data::TensorDataset>(mt::randn({8, 4}), mt::randint(0, 3, {8}));
  mt::data::DataLoader loader(data, {.batch_size = 4});
  prof::Profile p;
  for (auto& batch : loader) {
    mt::Tensor loss = mt::nn::functional::cross_entropy(net(batch.data), batch.target);
    opt.zero_grad();
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    p.step();
  }
  p.stop();
  const json trace = json::parse(p.chrome_trace());  // throws on invalid JSON
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  const std::vector<std::string> names = check_nested(trace);
  for (const char* name :
       {"Net", "block.fc", "head", "matmul", "relu", "cross_entropy", "backward", "LinearBackward", "accumulate_grad",
        "AdamW.step", "fused_optimizer_step", "GradScaler.update", "update_scale", "DataLoader.next"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  // Ops carry their metadata; the phases follow the outermost range.
  std::map<std::string, int> phases;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    phases[e.at("args").at("phase").get<std::string>()]++;
    if (e.at("cat") == "op") {
      EXPECT_TRUE(e.at("args").contains("shapes"));
      EXPECT_TRUE(e.at("args").contains("compute_dtype"));
      if (e.at("name") == "matmul") {
        EXPECT_GT(e.at("args").at("flops").get<double>(), 0);
      }
    }
    if (e.at("name") == "LinearBackward") {
      EXPECT_EQ(e.at("cat"), "backward");
    }
  }
  for (const char* phase : {"forward", "backward", "optimizer", "scaler", "data"}) EXPECT_GT(phases[phase], 0) << phase;
  EXPECT_EQ(p.steps(), 2);
}

TEST(Profile, ExceptionAcrossAnActiveProfileClosesItCleanly) {
  Net net;
  const prof::Counts before = prof::thread_counts();
  {
    prof::Profile p;
    // A shape error thrown inside a module range and an op: both ranges unwind.
    EXPECT_THROW(net(mt::randn({2, 5})), mt::Error);
    p.stop();
    for (const prof::Event& e : p.events()) EXPECT_FALSE(e.truncated) << e.name;
    EXPECT_GE(p.events().size(), 2u);  // Net, block, block.fc at least
    EXPECT_TRUE(json::accept(p.chrome_trace()));
  }
  // The Profile itself destroyed by an exception: recording stops, the switch is restored.
  try {
    prof::Profile p;
    net(mt::randn({2, 4}));
    throw std::runtime_error("interrupted");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(prof::enabled());
  const prof::Counts after = prof::thread_counts();
  EXPECT_EQ(after.pushed - before.pushed, after.popped - before.popped);
  // A range still open when stop() runs is closed there and marked.
  prof::Profile p;
  {
    prof::Range outer("outer");
    net(mt::randn({2, 4}));
    p.stop();
  }
  ASSERT_FALSE(p.events().empty());
  EXPECT_EQ(p.events()[0].name, "outer");
  EXPECT_TRUE(p.events()[0].truncated);
  EXPECT_LE(p.events()[0].end_ns, int64_t(p.wall_ms() * 1e6) + 1);
  EXPECT_TRUE(json::accept(p.chrome_trace()));
}

TEST(Profile, OneAtATimeAndReadersNeedAStoppedProfile) {
  prof::Profile p;
  EXPECT_THROW(prof::Profile second, mt::Error);
  EXPECT_THROW((void)p.events(), mt::Error);
  p.stop();
  EXPECT_FALSE(prof::enabled());
  EXPECT_NO_THROW(prof::Profile again);  // the first one is done
  EXPECT_THROW(p.write_chrome_trace("/nonexistent-dir/trace.json"), mt::Error);
}

TEST(Profile, PhasesLookThroughATrainStepRange) {
  Net net;
  const mt::Tensor x = mt::randn({2, 4});
  prof::Profile p;
  {
    prof::Range step("train_step");
    { prof::Range data("data"); }
    net(x);
  }
  p.stop();
  for (const prof::Event& e : p.events()) {
    if (e.name == "Net" || e.name == "matmul") {
      EXPECT_EQ(e.phase, prof::Phase::Forward) << e.name;
    }
    if (e.name == "data") {
      EXPECT_EQ(e.phase, prof::Phase::Data);
    }
  }
  const auto phases = p.phase_ms();
  EXPECT_EQ(phases.count(prof::Phase::Forward), 1u);
  EXPECT_EQ(phases.count(prof::Phase::Data), 1u);
  EXPECT_EQ(phases.count(prof::Phase::Other), 0u);  // the step range itself is not a phase
}

// The device time of GPU ops comes from CUDA event pairs, resolved at stop() (no sync per op).
TEST(ProfileGpu, OpsOnAGpuGetDeviceTime) {
  REQUIRE_GPU();
  const mt::Device gpu = mt::Device::cuda(0);
  mt::Tensor a = mt::randn({512, 512}).to(gpu), b = mt::randn({512, 512}).to(gpu);
  prof::Profile p;
  mt::Tensor c = mt::matmul(a, b);
  p.stop();
  int matmuls = 0;
  for (const prof::Event& e : p.events())
    if (e.kind == prof::Kind::Op && e.name == "matmul") {
      ++matmuls;
      EXPECT_GT(e.gpu_ms, 0) << "a 512x512 GEMM on the GPU recorded no device time";
    }
  EXPECT_EQ(matmuls, 1);
  EXPECT_EQ(c.device(), gpu);
}
