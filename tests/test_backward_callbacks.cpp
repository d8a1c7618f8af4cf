// autograd::register_post_accumulate_grad_hook and autograd::queue_callback: what
// DistributedDataParallel builds its gradient buckets on.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <string>
#include <vector>

namespace mt = mantissa;
namespace ag = mantissa::autograd;

TEST(PostAccumulateHook, SeesTheAccumulatedGradientOncePerBackward) {
  mt::Tensor w = mt::from_vector<float>({1, 2}, {2}).requires_grad_();
  std::vector<std::vector<float>> seen;
  ag::register_post_accumulate_grad_hook(
      w, [&](const mt::Tensor& leaf) { seen.push_back(leaf.grad().to_vector<float>()); });
  // w is used twice: the engine sums both uses before accumulating, so the hook runs once.
  ((w * 3.0f).sum() + (w * w).sum()).backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<float>{5, 7}));  // 3 + 2w
  (w * 1.0f).sum().backward();                     // accumulates into .grad
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<float>{6, 8}));
}

TEST(PostAccumulateHook, RejectsNonLeavesAndTensorsWithoutGrad) {
  mt::Tensor w = mt::ones({2}).requires_grad_();
  EXPECT_THROW(ag::register_post_accumulate_grad_hook(w * 2.0f, [](const mt::Tensor&) {}), mt::Error);
  EXPECT_THROW(ag::register_post_accumulate_grad_hook(mt::ones({2}), [](const mt::Tensor&) {}), mt::Error);
}

TEST(QueueCallback, RunsAfterEveryGradientOfTheGraph) {
  mt::Tensor a = mt::ones({3}).requires_grad_(), b = mt::ones({3}).requires_grad_();
  std::vector<std::string> log;
  bool queued = false;
  auto hook = [&](const char* name) {
    return [&, name](const mt::Tensor&) {
      log.push_back(name);
      if (!queued) {
        queued = true;
        ag::queue_callback([&] {
          log.push_back("end");
          ag::queue_callback([&] { log.push_back("chained"); });  // a callback may queue another
        });
      }
    };
  };
  ag::register_post_accumulate_grad_hook(a, hook("a"));
  ag::register_post_accumulate_grad_hook(b, hook("b"));
  ((a * 2.0f) * (b + 1.0f)).sum().backward();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[2], "end");
  EXPECT_EQ(log[3], "chained");
  // Callbacks are per backward pass: none is left for the next.
  log.clear();
  queued = true;
  (a * 1.0f).sum().backward();
  EXPECT_EQ(log, (std::vector<std::string>{"a"}));
}

TEST(QueueCallback, OutsideBackwardIsAnError) {
  EXPECT_THROW(ag::queue_callback([] {}), mt::Error);
}
