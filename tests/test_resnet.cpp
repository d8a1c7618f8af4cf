// The CIFAR ResNet and its parts: BasicBlock / CifarResNet against PyTorch
// (tests/fixtures/reference_resnet.json from tools/gen_reference_resnet.py), batch norm
// under autocast and in eval mode, folding batch norm into a conv, and the weight-decay
// parameter groups.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
using json = nlohmann::json;

namespace {

const json& ref(const std::string& key) {
  static const json j = [] {
    std::ifstream f(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_resnet.json");
    EXPECT_TRUE(f.good()) << "missing tests/fixtures/reference_resnet.json (run tools/gen_reference_resnet.py)";
    return json::parse(f);
  }();
  return j.at(key);
}

mt::Tensor tensor(const json& t, mt::DType dtype) {
  return mt::from_vector(t.at("data").get<std::vector<double>>(), t.at("shape").get<mt::Shape>(), {.dtype = dtype});
}

using mantissa::test::expect_close_to_reference;

// The generator's pattern: element i of the k-th state-dict tensor, in [-0.5, 0.5).
std::vector<double> pattern(int64_t n, int64_t k) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 37 + k * 11) % 23) / 23.0 - 0.5;
  return v;
}

// Fills the model's state exactly as tools/gen_reference_resnet.py fill() does.
void fill(nn::Module& model) {
  mt::NoGradGuard no_grad;
  int64_t k = 0;
  auto ends_with = [](const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
  };
  for (const auto& [name, t] : model.state_dict()) {
    if (ends_with(name, "num_batches_tracked")) continue;
    std::vector<double> v = pattern(t.numel(), k++);
    for (double& e : v) {
      if (ends_with(name, "running_mean"))
        e = 0.1 * e;
      else if (ends_with(name, "running_var"))
        e = 1.0 + 0.5 * (e + 0.5);
      else if (t.dim() >= 2)
        e = 0.3 * e;
      else if (ends_with(name, "weight"))
        e = 1.0 + 0.2 * e;
      else
        e = 0.1 * e;
    }
    mt::Tensor(t).copy_(mt::from_vector(v, t.sizes(), {.dtype = t.dtype()}));
  }
}

double max_abs_diff(const mt::Tensor& a, const mt::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST(CifarResNet, ParameterCountsMatchPyTorch) {
  for (int64_t depth : {8, 20, 32, 44, 56, 110})
    for (int64_t classes : {10, 100}) {
      nn::CifarResNet net(depth, {.num_classes = classes});
      EXPECT_EQ(net.num_parameters(), ref("num_parameters").at(std::to_string(depth) + "_" + std::to_string(classes)))
          << "depth " << depth << ", " << classes << " classes";
    }
  nn::CifarResNet net(20);
  EXPECT_EQ(net.num_parameters(), 272474);  // 0.27 M, as in He et al. (plus the 1x1 projections)
  EXPECT_EQ(net.blocks_per_stage, 3);
  // Two projection shortcuts (entering stages 2 and 3); every other block is an identity.
  EXPECT_EQ(net.layer2.at<nn::BasicBlock>(0).shortcut != nullptr, true);
  EXPECT_EQ(net.layer3.at<nn::BasicBlock>(0).shortcut != nullptr, true);
  EXPECT_EQ(net.layer1.at<nn::BasicBlock>(0).shortcut, nullptr);
  EXPECT_EQ(net.layer2.at<nn::BasicBlock>(1).shortcut, nullptr);
}

TEST(CifarResNet, StateDictNamesMatchPyTorch) {
  nn::CifarResNet net(8);
  std::vector<std::string> names;
  for (const auto& [name, t] : net.state_dict())
    if (name.find("num_batches_tracked") == std::string::npos) names.push_back(name);
  EXPECT_EQ(names, ref("state_dict_order").get<std::vector<std::string>>());
}

TEST(CifarResNet, MatchesPyTorchInTrainAndEvalMode) {
  nn::CifarResNet net(8);
  net.to(mt::kFloat64);
  fill(net);
  mt::Tensor x = tensor(ref("x"), mt::kFloat64), gy = tensor(ref("gy"), mt::kFloat64);
  mt::Tensor logits = net(x);
  expect_close_to_reference(logits, ref("train_logits"), 1e-9, "train logits");
  (logits * gy).sum().backward();
  expect_close_to_reference(net.conv1.weight.grad(), ref("grad_conv1_weight"), 1e-8, "conv1.weight grad");
  expect_close_to_reference(net.fc.weight.grad(), ref("grad_fc_weight"), 1e-8, "fc.weight grad");
  expect_close_to_reference(net.bn1.running_mean, ref("bn1_running_mean"), 1e-9, "bn1.running_mean");
  expect_close_to_reference(net.layer3.at<nn::BasicBlock>(0).shortcut->at<nn::BatchNorm2d>(1).running_var,
                            ref("layer3_0_shortcut_1_running_var"), 1e-9, "layer3.0.shortcut.1.running_var");
  net.eval();
  mt::NoGradGuard no_grad;
  expect_close_to_reference(net(x), ref("eval_logits"), 1e-9, "eval logits");
}

TEST(CifarResNet, RejectsBadConfigurationsAndInputs) {
  for (int64_t depth : {0, 2, 19, 21}) {
    try {
      nn::CifarResNet net(depth);
      ADD_FAILURE() << "depth " << depth << " accepted";
    } catch (const mt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("6n + 2"), std::string::npos) << e.what();
    }
  }
  nn::CifarResNet net(8);
  try {
    net(mt::zeros({2, 1, 32, 32}));
    ADD_FAILURE() << "a 1-channel input was accepted";
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 1, 32, 32]"), std::string::npos) << e.what();
  }
}

// A block a user takes into their own model: shapes, and the projection only where needed.
TEST(BasicBlock, ShapesAndShortcut) {
  mt::manual_seed(0);
  nn::BasicBlock same(8, 8), down(8, 16, 2);
  EXPECT_EQ(same.shortcut, nullptr);
  ASSERT_NE(down.shortcut, nullptr);
  EXPECT_EQ(down.shortcut->at<nn::Conv2d>(0).weight.sizes(), (mt::Shape{16, 8, 1, 1}));
  mt::Tensor x = mt::randn({2, 8, 6, 6});
  EXPECT_EQ(same(x).sizes(), (mt::Shape{2, 8, 6, 6}));
  EXPECT_EQ(down(x).sizes(), (mt::Shape{2, 16, 3, 3}));
  EXPECT_GE(down(x).min().item<float>(), 0.0f);  // ends in a ReLU
}

// Under autocast the convs run in fp16/bf16 and batch norm keeps their dtype (as PyTorch
// does), but computes its statistics and keeps its running estimates in fp32; its parameters
// stay fp32 and get fp32 gradients.
TEST(BatchNormAmp, StatisticsAndRunningEstimatesStayFp32) {
  mt::manual_seed(1);
  for (mt::DType low : {mt::kHalf, mt::kBFloat16}) {
    nn::Conv2d conv(3, 4, 3, {.padding = 1});
    nn::BatchNorm2d bn(4);
    mt::Tensor x = mt::randn({4, 3, 5, 5}) * 3.0 + 1.0;
    mt::Tensor h, y;
    {
      mt::amp::Autocast ac(low);
      h = conv(x);
      y = bn(h);
    }
    EXPECT_EQ(h.dtype(), low);
    EXPECT_EQ(y.dtype(), low);
    EXPECT_EQ(bn.running_mean.dtype(), mt::kFloat32);
    EXPECT_EQ(bn.running_var.dtype(), mt::kFloat32);
    // The same statistics as fp32 batch norm of the (rounded) low-precision activations.
    mt::Tensor h32 = h.to(mt::kFloat32).detach();
    mt::Tensor mean = h32.mean({0, 2, 3});
    mt::Tensor var_unbiased = ((h32 - mean.reshape({1, 4, 1, 1})).pow(2)).sum({0, 2, 3}) / double(4 * 25 - 1);
    EXPECT_LT(max_abs_diff(bn.running_mean, mean * 0.1), 1e-6);
    EXPECT_LT(max_abs_diff(bn.running_var, var_unbiased * 0.1 + 0.9), 1e-5);
    // The output is the fp32 result rounded once (|y| < 4 here: half an ulp is 2^-10 in fp16,
    // 2^-7 in bf16).
    nn::BatchNorm2d ref_bn(4);
    mt::Tensor ref = ref_bn(h32);
    const double tol = low == mt::kHalf ? 1.0 / 1024 : 1.0 / 128;
    EXPECT_LT(max_abs_diff(y.to(mt::kFloat32), ref), tol);
    // Gradients of the fp32 parameters are fp32 and match fp32 batch norm given the same
    // (rounded) upstream gradient.
    mt::Tensor gy = mt::randn(y.sizes()).to(low).to(mt::kFloat32);  // exact in both dtypes
    (y.to(mt::kFloat32) * gy).sum().backward();
    (ref * gy).sum().backward();
    ASSERT_EQ(bn.weight.grad().dtype(), mt::kFloat32);
    EXPECT_LT(max_abs_diff(bn.weight.grad(), ref_bn.weight.grad()), 1e-4);
    EXPECT_LT(max_abs_diff(bn.bias.grad(), ref_bn.bias.grad()), 1e-4);
  }
}

// Eval mode normalizes with the running estimates, so each image's output does not depend
// on the rest of the batch.
TEST(BatchNormAmp, EvalUsesRunningEstimates) {
  mt::manual_seed(2);
  nn::BatchNorm2d bn(3);
  mt::Tensor(bn.running_mean).copy_(mt::tensor({0.5f, -1.0f, 2.0f}));
  mt::Tensor(bn.running_var).copy_(mt::tensor({4.0f, 0.25f, 1.0f}));
  mt::Tensor(bn.weight).detach().copy_(mt::tensor({2.0f, 1.0f, 0.5f}));
  mt::Tensor(bn.bias).detach().copy_(mt::tensor({0.0f, 1.0f, -1.0f}));
  bn.eval();
  mt::Tensor x = mt::randn({5, 3, 2, 2});
  mt::Tensor y;
  {
    mt::amp::Autocast ac(mt::kHalf);
    y = bn(x);
  }
  mt::Tensor rm = bn.running_mean.reshape({1, 3, 1, 1}), rv = bn.running_var.reshape({1, 3, 1, 1});
  mt::Tensor want =
      (x - rm) / (rv + 1e-5).sqrt() * bn.weight.detach().reshape({1, 3, 1, 1}) + bn.bias.detach().reshape({1, 3, 1, 1});
  EXPECT_LT(max_abs_diff(y, want), 1e-5);
  EXPECT_LT(max_abs_diff(bn(x.narrow(0, 2, 1)), want.narrow(0, 2, 1)), 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);  // eval never updates the estimates
  EXPECT_FLOAT_EQ(bn.running_mean.to_vector<float>()[2], 2.0f);
}

TEST(FuseConvBn, MatchesConvThenEvalBatchNorm) {
  mt::manual_seed(3);
  for (bool conv_bias : {false, true})
    for (bool affine : {true, false}) {
      nn::Conv2d conv(3, 6, 3, {.stride = 2, .padding = 1, .bias = conv_bias});
      nn::BatchNorm2d bn(6, {.affine = affine});
      bn(conv(mt::randn({8, 3, 9, 9}) * 2.0 + 0.5));  // running estimates away from 0 / 1
      if (affine) {
        mt::NoGradGuard g;
        mt::Tensor(bn.weight).copy_(mt::rand({6}) + 0.5);
        mt::Tensor(bn.bias).copy_(mt::randn({6}));
      }
      bn.eval();
      nn::Conv2d fused = nn::fuse_conv_bn(conv, bn);
      mt::Tensor x = mt::randn({2, 3, 9, 9});
      mt::NoGradGuard no_grad;
      EXPECT_LT(max_abs_diff(fused(x), bn(conv(x))), 1e-5) << "conv bias " << conv_bias << ", affine " << affine;
      EXPECT_EQ(fused.options.stride, conv.options.stride);
    }
  nn::Conv2d conv(3, 4, 3);
  nn::BatchNorm2d wrong(5), untracked(4, {.track_running_stats = false});
  EXPECT_THROW(nn::fuse_conv_bn(conv, wrong), mt::Error);
  EXPECT_THROW(nn::fuse_conv_bn(conv, untracked), mt::Error);
}

// Weight decay on conv / linear weights only; Nesterov SGD over the two groups.
TEST(WeightDecayGroups, SkipBatchNormAndBiases) {
  nn::CifarResNet net(20);
  auto groups = mt::optim::weight_decay_groups(net.named_parameters(), 5e-4);
  ASSERT_EQ(groups.size(), 2u);
  // 19 convs + 2 projection convs + the classifier weight; 19 + 2 BNs (weight, bias) + the classifier bias.
  EXPECT_EQ(groups[0].params.size(), 22u);
  EXPECT_EQ(groups[1].params.size(), 43u);
  EXPECT_EQ(*groups[0].weight_decay, 5e-4);
  EXPECT_EQ(*groups[1].weight_decay, 0.0);
  mt::optim::SGD opt(groups, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
  // Zero gradients: only the decay moves a parameter (w -= lr * (1 + momentum) * wd * w on the first step).
  for (const mt::Tensor& p : net.parameters()) p.set_grad(mt::zeros_like(p));
  mt::Tensor conv_before = net.conv1.weight.detach().clone();
  mt::Tensor bn_before = net.bn1.weight.detach().clone(), fc_bias_before = net.fc.bias.detach().clone();
  opt.step();
  EXPECT_LT(max_abs_diff(net.conv1.weight.detach(), conv_before * (1 - 0.1 * 1.9 * 5e-4)), 1e-7);
  EXPECT_EQ(max_abs_diff(net.bn1.weight.detach(), bn_before), 0.0);
  EXPECT_EQ(max_abs_diff(net.fc.bias.detach(), fc_bias_before), 0.0);
}
