// The fused-step and scale-update contracts of core/backend.h, called directly on the CPU
// row: the same contract the CUDA row implements (tests/test_cuda_amp.cpp compares the two
// on a GPU). A set found_inf leaves everything, step counts included, untouched; the step
// count advances otherwise; SGD's momentum buffer starts as the gradient at first_at_step.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <vector>

#include "core/backend.h"

namespace mt = mantissa;

namespace {

mt::FusedStepArgs sgd_args(const mt::Tensor& w, const mt::Tensor& g, const mt::Tensor& buf, const mt::Tensor& step,
                           int64_t first_at_step) {
  mt::FusedStepArgs a;
  a.hyper.kind = mt::math::OptimizerKind::Sgd;
  a.hyper.lr = 0.5;
  a.hyper.momentum = 0.9;
  a.num_state = 1;
  mt::FusedStepTensor t;
  t.param = w;
  t.grad = g;
  t.state[0] = buf;
  t.step = step;
  t.first_at_step = first_at_step;
  a.tensors.push_back(t);
  return a;
}

}  // namespace

TEST(FusedStepContract, FoundInfMakesTheStepANoOp) {
  mt::Tensor w = mt::ones({4}), g = mt::full({4}, 2.0f), buf = mt::zeros({4});
  mt::Tensor step = mt::zeros({1}, {.dtype = mt::kInt64});
  mt::FusedStepArgs a = sgd_args(w, g, buf, step, 1);
  a.found_inf = mt::ones({1});
  mt::cpu_backend().fused_optimizer_step(a);
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(buf.to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(step.item<int64_t>(), 0);

  // Clear: the first step initialises the buffer with g (2), w = 1 - 0.5 * 2.
  a.found_inf = mt::zeros({1});
  mt::cpu_backend().fused_optimizer_step(a);
  EXPECT_EQ(step.item<int64_t>(), 1);
  EXPECT_EQ(buf.to_vector<float>(), std::vector<float>(4, 2.0f));
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(4, 0.0f));
  // Second step: buf = 0.9 * 2 + 2 = 3.8, w = 0 - 0.5 * 3.8.
  mt::cpu_backend().fused_optimizer_step(a);
  EXPECT_EQ(step.item<int64_t>(), 2);
  EXPECT_FLOAT_EQ(w.to_vector<float>()[0], -1.9f);
}

TEST(FusedStepContract, ScaleDividesTheGradient) {
  mt::Tensor w = mt::ones({2}), g = mt::full({2}, 1024.0f), buf = mt::zeros({2});
  mt::Tensor step = mt::zeros({1}, {.dtype = mt::kInt64});
  mt::FusedStepArgs a = sgd_args(w, g, buf, step, 1);
  a.scale = mt::full({1}, 512.0f);
  mt::cpu_backend().fused_optimizer_step(a);
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(2, 0.0f));  // 1 - 0.5 * (1024 / 512)
}

TEST(FusedStepContract, UpdateScaleIsTheScalersStateMachine) {
  mt::Tensor scale = mt::full({1}, 8.0f), counters = mt::zeros({3}, {.dtype = mt::kInt32});
  mt::Tensor flag = mt::zeros({1});
  const mt::math::ScaleUpdate rule{2.0f, 0.5f, 1.0f, 2, 1, true, true};
  mt::cpu_backend().update_scale(scale, counters, flag, rule);  // clean: tracker 1
  mt::cpu_backend().update_scale(scale, counters, flag, rule);  // clean: grows
  EXPECT_EQ(scale.item<float>(), 16.0f);
  flag.fill_(1.0f);
  mt::cpu_backend().update_scale(scale, counters, flag, rule);  // overflow: backs off, counts a skip
  EXPECT_EQ(scale.item<float>(), 8.0f);
  EXPECT_EQ(counters.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(flag.item<float>(), 0.0f);  // cleared
}
