// The fused optimizer step's launch planner (core/multi_tensor_plan.h), the host half of
// cuda/amp_step.cu, against a brute-force enumeration: every element of every tensor is
// updated exactly once, and each block sees its own tensor's pointers, step counter and
// numel. Sizes and pointers only: 10^9-element tensors need no memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "core/multi_tensor_plan.h"

namespace mtt = mantissa::multi_tensor;

namespace {

// Distinct fake addresses per tensor and buffer.
template <typename P>
P fake(size_t tensor, int buffer) {
  return reinterpret_cast<P>(uintptr_t(0x100000) * (tensor + 1) + uintptr_t(16) * uintptr_t(buffer + 1));
}

std::vector<mtt::TensorEntry> entries_for(const std::vector<int64_t>& numels) {
  std::vector<mtt::TensorEntry> es;
  for (size_t i = 0; i < numels.size(); ++i) {
    mtt::TensorEntry e;
    e.param = fake<void*>(i, 0);
    e.grad = fake<const void*>(i, 1);
    for (int k = 0; k < 3; ++k) e.state[k] = fake<void*>(i, 2 + k);
    e.working_copy = i % 3 == 0 ? nullptr : fake<void*>(i, 5);
    e.step = fake<const int64_t*>(i, 6);
    e.first_at_step = int64_t(i) + 7;
    e.numel = numels[i];
    es.push_back(e);
  }
  return es;
}

// Runs the plan the way the kernel reads it and checks coverage and pointers.
void check_plan(const std::vector<int64_t>& numels, int max_tensors, int max_blocks, int64_t chunk) {
  SCOPED_TRACE(::testing::Message() << numels.size() << " tensors, limits " << max_tensors << "/" << max_blocks << "/"
                                    << chunk);
  const std::vector<mtt::TensorEntry> es = entries_for(numels);
  std::map<const void*, size_t> by_param;
  for (size_t i = 0; i < es.size(); ++i) by_param[es[i].param] = i;
  const std::vector<mtt::Launch> plan = mtt::plan_launches(es, max_tensors, max_blocks, chunk);

  std::vector<std::vector<std::pair<int64_t, int64_t>>> covered(es.size());
  for (size_t l = 0; l < plan.size(); ++l) {
    const mtt::Launch& launch = plan[l];
    ASSERT_GE(launch.blocks, 1);
    ASSERT_LE(launch.blocks, max_blocks);
    ASSERT_GE(launch.tensors, 1);
    ASSERT_LE(launch.tensors, max_tensors);
    std::vector<bool> slot_used(size_t(launch.tensors), false);
    for (int b = 0; b < launch.blocks; ++b) {
      const int slot = launch.list.block_tensor[b];
      ASSERT_LT(slot, launch.tensors) << "launch " << l << " block " << b;
      slot_used[size_t(slot)] = true;
      auto it = by_param.find(launch.list.param[slot]);
      ASSERT_NE(it, by_param.end()) << "launch " << l << " block " << b << " slot " << slot << " has no tensor";
      const size_t i = it->second;
      const mtt::TensorEntry& e = es[i];
      ASSERT_EQ(launch.list.grad[slot], e.grad);
      for (int k = 0; k < 3; ++k) ASSERT_EQ(launch.list.state[k][slot], e.state[k]);
      ASSERT_EQ(launch.list.working_copy[slot], e.working_copy);
      ASSERT_EQ(launch.list.step[slot], e.step);
      ASSERT_EQ(launch.list.first_at_step[slot], e.first_at_step);
      ASSERT_EQ(launch.list.numel[slot], e.numel);
      int64_t begin = 0, end = 0;
      mtt::chunk_range(launch.list, b, chunk, begin, end);
      ASSERT_LT(begin, end);
      covered[i].emplace_back(begin, end);
    }
    for (int s = 0; s < launch.tensors; ++s) EXPECT_TRUE(slot_used[size_t(s)]) << "launch " << l << " slot " << s;
  }
  for (size_t i = 0; i < es.size(); ++i) {
    std::vector<std::pair<int64_t, int64_t>>& c = covered[i];
    std::sort(c.begin(), c.end());
    int64_t next = 0;
    for (const auto& [begin, end] : c) {
      ASSERT_EQ(begin, next) << "tensor " << i << " of " << numels[i] << " elements: gap or overlap";
      next = end;
    }
    ASSERT_EQ(next, std::max<int64_t>(numels[i], 0)) << "tensor " << i;
  }
}

// Log-uniform sizes in [1, max_numel], with some empty tensors.
std::vector<int64_t> random_sizes(std::mt19937_64& rng, size_t count, double max_numel) {
  std::uniform_real_distribution<double> u(0.0, std::log(max_numel));
  std::vector<int64_t> n(count);
  for (int64_t& x : n) x = rng() % 17 == 0 ? 0 : std::max<int64_t>(1, int64_t(std::exp(u(rng))));
  return n;
}

}  // namespace

TEST(LaunchPlan, OneLargeParameterAfterManySmallOnes) {
  // The crash of the old carry: a tensor not first in its list spanning three or more launches.
  std::vector<int64_t> n(25, 1000);
  n.push_back(48'000'000);
  check_plan(n, mtt::kMaxTensors, mtt::kMaxBlocks, mtt::kChunk);
  n.push_back(21'000'000);
  n.push_back(5);
  check_plan(n, mtt::kMaxTensors, mtt::kMaxBlocks, mtt::kChunk);
}

TEST(LaunchPlan, ExactBoundaries) {
  const int64_t c = mtt::kChunk, launch = c * mtt::kMaxBlocks;
  for (int64_t n : {int64_t(1), c - 1, c, c + 1, launch - 1, launch, launch + 1, 3 * launch, 3 * launch + 1})
    check_plan({7, n, 3, n}, mtt::kMaxTensors, mtt::kMaxBlocks, c);
  check_plan(std::vector<int64_t>(mtt::kMaxTensors, c), mtt::kMaxTensors, mtt::kMaxBlocks, c);
  check_plan(std::vector<int64_t>(mtt::kMaxTensors + 1, 1), mtt::kMaxTensors, mtt::kMaxBlocks, c);
  check_plan(std::vector<int64_t>(mtt::kMaxBlocks + 1, 1), mtt::kMaxTensors, mtt::kMaxBlocks, c);
  check_plan({}, mtt::kMaxTensors, mtt::kMaxBlocks, c);
  check_plan({0, 0}, mtt::kMaxTensors, mtt::kMaxBlocks, c);
  EXPECT_TRUE(mtt::plan_launches(entries_for({0, 0})).empty());
}

TEST(LaunchPlan, RandomListsUpToABillionElements) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t count = 1 + rng() % 100;
    check_plan(random_sizes(rng, count, 1e9), mtt::kMaxTensors, mtt::kMaxBlocks, mtt::kChunk);
  }
  // One list of 1e9-element tensors and its reverse order.
  std::vector<int64_t> big = {1'000'000'000, 1, 999'999'937, 65'537, 1'000'000'000};
  check_plan(big, mtt::kMaxTensors, mtt::kMaxBlocks, mtt::kChunk);
  std::reverse(big.begin(), big.end());
  check_plan(big, mtt::kMaxTensors, mtt::kMaxBlocks, mtt::kChunk);
}

TEST(LaunchPlan, RandomListsWithSmallLimits) {
  // Small limits make every carry pattern (many carries of one tensor, carries at a full
  // tensor list, tensors of exactly one launch) frequent.
  std::mt19937_64 rng(777);
  for (int trial = 0; trial < 400; ++trial) {
    const int max_tensors = 1 + int(rng() % mtt::kMaxTensors);
    const int max_blocks = 1 + int(rng() % 12);
    const int64_t chunk = 1 + int64_t(rng() % 9);
    const size_t count = 1 + rng() % 100;
    std::vector<int64_t> n = random_sizes(rng, count, 400);
    std::shuffle(n.begin(), n.end(), rng);
    check_plan(n, max_tensors, max_blocks, chunk);
  }
}

TEST(LaunchPlan, StepCountersEachOnce) {
  for (size_t count : {size_t(0), size_t(1), size_t(255), size_t(256), size_t(257), size_t(1000)}) {
    std::vector<int64_t*> steps;
    for (size_t i = 0; i < count; ++i) steps.push_back(fake<int64_t*>(i, 6));
    std::vector<int64_t*> seen;
    for (const mtt::StepList& l : mtt::plan_step_lists(steps)) {
      ASSERT_GE(l.count, 1);
      ASSERT_LE(l.count, mtt::kMaxSteps);
      seen.insert(seen.end(), l.step, l.step + l.count);
    }
    EXPECT_EQ(seen, steps) << count << " counters";
  }
}

TEST(LaunchPlan, RejectsBadLimits) {
  EXPECT_THROW(mtt::plan_launches({}, 0), mantissa::Error);
  EXPECT_THROW(mtt::plan_launches({}, mtt::kMaxTensors + 1), mantissa::Error);
  EXPECT_THROW(mtt::plan_launches({}, 1, mtt::kMaxBlocks + 1), mantissa::Error);
}
