// nn::Module (registration, names, ownership, state dicts, modes, placement, printing),
// the layers, and PyTorch-matching default initialization statistics.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <sstream>

namespace mt = mantissa;
namespace nn = mt::nn;
namespace F = mt::nn::functional;

namespace {

struct Net : nn::Module {
  nn::Linear fc1{4, 3}, fc2{3, 2};
  Net() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return fc2(mt::relu(fc1(x))); }
};

struct ConvNet : nn::Module {
  std::shared_ptr<nn::Sequential> features;
  nn::BatchNorm1d norm{6};
  nn::Linear head{6, 3};
  ConvNet() {
    features =
        register_module("features", std::make_shared<nn::Sequential>(nn::Conv2d(1, 2, 3, {.padding = 1}), nn::ReLU(),
                                                                     nn::MaxPool2d(2), nn::Flatten()));
    register_module("norm", norm);
    register_module("head", head);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return head(norm((*features)(x))); }
};

std::vector<std::string> names(const nn::NamedTensors& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "<no error>";
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / double(v.size());
}

double var_of(const std::vector<float>& v) {
  double m = mean_of(v), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return s / double(v.size());
}

}  // namespace

TEST(Module, RegistrationAndDottedNames) {
  ConvNet net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"features.0.weight", "features.0.bias", "norm.weight", "norm.bias", "head.weight",
                                      "head.bias"}));
  EXPECT_EQ(names(net.named_buffers()),
            (std::vector<std::string>{"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"}));
  EXPECT_EQ(net.parameters().size(), 6u);
  EXPECT_EQ(net.num_parameters(), 2 * 9 + 2 + 6 + 6 + 18 + 3);
  EXPECT_TRUE(net.tensor("head.weight").is_same(net.head.weight));
  EXPECT_EQ(&net.submodule("features.0"), &(*net.features)[0]);
  EXPECT_EQ(net.features->at<nn::Conv2d>(0).out_channels, 2);
  std::vector<std::string> mods;
  for (auto& [n, m] : net.named_modules()) mods.push_back(n);
  EXPECT_EQ(mods, (std::vector<std::string>{"", "features", "features.0", "features.1", "features.2", "features.3",
                                            "norm", "head"}));
  for (const mt::Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  mt::Tensor y = net(mt::randn({5, 1, 2, 6}));
  EXPECT_EQ(y.sizes(), (mt::Shape{5, 3}));
}

TEST(Module, RegistrationErrors) {
  nn::Module m;
  m.register_parameter("w", mt::zeros({2}));
  EXPECT_NE(error_of([&] { m.register_parameter("w", mt::zeros({2})); }).find("'w' is already registered"),
            std::string::npos);
  EXPECT_NE(error_of([&] { m.register_buffer("a.b", mt::zeros({2})); }).find("must not contain '.'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { m.register_parameter("", mt::zeros({2})); }).find("must not be empty"), std::string::npos);
  EXPECT_NE(error_of([&] { m.register_parameter("i", mt::zeros({2}, {.dtype = mt::kInt64})); }).find("int64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { m.register_module("self", m); }).find("its own submodule"), std::string::npos);
  nn::Sequential a, b;
  a.push_back(b);
  EXPECT_NE(error_of([&] { b.push_back(a); }).find("cycle"), std::string::npos);
  EXPECT_NE(error_of([&] { m.forward(mt::zeros({1})); }).find("no forward"), std::string::npos);
  EXPECT_NE(error_of([&] { m.submodule("nope.x"); }).find("no submodule 'nope.x'"), std::string::npos);
}

TEST(Module, SharedParametersAreListedOnce) {
  auto shared = std::make_shared<nn::Linear>(3, 3);
  nn::Sequential seq(shared, nn::ReLU(), shared);
  EXPECT_EQ(seq.parameters().size(), 2u);
  EXPECT_EQ(names(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(seq.size(), 3u);
}

TEST(Module, MovingKeepsReferencesValid) {
  Net a;
  mt::Tensor w1 = a.fc1.weight;
  Net b(std::move(a));
  EXPECT_EQ(&b.submodule("fc1"), &b.fc1);
  EXPECT_EQ(&b.submodule("fc2"), &b.fc2);
  EXPECT_TRUE(b.tensor("fc1.weight").is_same(w1));
  EXPECT_EQ(a.parameters().size(), 0u);  // moved-from: empty
  // A vector of modules reallocates (moves) its elements.
  std::vector<Net> nets(1);
  for (int i = 0; i < 8; ++i) nets.emplace_back();
  for (Net& n : nets) {
    EXPECT_EQ(&n.submodule("fc1"), &n.fc1);
    EXPECT_EQ(n.parameters().size(), 4u);
  }
  // Move assignment re-points the target's registrations at its own members.
  Net c;
  c = std::move(b);
  EXPECT_EQ(&c.submodule("fc1"), &c.fc1);
  EXPECT_TRUE(c.tensor("fc1.weight").is_same(w1));
  EXPECT_EQ(c(mt::randn({2, 4})).sizes(), (mt::Shape{2, 2}));
  // Sequential built from temporaries owns moved copies.
  nn::Sequential seq(nn::Linear(4, 3), nn::GELU());
  EXPECT_EQ(names(seq.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
}

TEST(Module, DestroyedReferencedChildIsDetected) {
  nn::Sequential seq;
  {
    nn::Linear temp(2, 2);
    seq.push_back(temp);
    EXPECT_EQ(seq.parameters().size(), 2u);
  }
  EXPECT_NE(error_of([&] { seq.parameters(); }).find("has been destroyed"), std::string::npos);
  // And a parent destroyed first leaves its referenced child untouched.
  nn::Linear keep(2, 2);
  {
    nn::Sequential s2;
    s2.push_back(keep);
  }
  nn::Linear moved(std::move(keep));
  EXPECT_EQ(moved.parameters().size(), 2u);
}

TEST(Module, StateDictRoundTrip) {
  mt::manual_seed(1);
  ConvNet a, b;
  nn::StateDict sd = a.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"features.0.weight", "features.0.bias", "norm.weight", "norm.bias",
                                                 "norm.running_mean", "norm.running_var", "norm.num_batches_tracked",
                                                 "head.weight", "head.bias"}));
  EXPECT_FALSE(sd.at("head.weight").requires_grad());
  EXPECT_NE(a.head.weight.to_vector<float>(), b.head.weight.to_vector<float>());
  nn::LoadResult r = b.load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  for (auto& [k, t] : a.state_dict()) EXPECT_EQ(t.to_vector<double>(), b.state_dict().at(k).to_vector<double>()) << k;
  EXPECT_TRUE(b.head.weight.requires_grad());
  mt::Tensor x = mt::randn({3, 1, 2, 6});
  a.eval();
  b.eval();
  EXPECT_EQ(a(x).to_vector<float>(), b(x).to_vector<float>());
}

TEST(Module, LoadStateDictValidatesBeforeChanging) {
  Net net;
  const std::vector<float> before = net.fc1.weight.to_vector<float>();
  auto expect_rejected = [&](const nn::StateDict& sd, const std::string& needle) {
    std::string err = error_of([&] { net.load_state_dict(sd); });
    EXPECT_NE(err.find("load_state_dict"), std::string::npos) << err;
    EXPECT_NE(err.find(needle), std::string::npos) << err;
    EXPECT_EQ(net.fc1.weight.to_vector<float>(), before) << "weights changed by a rejected load";
  };
  nn::StateDict good;
  for (auto& [k, t] : net.state_dict()) good.insert(k, mt::zeros(t.sizes()));

  nn::StateDict missing = good;
  missing.erase("fc2.bias");
  expect_rejected(missing, "missing key 'fc2.bias'");
  nn::StateDict unexpected = good;
  unexpected.insert("fc3.weight", mt::zeros({1}));
  expect_rejected(unexpected, "unexpected key 'fc3.weight'");
  nn::StateDict shape = good;
  shape.insert("fc2.weight", mt::zeros({3, 2}));
  expect_rejected(shape, "'fc2.weight' has shape [3, 2] in the state dict but [2, 3]");
  nn::StateDict dtype = good;
  dtype.insert("fc1.bias", mt::zeros({3}, {.dtype = mt::kFloat64}));
  expect_rejected(dtype, "'fc1.bias' has dtype float64 in the state dict but float32");

  // Non-strict: missing and unexpected keys are reported, the rest is loaded.
  nn::StateDict partial = missing;
  partial.insert("extra", mt::zeros({1}));
  nn::LoadResult r = net.load_state_dict(partial, false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"fc2.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra"}));
  EXPECT_EQ(net.fc1.weight.to_vector<float>(), std::vector<float>(12, 0.0f));
  // Shape errors are errors even when not strict.
  EXPECT_NE(error_of([&] { net.load_state_dict(shape, false); }).find("fc2.weight"), std::string::npos);
}

TEST(Module, TrainEvalModes) {
  ConvNet net;
  EXPECT_TRUE(net.is_training() && net.features->is_training() && (*net.features)[1].is_training());
  net.eval();
  EXPECT_FALSE(net.is_training() || net.norm.is_training() || (*net.features)[3].is_training());
  net.train();
  EXPECT_TRUE(net.head.is_training());

  nn::Dropout drop(0.5);
  mt::Tensor x = mt::ones({1000});
  mt::manual_seed(3);
  std::vector<float> y = drop(x).to_vector<float>();
  int zeros = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f);
    zeros += v == 0.0f;
  }
  EXPECT_NEAR(zeros / 1000.0, 0.5, 0.06);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));
}

TEST(Module, BatchNormRunningStatistics) {
  nn::BatchNorm1d bn(2);
  mt::Tensor x = mt::from_vector<float>({1, 10, 3, 20, 5, 30}, {3, 2});
  mt::Tensor y = bn(x);
  // Batch statistics: channel 0 mean 3, biased var 8/3; running: 0.1 * mean, 0.9 + 0.1 * unbiased var (4).
  EXPECT_NEAR(y.to_vector<float>()[0], (1 - 3) / std::sqrt(8.0 / 3 + 1e-5), 1e-5);
  EXPECT_NEAR(bn.running_mean.to_vector<float>()[0], 0.3, 1e-6);
  EXPECT_NEAR(bn.running_var.to_vector<float>()[0], 0.9 + 0.4, 1e-6);
  EXPECT_NEAR(bn.running_var.to_vector<float>()[1], 0.9 + 10.0, 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  bn.eval();
  mt::Tensor ye = bn(x);
  EXPECT_NEAR(ye.to_vector<float>()[0], (1 - 0.3) / std::sqrt(1.3 + 1e-5), 1e-5);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);

  // momentum = nullopt: a cumulative average of the batch statistics.
  nn::BatchNorm1d cum(1, {.momentum = std::nullopt});
  cum(mt::from_vector<float>({1, 3}, {2, 1}));
  cum(mt::from_vector<float>({5, 7}, {2, 1}));
  EXPECT_NEAR(cum.running_mean.item<float>(), (2 + 6) / 2.0, 1e-6);
  EXPECT_NEAR(cum.running_var.item<float>(), 2.0, 1e-6);  // unbiased var of each batch is 2
  // The count is kept on the host (no read-back per step on a GPU) but follows the buffer: a
  // write to it (as load_state_dict makes) is seen by the next forward. Count 3 -> factor 1/4.
  cum.num_batches_tracked.fill_(3);
  cum(mt::from_vector<float>({12, 12}, {2, 1}));
  EXPECT_NEAR(cum.running_mean.item<float>(), 4.0 + (12 - 4.0) / 4, 1e-6);
  EXPECT_EQ(cum.num_batches_tracked.item<int64_t>(), 4);
  cum(mt::from_vector<float>({1, 1}, {2, 1}));  // count 5 from the host copy
  EXPECT_NEAR(cum.running_mean.item<float>(), 6.0 + (1 - 6.0) / 5, 1e-6);
  cum.reset_running_stats();
  cum(mt::from_vector<float>({2, 4}, {2, 1}));  // count 1 again: the mean is the batch's
  EXPECT_NEAR(cum.running_mean.item<float>(), 3.0, 1e-6);
  EXPECT_NE(error_of([&] { bn(mt::zeros({3, 2, 2, 2})); }).find("BatchNorm1d"), std::string::npos);
}

TEST(Module, ToDTypeConvertsInPlace) {
  Net net;
  std::vector<mt::Tensor> held = net.parameters();  // what an optimizer would keep
  mt::Tensor x = mt::randn({2, 4});
  net(x).sum().backward();
  ASSERT_TRUE(net.fc1.weight.grad().defined());
  const std::vector<double> w = net.fc1.weight.to_vector<double>();
  net.to(mt::kFloat64);
  for (const mt::Tensor& p : held) {
    EXPECT_EQ(p.dtype(), mt::kFloat64);
    EXPECT_TRUE(p.requires_grad() && p.is_leaf());
    EXPECT_EQ(p.grad().dtype(), mt::kFloat64);
  }
  EXPECT_EQ(net.fc1.weight.to_vector<double>(), w);
  EXPECT_TRUE(held[0].is_same(net.fc1.weight));
  mt::Tensor y = net(x.to(mt::kFloat64));
  EXPECT_EQ(y.dtype(), mt::kFloat64);
  net.zero_grad();
  y.sum().backward();
  EXPECT_EQ(held[0].grad().dtype(), mt::kFloat64);
  // Integer buffers keep their dtype.
  nn::BatchNorm2d bn(3);
  bn.to(mt::kFloat16);
  EXPECT_EQ(bn.running_mean.dtype(), mt::kFloat16);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), mt::kInt64);
  EXPECT_NE(error_of([&] { bn.to(mt::kInt32); }).find("floating"), std::string::npos);
  net.to(mt::Device::cpu());  // same device: nothing changes
  EXPECT_EQ(net.fc1.weight.dtype(), mt::kFloat64);
}

TEST(Module, ZeroGradApplyRequiresGrad) {
  Net net;
  net(mt::randn({2, 4})).sum().backward();
  net.zero_grad(false);
  EXPECT_EQ(net.fc2.bias.grad().to_vector<float>(), std::vector<float>(2, 0.0f));
  net.zero_grad();
  EXPECT_FALSE(net.fc2.bias.grad().defined());
  std::vector<std::string> order;
  net.apply([&](nn::Module& m) { order.push_back(m.name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "Linear", "Net"}));
  net.apply([](nn::Module& m) {
    if (auto* l = dynamic_cast<nn::Linear*>(&m)) nn::init::zeros_(l->bias);
  });
  EXPECT_EQ(net.fc1.bias.to_vector<float>(), std::vector<float>(3, 0.0f));
  net.requires_grad_(false);
  EXPECT_EQ(net.num_parameters(true), 0);
  EXPECT_FALSE(net(mt::randn({1, 4})).requires_grad());
}

TEST(Module, Printing) {
  ConvNet net;
  std::ostringstream os;
  os << net;
  EXPECT_EQ(
      os.str(),
      "ConvNet(\n"
      "  (features): Sequential(\n"
      "    (0): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))  # 20 parameters\n"
      "    (1): ReLU()\n"
      "    (2): MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false)\n"
      "    (3): Flatten(start_dim=1, end_dim=-1)\n"
      "  )  # 20 parameters\n"
      "  (norm): BatchNorm1d(6, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)  # 12 parameters\n"
      "  (head): Linear(in_features=6, out_features=3, bias=true)  # 21 parameters\n"
      ")  # 53 parameters");
  nn::LayerNorm ln(8, {.elementwise_affine = false});
  EXPECT_EQ(ln.str(), "LayerNorm((8,), eps=1e-05, elementwise_affine=false)");
  EXPECT_EQ(nn::Embedding(1000, 64, 0).str(), "Embedding(1000, 64, padding_idx=0)  # 64,000 parameters");
}

TEST(Layers, ShapesAndFunctionalForms) {
  mt::manual_seed(4);
  mt::Tensor img = mt::randn({2, 3, 8, 8});
  nn::Conv2d conv(3, 4, {3, 3}, {.stride = 2, .padding = 1});
  EXPECT_EQ(conv(img).sizes(), (mt::Shape{2, 4, 4, 4}));
  nn::Conv2d dw(3, 3, 3, {.padding = 1, .groups = 3, .bias = false});
  EXPECT_EQ(dw.weight.sizes(), (mt::Shape{3, 1, 3, 3}));
  EXPECT_FALSE(dw.bias.defined());
  EXPECT_EQ(nn::AvgPool2d(2)(img).sizes(), (mt::Shape{2, 3, 4, 4}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d(1)(img).sizes(), (mt::Shape{2, 3, 1, 1}));
  EXPECT_EQ(nn::MaxPool2d(3, {.stride = 2, .ceil_mode = true})(img).sizes(), (mt::Shape{2, 3, 4, 4}));
  EXPECT_EQ(conv(img.select(0, 0)).sizes(), (mt::Shape{4, 4, 4}));  // unbatched [C, H, W]
  nn::LayerNorm ln(8);
  EXPECT_EQ(ln(img).sizes(), img.sizes());
  nn::Embedding emb(10, 4, 0);
  mt::Tensor tok = mt::from_vector<int64_t>({0, 3, 9}, {3}, {.dtype = mt::kInt64});
  mt::Tensor e = emb(tok);
  EXPECT_EQ(e.sizes(), (mt::Shape{3, 4}));
  EXPECT_EQ(e.select(0, 0).to_vector<float>(), std::vector<float>(4, 0.0f));  // padding row starts at zero
  e.sum().backward();
  EXPECT_EQ(emb.weight.grad().select(0, 0).to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(emb.weight.grad().select(0, 3).to_vector<float>(), std::vector<float>(4, 1.0f));
  // Activations match the core ops.
  mt::Tensor v = mt::randn({5});
  EXPECT_EQ(nn::GELU("tanh")(v).to_vector<float>(), mt::gelu(v, "tanh").to_vector<float>());
  EXPECT_EQ(nn::SiLU()(v).to_vector<float>(), F::silu(v).to_vector<float>());
  EXPECT_EQ(nn::Tanh()(v).to_vector<float>(), mt::tanh(v).to_vector<float>());
  EXPECT_EQ(nn::Sigmoid()(v).to_vector<float>(), mt::sigmoid(v).to_vector<float>());
  EXPECT_EQ(nn::Flatten()(img).sizes(), (mt::Shape{2, 192}));
  nn::ModuleList list(nn::Linear(2, 2), std::make_shared<nn::ReLU>());
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].name(), "ReLU");
  EXPECT_NE(error_of([&] { list(v); }).find("ModuleList"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)list[5]; }).find("out of range"), std::string::npos);
}

TEST(Layers, ErrorsNameOpShapesAndDtypes) {
  auto has = [](const std::string& err, std::initializer_list<const char*> parts) {
    for (const char* p : parts) EXPECT_NE(err.find(p), std::string::npos) << "'" << p << "' not in: " << err;
  };
  has(error_of([] {
        F::conv2d(mt::zeros({1, 3, 5, 5}), mt::zeros({4, 2, 3, 3}));
      }),
      {"conv2d", "[1, 3, 5, 5]", "[4, 2, 3, 3]", "float32"});
  has(error_of([] { F::conv2d(mt::zeros({1, 1, 2, 2}), mt::zeros({1, 1, 3, 3})); }), {"conv2d", "too small"});
  has(error_of([] {
        F::conv2d(mt::zeros({1, 2, 5, 5}), mt::zeros({1, 2, 3, 3}, {.dtype = mt::kFloat64}));
      }),
      {"conv2d", "float64", "float32"});
  has(error_of([] { F::linear(mt::zeros({2, 5}), mt::zeros({3, 4})); }), {"linear", "[2, 5]", "[3, 4]"});
  has(error_of([] {
        F::cross_entropy(mt::zeros({2, 3}), mt::from_vector<int64_t>({0, 3}, {2}, {.dtype = mt::kInt64}));
      }),
      {"cross_entropy", "target 3", "3 classes"});
  has(error_of([] { F::cross_entropy(mt::zeros({2, 3}), mt::zeros({2, 3})); }), {"cross_entropy", "class-probability"});
  has(error_of([] {
        F::nll_loss(mt::zeros({2, 3}), mt::from_vector<int64_t>({0}, {1}, {.dtype = mt::kInt64}));
      }),
      {"nll_loss", "[1]", "[2, 3]"});
  has(error_of([] { F::mse_loss(mt::zeros({2, 1}), mt::zeros({2})); }), {"mse_loss", "[2, 1]", "[2]"});
  has(error_of([] { F::layer_norm(mt::zeros({2, 3}), {4}); }), {"layer_norm", "[2, 3]", "[4]"});
  has(error_of([] { F::batch_norm(mt::zeros({1, 3}), {}, {}, {}, {}, true); }), {"batch_norm", "more than 1 value"});
  has(error_of([] { F::max_pool2d(mt::zeros({1, 1, 4, 4}), 2, {.padding = 2}); }), {"max_pool2d", "half"});
  has(error_of([] {
        F::embedding(mt::from_vector<int64_t>({7}, {1}, {.dtype = mt::kInt64}), mt::zeros({5, 2}));
      }),
      {"embedding", "index 7", "5 rows"});
  has(error_of([] { F::dropout(mt::zeros({2}), 1.5); }), {"dropout", "1.5"});
}

TEST(Layers, AutocastRunsLinearInHalfAndLossesInFloat) {
  mt::manual_seed(5);
  nn::Sequential net(nn::Linear(8, 16), nn::ReLU(), nn::LayerNorm(16), nn::Linear(16, 4));
  mt::Tensor x = mt::randn({6, 8});
  mt::Tensor target = mt::from_vector<int64_t>({0, 1, 2, 3, 0, 1}, {6}, {.dtype = mt::kInt64});
  mt::Tensor logits, loss;
  {
    mt::amp::Autocast ac(mt::kHalf);
    logits = net(x);
    loss = F::cross_entropy(logits, target);
  }
  EXPECT_EQ(logits.dtype(), mt::kHalf);  // the last linear ran in fp16 (after an fp32 layer_norm)
  EXPECT_EQ(loss.dtype(), mt::kFloat32);
  loss.backward();
  for (auto& [n, p] : net.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << n;
    EXPECT_EQ(p.grad().dtype(), mt::kFloat32) << n;
  }
  // The same model in fp32 gives nearly the same loss.
  mt::Tensor ref = F::cross_entropy(net(x), target);
  EXPECT_NEAR(loss.item<float>(), ref.item<float>(), 2e-2);
}

TEST(Layers, HalfAndBFloat16KernelsMatchFloat) {
  mt::manual_seed(6);
  mt::Tensor x = mt::randn({2, 4, 6, 6}), w = mt::randn({6, 2, 3, 3}), b = mt::randn({6});
  mt::Tensor ref = F::conv2d(x, w, b, {.padding = 1, .groups = 2});
  for (mt::DType t : {mt::kHalf, mt::kBFloat16}) {
    mt::Tensor y = F::conv2d(x.to(t), w.to(t), b.to(t), {.padding = 1, .groups = 2});
    EXPECT_EQ(y.dtype(), t);
    std::vector<float> a = y.to_vector<float>(), r = ref.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], r[i], (t == mt::kHalf ? 0.02 : 0.15) * (1 + std::fabs(r[i])));
    mt::Tensor ln = F::layer_norm(x.to(t), {6, 6});
    EXPECT_EQ(ln.dtype(), t);
    mt::Tensor bn = F::batch_norm(x.to(t), {}, {}, {}, {}, true);
    EXPECT_EQ(bn.dtype(), t);
  }
}

// cross_entropy over [N, C, d...] reads the logits where they lie (class stride S, blocks of 64
// positions vectorized across them); it must equal the rows kernel on the same logits moved to
// [N S, C]: losses and gradients, with class weights, label smoothing, ignored targets and a NaN
// logit (its position's loss and gradient NaN, an ignored position's gradient 0 beside one),
// positions fewer than, equal to and beyond a block, and a non-contiguous input.
TEST(Losses, CrossEntropyOverTheClassDimEqualsRows) {
  mt::manual_seed(12);
  struct Case {
    mt::Shape shape;
    bool options;
  };
  const std::vector<Case> cases = {{{2, 5, 70}, false}, {{3, 4, 8, 9}, true}, {{1, 21, 1, 1}, true},
                                   {{2, 3, 130}, true}, {{2, 6, 64}, false},  {{4, 2, 3}, true}};
  for (mt::DType dt : {mt::kFloat64, mt::kFloat32, mt::kBFloat16}) {
    for (const Case& c : cases) {
      for (bool with_nan : {false, true}) {
        int64_t numel = 1;
        for (int64_t d : c.shape) numel *= d;
        const int64_t N = c.shape[0], C = c.shape[1], M = numel / C;
        mt::Shape tshape{N};
        tshape.insert(tshape.end(), c.shape.begin() + 2, c.shape.end());
        mt::Tensor x0 = (mt::randn(c.shape) * 3.0).to(dt);
        mt::Tensor t = mt::randint(0, C, tshape);
        std::vector<int64_t> tv = t.to_vector<int64_t>();
        if (M > 1) tv[1] = 1;  // ignored with the options
        if (with_nan) {
          tv[M - 1] = 0;         // the last position: a NaN logit
          if (M > 1) tv[0] = 1;  // position 0: a NaN logit, its target ignored with the options
        }
        t = mt::from_vector<int64_t>(tv, tshape, {.dtype = mt::kInt64});
        if (with_nan) {
          std::vector<double> xv = x0.to(mt::kFloat64).to_vector<double>();
          xv[0] = NAN;                       // (n 0, class 0, position 0)
          xv[size_t(x0.numel() - 1)] = NAN;  // (n N-1, class C-1, the last position)
          x0 = mt::from_vector<double>(xv, c.shape, {.dtype = mt::kFloat64}).to(dt);
        }
        F::CrossEntropyOptions o;
        if (c.options) {
          o.weight = (mt::rand({C}) + 0.5).to(mt::kFloat32);
          o.label_smoothing = 0.2;
          o.ignore_index = 1;
        }
        o.reduction = mt::nn::Reduction::None;
        const std::string what = std::string(mt::dtype_name(dt)) + " " + mt::shape_str(c.shape) +
                                 (c.options ? " weighted, smoothed, ignoring 1" : "") + (with_nan ? " with NaN" : "");
        // The class-strided kernel (x0 itself, and a non-contiguous view of the same values).
        mt::Tensor xs = x0.clone().requires_grad_(true);
        mt::Tensor ys = F::cross_entropy(xs, t, o);
        mt::Tensor gy = mt::randn(tshape).to(ys.dtype());
        ys.backward(gy);
        mt::Tensor xt = mt::cat({x0, x0}, 1).narrow(1, C, C).requires_grad_(true);
        ASSERT_TRUE(N == 1 || !xt.is_contiguous());
        mt::Tensor yt = F::cross_entropy(xt, t, o);
        yt.backward(gy);
        // The rows kernel: [N, C, S] -> [N S, C].
        mt::Tensor rows = x0.reshape({N, C, M / N}).transpose(1, 2).contiguous().reshape({M, C}).requires_grad_(true);
        mt::Tensor yr = F::cross_entropy(rows, t.reshape({M}), o);
        yr.backward(gy.reshape({M}));
        mt::Tensor gr = rows.grad().reshape({N, M / N, C}).transpose(1, 2).reshape(c.shape);
        const double tol = dt == mt::kFloat64 ? 1e-12 : 2e-6;
        const double gtol = dt == mt::kBFloat16 ? 8e-3 : tol;  // one bf16 rounding of a gradient
        auto same = [&](const mt::Tensor& got, const mt::Tensor& want, double tl, const std::string& name) {
          std::vector<double> a = got.to(mt::kFloat64).to_vector<double>(),
                              b = want.to(mt::kFloat64).to_vector<double>();
          ASSERT_EQ(a.size(), b.size()) << what << " " << name;
          for (size_t i = 0; i < a.size(); ++i) {
            if (std::isnan(b[i])) {
              ASSERT_TRUE(std::isnan(a[i])) << what << " " << name << " element " << i;
              continue;
            }
            ASSERT_NEAR(a[i], b[i], tl * (1 + std::fabs(b[i]))) << what << " " << name << " element " << i;
          }
        };
        same(ys.reshape({M}), yr, tol, "loss");
        same(yt.reshape({M}), yr, tol, "loss (non-contiguous input)");
        same(xs.grad(), gr, gtol, "gradient");
        same(xt.grad(), gr, gtol, "gradient (non-contiguous input)");
        if (with_nan) {
          EXPECT_TRUE(std::isnan(ys.reshape({M}).to_vector<double>()[size_t(M - 1)])) << what;
          const std::vector<double> g0 =
              xs.grad().reshape({N, C, M / N}).select(0, 0).select(1, 0).to(mt::kFloat64).to_vector<double>();
          for (int64_t k = 0; k < C; ++k) {
            if (c.options && M > 1)  // position 0 is ignored: a gradient of 0 beside its NaN
              EXPECT_EQ(g0[size_t(k)], 0.0) << what << " class " << k;
            else
              EXPECT_TRUE(std::isnan(g0[size_t(k)])) << what << " class " << k;
          }
        }
      }
    }
  }
}

// batch_norm's kernels walk a sample's row of C S elements whole when channel runs are short
// (S < 32: BatchNorm1d's [N, C], sequences of a few steps) and per (sample, channel) run
// otherwise; both must equal the same norm composed in float64 (outputs, input, weight and
// bias gradients; training and eval), keep a NaN in its channel, and round bf16 once.
TEST(Layers, BatchNormShortAndLongChannelRunsMatchFloat64) {
  mt::manual_seed(21);
  for (int64_t S : {1, 5, 31, 32, 70}) {
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
      for (bool training : {true, false}) {
        const int64_t N = 6, C = 5;
        const mt::Shape shape = S == 1 ? mt::Shape{N, C} : mt::Shape{N, C, S};
        const mt::Shape ch = S == 1 ? mt::Shape{1, C} : mt::Shape{1, C, 1};
        const mt::Tensor x64 = (mt::randn(shape, {.dtype = mt::kFloat64}) * 2.0 + 3.0).to(dt).to(mt::kFloat64);
        const mt::Tensor g64 = mt::randn(shape, {.dtype = mt::kFloat64}).to(dt).to(mt::kFloat64);
        const mt::Tensor w64 = mt::rand({C}, {.dtype = mt::kFloat64}) + 0.5,
                         b64 = mt::randn({C}, {.dtype = mt::kFloat64});
        const mt::Tensor rm = mt::randn({C}), rv = mt::rand({C}) + 0.5;
        const std::string what =
            std::string(mt::dtype_name(dt)) + " S " + std::to_string(S) + (training ? " training" : " eval");
        // Float64 composition (biased variance in training; the running statistics in eval).
        mt::Tensor xr = x64.clone().requires_grad_(true), wr = w64.clone().requires_grad_(true),
                   br = b64.clone().requires_grad_(true);
        const mt::Shape dims = S == 1 ? mt::Shape{0} : mt::Shape{0, 2};
        mt::Tensor m = training ? mt::mean(xr, dims, true) : rm.to(mt::kFloat64).reshape(ch);
        mt::Tensor v = training ? mt::var(xr, dims, 0, true) : rv.to(mt::kFloat64).reshape(ch);
        mt::Tensor yr = (xr - m) / mt::sqrt(v + 1e-5) * wr.reshape(ch) + br.reshape(ch);
        yr.backward(g64);
        // The kernel.
        mt::Tensor x = x64.to(dt).requires_grad_(true), w = w64.to(mt::kFloat32).requires_grad_(true),
                   b = b64.to(mt::kFloat32).requires_grad_(true);
        mt::Tensor rmk = rm.clone(), rvk = rv.clone();
        mt::Tensor y = F::batch_norm(x, rmk, rvk, w, b, training, 0.1, 1e-5);
        ASSERT_EQ(y.dtype(), dt) << what;
        y.backward(g64.to(dt));
        const double tol = dt == mt::kBFloat16 ? 1.0 / 64 : 2e-5;
        auto close = [&](const mt::Tensor& got, const mt::Tensor& want, double scale, const std::string& name) {
          const std::vector<double> a = got.to(mt::kFloat64).to_vector<double>(), r = want.to_vector<double>();
          ASSERT_EQ(a.size(), r.size()) << what << " " << name;
          for (size_t i = 0; i < a.size(); ++i)
            ASSERT_NEAR(a[i], r[i], tol * (std::fabs(r[i]) + scale)) << what << " " << name << " element " << i;
        };
        close(y, yr, 1, "y");
        close(x.grad(), xr.grad(), 1, "gx");
        close(w.grad(), wr.grad(), double(N * S), "gw");  // sums of N S terms
        close(b.grad(), br.grad(), double(N * S), "gb");
      }
    }
    // A NaN stays in its channel.
    mt::Tensor xn = mt::randn(S == 1 ? mt::Shape{6, 5} : mt::Shape{6, 5, S});
    std::vector<float> v = xn.to_vector<float>();
    v[size_t(S)] = NAN;  // sample 0, channel 1
    xn = mt::from_vector<float>(v, xn.sizes());
    const std::vector<float> yn = F::batch_norm(xn, {}, {}, {}, {}, true).to_vector<float>();
    for (size_t i = 0; i < yn.size(); ++i)
      EXPECT_EQ(std::isnan(yn[i]), int64_t(i) / S % 5 == 1) << "S " << S << " element " << i;
  }
}

TEST(Init, DefaultInitMatchesPyTorch) {
  mt::manual_seed(7);
  // Linear: kaiming_uniform(a = sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as does the bias.
  nn::Linear fc(400, 300);
  const double b = 1 / std::sqrt(400.0);
  std::vector<float> w = fc.weight.to_vector<float>();
  for (float v : w) ASSERT_LE(std::fabs(v), b);
  EXPECT_NEAR(mean_of(w), 0, 0.002);
  EXPECT_NEAR(var_of(w), b * b / 3, 0.03 * b * b / 3);
  for (float v : fc.bias.to_vector<float>()) ASSERT_LE(std::fabs(v), b);
  EXPECT_NEAR(var_of(fc.bias.to_vector<float>()), b * b / 3, 0.25 * b * b / 3);
  // Conv2d: fan_in = in / groups * kh * kw.
  nn::Conv2d conv(32, 64, 3, {.groups = 2});
  const double bc = 1 / std::sqrt(16.0 * 9);
  std::vector<float> cw = conv.weight.to_vector<float>();
  for (float v : cw) ASSERT_LE(std::fabs(v), bc);
  EXPECT_NEAR(var_of(cw), bc * bc / 3, 0.05 * bc * bc / 3);
  // Embedding: N(0, 1).
  std::vector<float> e = nn::Embedding(500, 100).weight.to_vector<float>();
  EXPECT_NEAR(mean_of(e), 0, 0.01);
  EXPECT_NEAR(var_of(e), 1, 0.02);
  // Norms: ones and zeros.
  nn::BatchNorm2d bn(5);
  EXPECT_EQ(bn.weight.to_vector<float>(), std::vector<float>(5, 1.0f));
  EXPECT_EQ(bn.bias.to_vector<float>(), std::vector<float>(5, 0.0f));
  EXPECT_EQ(bn.running_var.to_vector<float>(), std::vector<float>(5, 1.0f));
  nn::LayerNorm ln(7);
  EXPECT_EQ(ln.weight.to_vector<float>(), std::vector<float>(7, 1.0f));
}

TEST(Init, InitFunctions) {
  mt::manual_seed(8);
  mt::Tensor w = mt::empty({200, 100, 3, 3});
  auto [fi, fo] = nn::init::calculate_fan_in_and_fan_out(w);
  EXPECT_EQ(fi, 900);
  EXPECT_EQ(fo, 1800);
  EXPECT_NEAR(nn::init::calculate_gain(nn::init::Nonlinearity::LeakyReLU), std::sqrt(2 / (1 + 1e-4)), 1e-12);
  EXPECT_NEAR(nn::init::calculate_gain(nn::init::Nonlinearity::Tanh), 5.0 / 3, 1e-12);
  nn::init::kaiming_normal_(w, 0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
  EXPECT_NEAR(var_of(w.to_vector<float>()), 2.0 / 1800, 0.02 * 2.0 / 1800);
  nn::init::kaiming_uniform_(w);
  EXPECT_NEAR(var_of(w.to_vector<float>()), 2.0 / 900, 0.02 * 2.0 / 900);
  nn::init::xavier_uniform_(w, 2.0);
  const double xb = 2 * std::sqrt(6.0 / 2700);
  for (float v : w.to_vector<float>()) ASSERT_LE(std::fabs(v), xb);
  nn::init::xavier_normal_(w);
  EXPECT_NEAR(var_of(w.to_vector<float>()), 2.0 / 2700, 0.02 * 2.0 / 2700);
  nn::init::constant_(w, 0.5);
  EXPECT_EQ(w.to_vector<float>()[17], 0.5f);
  mt::Tensor p = mt::zeros({3, 3}, {.requires_grad = true});
  nn::init::normal_(p, 1, 0.1);  // in place on a leaf that requires grad
  EXPECT_TRUE(p.is_leaf() && p.requires_grad());
  EXPECT_NE(error_of([] { nn::init::xavier_uniform_(mt::empty({3})); }).find("at least 2 dims"), std::string::npos);
}

// Max pooling with padding, dilation or ceil mode computes the outputs whose windows lie inside
// the plane by the vectorized row and the rest by the general scan: every geometry's values and
// indices equal a scalar scan's (window order, the first maximum wins, a NaN takes over), on
// values with ties, -inf and NaN, fp32 / bf16 / fp64, planes narrower and wider than the window.
TEST(MaxPool2d, PaddedWindowsMatchAScalarScan) {
  struct Geometry {
    int64_t k, s, p, d;
    bool ceil;
  };
  const std::vector<Geometry> geometries = {{3, 2, 1, 1, false}, {3, 1, 1, 1, false}, {2, 2, 1, 1, false},
                                            {3, 2, 1, 1, true},  {3, 2, 1, 2, false}, {5, 3, 2, 1, true},
                                            {2, 1, 1, 2, false}, {1, 2, 0, 1, true},  {3, 3, 0, 1, true}};
  const std::vector<std::pair<int64_t, int64_t>> planes = {{7, 9}, {13, 32}, {4, 40}, {33, 5}};
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64})
    for (const Geometry& g : geometries)
      for (const auto& [H, W] : planes) {
        const int64_t n = 2 * 3 * H * W;
        std::vector<double> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double((i * 37) % 11) - 5.0;  // ties
        v[size_t(n / 3)] = std::nan("");
        v[size_t(n / 2)] = -INFINITY;
        v[size_t(n / 2 + 1)] = std::nan("");
        const mt::Tensor x = mt::from_vector(v, {2, 3, H, W}, {.dtype = mt::kFloat64}).to(dt);
        const int64_t extent = (g.k - 1) * g.d + 1;
        if (H + 2 * g.p < extent || W + 2 * g.p < extent) continue;
        const auto [y, idx] =
            F::max_pool2d_with_indices(x, g.k, {.stride = g.s, .padding = g.p, .dilation = g.d, .ceil_mode = g.ceil});
        const std::vector<double> yv = y.to_vector<double>(), xv = x.to_vector<double>();
        const std::vector<int64_t> iv = idx.to_vector<int64_t>();
        const int64_t OH = y.size(2), OW = y.size(3);
        int64_t wrong = 0;
        for (int64_t plane = 0; plane < 6; ++plane)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              double best = -INFINITY;
              int64_t at = -1;
              for (int64_t kh = 0; kh < g.k; ++kh)
                for (int64_t kw = 0; kw < g.k; ++kw) {
                  const int64_t h = oh * g.s - g.p + kh * g.d, w = ow * g.s - g.p + kw * g.d;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  if (at < 0) at = h * W + w;  // the first real element's position
                  const double e = xv[size_t(plane * H * W + h * W + w)];
                  if (e > best || std::isnan(e)) {
                    best = e;
                    at = h * W + w;
                  }
                }
              const size_t o = size_t((plane * OH + oh) * OW + ow);
              const bool same = yv[o] == best || (std::isnan(yv[o]) && std::isnan(best));
              wrong += !same || iv[o] != at;
            }
        EXPECT_EQ(wrong, 0) << mt::dtype_name(dt) << " k" << g.k << " s" << g.s << " p" << g.p << " d" << g.d
                            << (g.ceil ? " ceil " : " ") << H << "x" << W;
      }
}

// Average pooling computes the windows inside the plane 16 outputs at a time (strides 1 and 2,
// float and bf16) and the clipped ones by the scalar loop: the forward equals a float sum in
// window order divided by the window's divisor (padding counted or not, an override, ceil mode),
// rounded once to the dtype; the backward matches a double-precision scatter of g / divisor.
TEST(AvgPool2d, InsideWindowsMatchAScalarLoop) {
  struct Geometry {
    int64_t k, s, p;
    bool ceil, count_pad;
    int64_t divisor;
  };
  const std::vector<Geometry> geometries = {
      {3, 1, 1, false, true, 0},  {3, 2, 1, false, true, 0}, {2, 2, 0, false, true, 0}, {3, 2, 1, true, true, 0},
      {3, 1, 1, false, false, 0}, {3, 2, 1, false, true, 5}, {5, 3, 2, true, false, 0}, {2, 1, 1, false, true, 0}};
  const std::vector<std::pair<int64_t, int64_t>> planes = {{7, 9}, {13, 32}, {4, 40}, {33, 5}};
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16})
    for (const Geometry& g : geometries)
      for (const auto& [H, W] : planes) {
        mt::manual_seed(uint64_t(H * 100 + W));
        const mt::Tensor x = mt::randn({2, 3, H, W}).to(dt).requires_grad_(true);
        const mt::Tensor y = F::avg_pool2d(x, g.k,
                                           {.stride = g.s,
                                            .padding = g.p,
                                            .ceil_mode = g.ceil,
                                            .count_include_pad = g.count_pad,
                                            .divisor_override = g.divisor});
        const mt::Tensor gy = mt::randn(y.sizes()).to(dt);
        y.backward(gy);
        const int64_t OH = y.size(2), OW = y.size(3);
        const std::vector<double> xv = x.detach().to_vector<double>(), gv = gy.to_vector<double>();
        std::vector<float> want(size_t(6 * OH * OW));
        std::vector<double> gx_want(size_t(6 * H * W), 0.0);
        for (int64_t plane = 0; plane < 6; ++plane)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              int64_t h0 = oh * g.s - g.p, w0 = ow * g.s - g.p;
              int64_t h1 = std::min(h0 + g.k, H + g.p), w1 = std::min(w0 + g.k, W + g.p);
              const int64_t padded = (h1 - h0) * (w1 - w0);
              h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, H), w1 = std::min(w1, W);
              const int64_t divisor = g.divisor > 0 ? g.divisor : (g.count_pad ? padded : (h1 - h0) * (w1 - w0));
              float sum = 0;
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) sum += float(xv[size_t(plane * H * W + h * W + w)]);
              const size_t o = size_t((plane * OH + oh) * OW + ow);
              want[o] = sum / float(divisor);
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t w = w0; w < w1; ++w) gx_want[size_t(plane * H * W + h * W + w)] += gv[o] / double(divisor);
            }
        const std::vector<double> yv = y.to_vector<double>();
        const std::vector<double> rounded =
            mt::from_vector(std::vector<double>(want.begin(), want.end()), y.sizes(), {.dtype = mt::kFloat64})
                .to(mt::kFloat32)
                .to(dt)
                .to_vector<double>();
        const std::vector<double> gx = x.grad().to_vector<double>();
        const double tol = dt == mt::kFloat32 ? 1e-5 : 2e-2;
        int64_t wrong = 0, wrong_grad = 0;
        for (size_t i = 0; i < yv.size(); ++i) wrong += yv[i] != rounded[i];
        for (size_t i = 0; i < gx.size(); ++i)
          wrong_grad += std::fabs(gx[i] - gx_want[i]) > tol * (1 + std::fabs(gx_want[i]));
        const std::string what = std::string(mt::dtype_name(dt)) + " k" + std::to_string(g.k) + " s" +
                                 std::to_string(g.s) + " p" + std::to_string(g.p) + " " + std::to_string(H) + "x" +
                                 std::to_string(W);
        EXPECT_EQ(wrong, 0) << what;
        EXPECT_EQ(wrong_grad, 0) << what;
      }
}
