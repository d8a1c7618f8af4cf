// RMSprop and Adagrad: float32 steps from fixed gradients equal torch 1.13's bit for bit
// (tests/fixtures/reference_new_optim.json "optimizers", tools/gen_reference_new_optim.py) for
// every option that changes the update (momentum, centered, weight_decay, alpha, eps, lr_decay,
// initial_accumulator_value, maximize, per-group overrides); state-dict round trips continue
// bit for bit; the GradScaler's fused unscale + step equals the unscaled step; the AMP working
// copy is refreshed by the step; invalid hyper-parameters and state are errors.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace optim = mt::optim;
using json = nlohmann::json;
using mt::Tensor;
using testing::HasSubstr;

namespace {

const json& fixture() { return mt::test::load_fixture("reference_new_optim.json", "tools/gen_reference_new_optim.py"); }

Tensor load(const json& j) {
  return mt::from_vector(j.at("data").get<std::vector<double>>(), j.at("shape").get<mt::Shape>(),
                         {.dtype = mt::kFloat32});
}

bool flag(const json& d, const char* key) { return d.contains(key) && d.at(key).get<bool>(); }

optim::RMSpropOptions rmsprop_options(const json& d) {
  optim::RMSpropOptions o;
  o.lr = d.value("lr", o.lr);
  o.alpha = d.value("alpha", o.alpha);
  o.eps = d.value("eps", o.eps);
  o.weight_decay = d.value("weight_decay", o.weight_decay);
  o.momentum = d.value("momentum", o.momentum);
  o.centered = flag(d, "centered");
  o.maximize = flag(d, "maximize");
  return o;
}

optim::AdagradOptions adagrad_options(const json& d) {
  optim::AdagradOptions o;
  o.lr = d.value("lr", o.lr);
  o.lr_decay = d.value("lr_decay", o.lr_decay);
  o.weight_decay = d.value("weight_decay", o.weight_decay);
  o.initial_accumulator_value = d.value("initial_accumulator_value", o.initial_accumulator_value);
  o.eps = d.value("eps", o.eps);
  o.maximize = flag(d, "maximize");
  return o;
}

std::unique_ptr<optim::Optimizer> make(const std::string& type, const json& defaults, const json& groups_json,
                                       const std::map<std::string, Tensor>& by_name) {
  std::vector<optim::ParamGroup> groups;
  for (const json& gj : groups_json) {
    optim::ParamGroup g;
    for (const auto& [key, value] : gj.items()) {
      if (key == "params") {
        for (const json& p : value) g.params.push_back(by_name.at(p.get<std::string>()));
      } else if (key == "lr") {
        g.lr = value.get<double>();
      } else if (key == "momentum") {
        g.momentum = value.get<double>();
      } else if (key == "alpha") {
        g.alpha = value.get<double>();
      } else if (key == "centered") {
        g.centered = value.get<bool>();
      } else if (key == "lr_decay") {
        g.lr_decay = value.get<double>();
      } else if (key == "eps") {
        g.eps = value.get<double>();
      } else if (key == "initial_accumulator_value") {
        g.initial_accumulator_value = value.get<double>();
      } else {
        ADD_FAILURE() << "unknown parameter-group key in the fixture: " << key;
      }
    }
    groups.push_back(std::move(g));
  }
  if (type == "RMSprop") return std::make_unique<optim::RMSprop>(std::move(groups), rmsprop_options(defaults));
  if (type == "Adagrad") return std::make_unique<optim::Adagrad>(std::move(groups), adagrad_options(defaults));
  throw std::runtime_error("unknown optimizer " + type);
}

// Distance in units in the last place between two floats.
int64_t ulps(float a, float b) {
  auto key = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::abs(key(a) - key(b));
}

struct Trajectory {
  Tensor w, b;
  std::unique_ptr<optim::Optimizer> opt;
  const json& c;
  explicit Trajectory(const json& cse) : c(cse) {
    w = load(c.at("w0")).requires_grad_();
    b = load(c.at("b0")).requires_grad_();
    opt = make(c.at("type"), c.at("defaults"), c.at("groups"), {{"w", w}, {"b", b}});
  }
  // Sets the step's gradients (times `scale`) and steps, through the scaler when given one.
  void step(size_t k, float scale = 1) {
    const json& g = c.at("grads")[k];
    w.set_grad(load({{"shape", c.at("w0").at("shape")}, {"data", g.at("w")}}) * scale);
    b.set_grad(load({{"shape", c.at("b0").at("shape")}, {"data", g.at("b")}}) * scale);
    opt->step({.inv_scale = 1 / scale});
  }
  std::vector<float> values() const {
    std::vector<float> v = w.to_vector<float>(), bv = b.to_vector<float>();
    v.insert(v.end(), bv.begin(), bv.end());
    return v;
  }
};

std::vector<const json*> cases(const std::string& type) {
  std::vector<const json*> out;
  for (const json& c : fixture().at("optimizers"))
    if (c.at("type") == type) out.push_back(&c);
  return out;
}

void check_trajectories(const std::string& type) {
  const auto cs = cases(type);
  ASSERT_GE(cs.size(), 6u);
  double max_abs = 0;
  int64_t max_ulps = 0;
  for (const json* c : cs) {
    SCOPED_TRACE(c->at("name").get<std::string>());
    Trajectory r(*c);
    const json& traj = c->at("trajectory");
    ASSERT_EQ(traj.size(), c->at("grads").size());
    for (size_t k = 0; k < traj.size(); ++k) {
      r.step(k);
      std::vector<double> want = traj[k].at("w").get<std::vector<double>>();
      for (double v : traj[k].at("b").get<std::vector<double>>()) want.push_back(v);
      const std::vector<float> got = r.values();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        max_abs = std::max(max_abs, std::abs(double(got[i]) - want[i]));
        max_ulps = std::max(max_ulps, ulps(got[i], float(want[i])));
        EXPECT_EQ(got[i], float(want[i])) << "step " << k + 1 << " element " << i;
      }
    }
  }
  std::printf("%s vs torch 1.13: %zu cases, max abs diff %.3g, max %lld ulp\n", type.c_str(), cs.size(), max_abs,
              (long long)max_ulps);
}

}  // namespace

TEST(RMSpropReference, StepsEqualTorchBitForBit) { check_trajectories("RMSprop"); }
TEST(AdagradReference, StepsEqualTorchBitForBit) { check_trajectories("Adagrad"); }

TEST(RMSpropAdagrad, StateDictRoundTripContinuesBitIdentically) {
  for (const char* name : {"rmsprop_centered_momentum", "rmsprop_two_groups", "adagrad_maximize_all",
                           "adagrad_two_groups", "adagrad_initial_accumulator"}) {
    SCOPED_TRACE(name);
    const json* c = nullptr;
    for (const json& x : fixture().at("optimizers"))
      if (x.at("name") == name) c = &x;
    ASSERT_NE(c, nullptr);
    Trajectory a(*c);
    for (size_t k = 0; k < 4; ++k) a.step(k);
    const optim::StateDict saved = a.opt->state_dict();
    const Tensor w_at = a.w.detach().clone(), b_at = a.b.detach().clone();
    for (size_t k = 4; k < 8; ++k) a.step(k);

    // A fresh optimizer with other defaults: everything comes from the state dict.
    json other = c->at("defaults");
    other["lr"] = 0.5;
    Trajectory b(*c);
    b.opt = make(c->at("type"), other, c->at("groups"), {{"w", b.w}, {"b", b.b}});
    {
      mt::NoGradGuard ng;
      b.w.copy_(w_at);
      b.b.copy_(b_at);
    }
    b.opt->load_state_dict(saved);
    EXPECT_EQ(b.opt->state(0)->step, 4);
    for (size_t k = 4; k < 8; ++k) b.step(k);
    EXPECT_EQ(a.values(), b.values());
  }
}

TEST(RMSpropAdagrad, StateKeys) {
  Tensor w = mt::ones({2, 2}).requires_grad_(), b = mt::ones({3}).requires_grad_();
  optim::RMSprop r({{.params = {w}, .momentum = 0.9, .centered = true}, {.params = {b}}}, {.lr = 0.1, .alpha = 0.8});
  w.set_grad(mt::full({2, 2}, 0.5));
  b.set_grad(mt::full({3}, -2.0));
  r.step();
  const optim::StateDict sd = r.state_dict();
  EXPECT_EQ(sd.scalars.at("state.0.step"), 1);
  EXPECT_EQ(sd.scalars.at("param_groups.0.alpha"), 0.8);
  EXPECT_EQ(sd.scalars.at("param_groups.0.centered"), 1);
  EXPECT_EQ(sd.scalars.at("param_groups.1.centered"), 0);
  EXPECT_EQ(sd.scalars.at("param_groups.1.momentum"), 0);
  EXPECT_TRUE(sd.contains("state.0.square_avg") && sd.contains("state.0.momentum_buffer") &&
              sd.contains("state.0.grad_avg"));
  EXPECT_TRUE(sd.contains("state.1.square_avg"));
  EXPECT_FALSE(sd.contains("state.1.momentum_buffer") || sd.contains("state.1.grad_avg"));
  // square_avg = 0.2 g^2, grad_avg = 0.2 g
  EXPECT_EQ(sd.at("state.1.square_avg").to_vector<float>(), std::vector<float>(3, 0.2f * 4.0f));
  EXPECT_EQ(sd.at("state.0.grad_avg").to_vector<float>(), std::vector<float>(4, 0.2f * 0.5f));
  EXPECT_FALSE(sd.scalars.count("param_groups.0.beta1"));

  optim::Adagrad a({w, b}, {.lr = 0.1, .initial_accumulator_value = 0.25});
  a.step();
  const optim::StateDict ad = a.state_dict();
  EXPECT_EQ(ad.at("state.1.sum").to_vector<float>(), std::vector<float>(3, 4.25f));
  EXPECT_EQ(ad.at("state.0.sum").to_vector<float>(), std::vector<float>(4, 0.5f));
  EXPECT_EQ(ad.scalars.at("param_groups.0.initial_accumulator_value"), 0.25);
  EXPECT_EQ(ad.scalars.at("param_groups.0.lr_decay"), 0);
  // A group's own initial_accumulator_value fills its sums (torch 1.13 uses the constructor's).
  Tensor u = mt::ones({2}).requires_grad_();
  optim::Adagrad per_group({{.params = {u}, .initial_accumulator_value = 2.0}}, {.initial_accumulator_value = 0.5});
  u.set_grad(mt::full({2}, 1.0));
  per_group.step();
  EXPECT_EQ(per_group.state(0)->buffers.at("sum").to_vector<float>(), std::vector<float>(2, 3.0f));
}

TEST(RMSpropAdagrad, GradScalerUnscalesInThePassAndSkipsOverflows) {
  // A power-of-two scale and its inverse are exact: the scaled run equals the plain one.
  for (const json& c : fixture().at("optimizers")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    Trajectory plain(c), scaled(c);
    for (size_t k = 0; k < 5; ++k) {
      plain.step(k);
      scaled.step(k, 1024.0f);
    }
    EXPECT_EQ(plain.values(), scaled.values());
  }
  // Through a GradScaler: loss = sum(w * g) has gradient g.
  for (const char* type : {"RMSprop", "Adagrad"}) {
    SCOPED_TRACE(type);
    const json& c = *cases(type).front();
    Trajectory plain(c), scaled(c);
    mt::amp::GradScaler scaler({.init_scale = 256});
    for (size_t k = 0; k < 3; ++k) {
      plain.step(k);
      const json& g = c.at("grads")[k];
      const Tensor gw = load({{"shape", c.at("w0").at("shape")}, {"data", g.at("w")}});
      const Tensor gb = load({{"shape", c.at("b0").at("shape")}, {"data", g.at("b")}});
      scaled.opt->zero_grad();
      scaler.backward(mt::sum(scaled.w * gw) + mt::sum(scaled.b * gb));
      EXPECT_TRUE(scaler.step(*scaled.opt));
      scaler.update();
    }
    EXPECT_EQ(plain.values(), scaled.values());
    // An overflow: nothing changes, steps included.
    const std::vector<float> before = scaled.values();
    scaled.opt->zero_grad();
    scaler.backward(mt::sum(scaled.w) * std::numeric_limits<float>::infinity());
    EXPECT_FALSE(scaler.step(*scaled.opt));
    scaler.update();
    EXPECT_EQ(scaled.values(), before);
    EXPECT_EQ(scaled.opt->state(0)->step, 3);
  }
}

TEST(RMSpropAdagrad, StepRefreshesTheWorkingCopy) {
  for (mt::DType low : {mt::kHalf, mt::kBFloat16}) {
    SCOPED_TRACE(mt::dtype_name(low));
    Tensor w = mt::linspace(-1.3, 2.7, 24).reshape({4, 6}).detach().requires_grad_();
    Tensor v = w.detach().clone().requires_grad_();
    const Tensor cw = mt::amp::working_copy(w, low), cv = mt::amp::working_copy(v, low);
    w.set_grad(mt::linspace(0.5, -0.5, 24).reshape({4, 6}));
    v.set_grad(w.grad().clone());
    optim::RMSprop r({w}, {.lr = 0.05, .momentum = 0.5, .centered = true});
    optim::Adagrad a({v}, {.lr = 0.05});
    const uint64_t casts = mt::amp::working_copy_casts();
    r.step();
    a.step();
    EXPECT_EQ(cw.to_vector<float>(), w.detach().to(low).to_vector<float>());
    EXPECT_EQ(cv.to_vector<float>(), v.detach().to(low).to_vector<float>());
    EXPECT_NE(cw.to_vector<float>(), mt::linspace(-1.3, 2.7, 24).to(low).to_vector<float>());
    EXPECT_TRUE(mt::amp::working_copy(w, low).is_same(cw));
    EXPECT_EQ(mt::amp::working_copy_casts(), casts);
  }
}

TEST(RMSpropAdagrad, Float64MastersFollowTheSameFormula) {
  // One RMSprop (centered, momentum, wd) and one Adagrad step in float64, against the formula.
  Tensor w = mt::from_vector<double>({1.0, -2.0}).requires_grad_();
  w.set_grad(mt::from_vector<double>({0.5, 0.25}));
  optim::RMSprop r({w}, {.lr = 0.1, .alpha = 0.9, .eps = 1e-3, .weight_decay = 0.1, .momentum = 0.5, .centered = true});
  r.step();
  const std::vector<double> got = w.to_vector<double>();
  const double w0[2] = {1.0, -2.0}, g0[2] = {0.5, 0.25};
  for (int i = 0; i < 2; ++i) {
    const double g = g0[i] + 0.1 * w0[i];
    const double sq = 0.1 * g * g, avg = 0.1 * g;
    const double buf = g / (std::sqrt(sq - avg * avg) + 1e-3);
    EXPECT_NEAR(got[i], w0[i] - 0.1 * buf, 1e-14);
  }
  Tensor v = mt::from_vector<double>({1.0, -2.0}).requires_grad_();
  optim::Adagrad a({v}, {.lr = 0.1, .lr_decay = 0.5, .initial_accumulator_value = 1});
  for (int t = 1; t <= 2; ++t) {
    v.set_grad(mt::from_vector<double>({0.5, 0.25}));
    a.step();
  }
  const std::vector<double> gv = v.to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    double x = w0[i], sum = 1;
    for (int t = 1; t <= 2; ++t) {
      sum += g0[i] * g0[i];
      x -= 0.1 / (1 + (t - 1) * 0.5) * g0[i] / (std::sqrt(sum) + 1e-10);
    }
    EXPECT_NEAR(gv[i], x, 1e-14);
  }
}

TEST(RMSpropAdagrad, Errors) {
  Tensor w = mt::ones({2}).requires_grad_();
  EXPECT_ERROR(optim::RMSprop({w}, {.lr = -1}), HasSubstr("RMSprop"), HasSubstr("learning rate"));
  EXPECT_ERROR(optim::RMSprop({w}, {.alpha = -0.5}), HasSubstr("RMSprop"), HasSubstr("alpha"));
  EXPECT_ERROR(optim::RMSprop({w}, {.eps = -1}), HasSubstr("epsilon"));
  EXPECT_ERROR(optim::RMSprop({w}, {.momentum = -0.1}), HasSubstr("momentum"));
  EXPECT_ERROR(optim::RMSprop({w}, {.weight_decay = -0.1}), HasSubstr("weight_decay"));
  EXPECT_ERROR(optim::Adagrad({w}, {.lr_decay = -1}), HasSubstr("Adagrad"), HasSubstr("lr_decay"));
  EXPECT_ERROR(optim::Adagrad({w}, {.initial_accumulator_value = -1}), HasSubstr("initial_accumulator_value"));
  EXPECT_ERROR(optim::Adagrad({w}, {.eps = -1}), HasSubstr("epsilon"));
  // Hyper-parameters of other optimizers are rejected per group.
  EXPECT_ERROR(optim::RMSprop(std::vector<optim::ParamGroup>{{.params = {w}, .beta1 = 0.9}}),
               HasSubstr("unknown hyper-parameter 'beta1'"));
  EXPECT_ERROR(optim::Adagrad(std::vector<optim::ParamGroup>{{.params = {w}, .momentum = 0.9}}),
               HasSubstr("unknown hyper-parameter 'momentum'"));
  EXPECT_ERROR(optim::Adam(std::vector<optim::ParamGroup>{{.params = {w}, .centered = true}}),
               HasSubstr("unknown hyper-parameter 'centered'"));

  // A state dict without the buffer the loading group needs is refused before anything changes.
  optim::RMSprop plain({w}, {.lr = 0.1});
  w.set_grad(mt::ones({2}));
  plain.step();
  optim::StateDict sd = plain.state_dict();
  Tensor v = mt::ones({2}).requires_grad_();
  optim::RMSprop with_momentum({v}, {.lr = 0.1, .momentum = 0.9});
  sd.scalars["param_groups.0.momentum"] = 0.9;
  EXPECT_ERROR(with_momentum.load_state_dict(sd), HasSubstr("missing key 'state.0.momentum_buffer'"));
  EXPECT_EQ(with_momentum.state(0), nullptr);
  optim::Adagrad ad({v});
  EXPECT_ERROR(ad.load_state_dict(plain.state_dict()), HasSubstr("Adagrad.load_state_dict"));
}

TEST(RMSpropAdagrad, CheckpointFileRoundTrip) {
  // Through save_checkpoint / load_checkpoint (safetensors file): the resumed run continues bit for bit.
  const std::string path = ::testing::TempDir() + "/optim_extra_ckpt.safetensors";
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which == 0 ? "RMSprop" : "Adagrad");
    auto make_opt = [&](mt::nn::Linear& net) -> std::unique_ptr<optim::Optimizer> {
      if (which == 0)
        return std::make_unique<optim::RMSprop>(net.parameters(),
                                                optim::RMSpropOptions{.lr = 0.01, .momentum = 0.9, .centered = true});
      return std::make_unique<optim::Adagrad>(
          net.parameters(), optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.1, .initial_accumulator_value = 0.2});
    };
    mt::manual_seed(7);
    mt::nn::Linear a_net(4, 3), b_net(4, 3);
    auto a = make_opt(a_net), b = make_opt(b_net);
    const Tensor x = mt::linspace(-1, 1, 8).reshape({2, 4});
    auto train = [&](mt::nn::Linear& net, optim::Optimizer& opt) {
      opt.zero_grad();
      mt::sum(mt::square(net.forward(x))).backward();
      opt.step();
    };
    for (int i = 0; i < 3; ++i) train(a_net, *a);
    optim::save_checkpoint(path, {.model = &a_net, .optimizer = a.get()});
    optim::load_checkpoint(path, {.model = &b_net, .optimizer = b.get()});
    for (int i = 0; i < 3; ++i) {
      train(a_net, *a);
      train(b_net, *b);
    }
    EXPECT_EQ(a_net.weight.to_vector<float>(), b_net.weight.to_vector<float>());
    EXPECT_EQ(b->state(0)->step, 6);
  }
}
