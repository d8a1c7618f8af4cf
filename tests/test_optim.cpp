// Optimizers, LR schedulers and gradient clipping. Trajectories and lr sequences are
// replayed from tests/fixtures/reference_optim.json (torch 1.13, tools/gen_reference_optim.py);
// the rest checks behaviour: zero_grad, state_dict round trips and validation, the fused
// AMP working-copy refresh, loss-scale unscaling and found-inf skipping, clip_grad_norm_.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

namespace mt = mantissa;
namespace optim = mantissa::optim;
using json = nlohmann::json;
using mt::Tensor;

namespace {

const json& fixture() {
  static const json doc = [] {
    std::ifstream in(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_optim.json");
    if (!in) throw std::runtime_error("cannot open tests/fixtures/reference_optim.json");
    return json::parse(in);
  }();
  return doc;
}

Tensor load_tensor(const json& j, mt::DType dtype = mt::kFloat32) {
  return mt::from_vector(j.at("data").get<std::vector<double>>(), j.at("shape").get<mt::Shape>(), {.dtype = dtype});
}

// The fixture's linear regression: loss = mean((x @ w.T + b - y)^2).
struct Problem {
  Tensor x, y, w, b;
  explicit Problem(mt::DType dtype = mt::kFloat32) {
    const json& p = fixture().at("problem");
    x = load_tensor(p.at("x"), dtype);
    y = load_tensor(p.at("y"), dtype);
    w = load_tensor(p.at("w0"), dtype).requires_grad_();
    b = load_tensor(p.at("b0"), dtype).requires_grad_();
  }
  Tensor loss() const { return mt::mean(mt::square(mt::matmul(x, w.t()) + b - y)); }
  // zero_grad; backward of loss * scale; step with the matching inverse scale.
  void train_step(optim::Optimizer& opt, float scale = 1) const {
    opt.zero_grad();
    (loss() * scale).backward();
    opt.step({.inv_scale = 1 / scale});
  }
  std::vector<float> values() const {
    std::vector<float> v = w.to_vector<float>(), bv = b.to_vector<float>();
    v.insert(v.end(), bv.begin(), bv.end());
    return v;
  }
};

bool flag(const json& d, const char* key) { return d.contains(key) && d.at(key).get<bool>(); }

optim::SGDOptions sgd_options(const json& d) {
  return {.lr = d.value("lr", 1e-3),
          .momentum = d.value("momentum", 0.0),
          .dampening = d.value("dampening", 0.0),
          .weight_decay = d.value("weight_decay", 0.0),
          .nesterov = flag(d, "nesterov"),
          .maximize = flag(d, "maximize")};
}

template <typename Options>
Options adam_options(const json& d, Options o) {
  o.lr = d.value("lr", o.lr);
  if (d.contains("betas")) o.betas = {d.at("betas")[0].get<double>(), d.at("betas")[1].get<double>()};
  o.eps = d.value("eps", o.eps);
  o.weight_decay = d.value("weight_decay", o.weight_decay);
  o.amsgrad = flag(d, "amsgrad");
  o.maximize = flag(d, "maximize");
  return o;
}

// Builds the optimizer a fixture case describes over params {"w": w, "b": b}.
std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& type, const json& defaults, const json& groups_json,
                                                 const std::map<std::string, Tensor>& by_name) {
  std::vector<optim::ParamGroup> groups;
  for (const json& gj : groups_json) {
    optim::ParamGroup g;
    for (const auto& [key, value] : gj.items()) {
      if (key == "params") {
        for (const json& p : value) g.params.push_back(by_name.at(p.get<std::string>()));
      } else if (key == "lr") {
        g.lr = value.get<double>();
      } else if (key == "weight_decay") {
        g.weight_decay = value.get<double>();
      } else if (key == "betas") {
        g.beta1 = value[0].get<double>();
        g.beta2 = value[1].get<double>();
      } else if (key == "momentum") {
        g.momentum = value.get<double>();
      } else if (key == "dampening") {
        g.dampening = value.get<double>();
      } else if (key == "eps") {
        g.eps = value.get<double>();
      } else if (key == "nesterov") {
        g.nesterov = value.get<bool>();
      } else if (key == "amsgrad") {
        g.amsgrad = value.get<bool>();
      } else if (key == "maximize") {
        g.maximize = value.get<bool>();
      } else {
        ADD_FAILURE() << "unknown parameter-group key in the fixture: " << key;
      }
    }
    groups.push_back(std::move(g));
  }
  if (type == "SGD") return std::make_unique<optim::SGD>(std::move(groups), sgd_options(defaults));
  if (type == "Adam")
    return std::make_unique<optim::Adam>(std::move(groups), adam_options(defaults, optim::AdamOptions{}));
  if (type == "AdamW")
    return std::make_unique<optim::AdamW>(std::move(groups), adam_options(defaults, optim::AdamWOptions{}));
  throw std::runtime_error("unknown optimizer " + type);
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

// ------------------------------------------------------------------ PyTorch references

TEST(OptimReference, Trajectories) {
  for (const json& c : fixture().at("optimizers")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    Problem p;
    auto opt = make_optimizer(c.at("type"), c.at("defaults"), c.at("groups"), {{"w", p.w}, {"b", p.b}});
    const json& traj = c.at("trajectory");
    for (size_t step = 0; step < traj.size(); ++step) {
      p.train_step(*opt);
      const std::string what = c.at("name").get<std::string>() + " step " + std::to_string(step + 1);
      expect_close(values(p.w), traj[step].at("w").get<std::vector<double>>(), 2e-6, what + " w");
      expect_close(values(p.b), traj[step].at("b").get<std::vector<double>>(), 2e-6, what + " b");
    }
  }
}

TEST(OptimReference, SchedulerSequences) {
  for (const json& c : fixture().at("schedulers")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const json& oj = c.at("optimizer");
    std::vector<Tensor> params;
    json groups = json::array();
    for (const json& lr : oj.at("group_lrs")) {
      params.push_back(mt::zeros({1}).requires_grad_());
      groups.push_back({{"params", {std::to_string(params.size() - 1)}}, {"lr", lr}});
    }
    std::map<std::string, Tensor> by_name;
    for (size_t i = 0; i < params.size(); ++i) by_name[std::to_string(i)] = params[i];
    auto opt = make_optimizer(oj.at("type"), oj.at("defaults"), groups, by_name);

    const json& a = c.at("args");
    const std::string type = c.at("type");
    std::unique_ptr<optim::LRScheduler> sched;
    if (type == "StepLR") {
      sched = std::make_unique<optim::StepLR>(*opt, a.at("step_size").get<int64_t>(), a.at("gamma").get<double>());
    } else if (type == "WarmupCosineLR") {
      sched = std::make_unique<optim::WarmupCosineLR>(*opt, a.at("warmup_steps").get<int64_t>(),
                                                      a.at("total_steps").get<int64_t>(), a.at("min_lr").get<double>());
    } else if (type == "OneCycleLR") {
      optim::OneCycleOptions o;
      o.pct_start = a.value("pct_start", o.pct_start);
      o.anneal_strategy = a.value("anneal_strategy", o.anneal_strategy);
      o.cycle_momentum = a.value("cycle_momentum", o.cycle_momentum);
      o.base_momentum = a.value("base_momentum", o.base_momentum);
      o.max_momentum = a.value("max_momentum", o.max_momentum);
      o.div_factor = a.value("div_factor", o.div_factor);
      o.final_div_factor = a.value("final_div_factor", o.final_div_factor);
      o.three_phase = a.value("three_phase", o.three_phase);
      const int64_t total = a.at("total_steps");
      if (a.at("max_lr").is_array())
        sched = std::make_unique<optim::OneCycleLR>(*opt, a.at("max_lr").get<std::vector<double>>(), total, o);
      else
        sched = std::make_unique<optim::OneCycleLR>(*opt, a.at("max_lr").get<double>(), total, o);
    } else {
      FAIL() << "unknown scheduler " << type;
    }

    const json& lrs = c.at("lrs");
    for (size_t t = 0; t < lrs.size(); ++t) {
      if (t > 0) sched->step();
      const auto want = lrs[t].get<std::vector<double>>();
      const auto& got = sched->get_last_lr();
      ASSERT_EQ(got.size(), want.size());
      for (size_t g = 0; g < want.size(); ++g) {
        EXPECT_NEAR(got[g], want[g], 1e-12 * std::max(1e-3, std::abs(want[g]))) << name << " step " << t;
        EXPECT_EQ(*opt->param_groups()[g].lr, got[g]);
        if (c.contains("momentum")) {
          const auto& grp = opt->param_groups()[g];
          const double m = grp.beta1 ? *grp.beta1 : *grp.momentum;
          EXPECT_NEAR(m, c.at("momentum")[t][g].get<double>(), 1e-12) << name << " momentum, step " << t;
        }
      }
    }
  }
}

// ------------------------------------------------------------------ optimizer behaviour

TEST(Optimizer, ZeroGrad) {
  Tensor w = mt::ones({3}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  (w * w).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  const Tensor g = w.grad();
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(w.grad().is_same(g));  // zeroed in place, same tensor
  EXPECT_EQ(values(w.grad()), (std::vector<float>{0, 0, 0}));
  opt.zero_grad();
  EXPECT_FALSE(w.grad().defined());
  opt.step();  // no gradient: nothing happens, no state
  EXPECT_EQ(values(w), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(opt.state(0), nullptr);
}

TEST(Optimizer, GroupsResolveDefaultsAndLrChangesApply) {
  Tensor a = mt::ones({2}).requires_grad_(), b = mt::ones({2}).requires_grad_();
  optim::SGD opt({{.params = {a}, .lr = 0.5}, {.params = {b}, .weight_decay = 0.1}}, {.lr = 0.1, .momentum = 0.9});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(*opt.param_groups()[0].lr, 0.5);
  EXPECT_EQ(*opt.param_groups()[0].weight_decay, 0.0);
  EXPECT_EQ(*opt.param_groups()[1].lr, 0.1);
  EXPECT_EQ(opt.param_groups()[1].get("momentum"), 0.9);
  EXPECT_EQ(opt.parameters().size(), 2u);
  opt.param_groups()[0].lr = 0.25;
  opt.param_groups()[0].set("momentum", 0);
  a.set_grad(mt::ones({2}));
  opt.step();
  EXPECT_EQ(values(a), (std::vector<float>{0.75f, 0.75f}));
  EXPECT_EQ(opt.state(0)->step, 1);
  EXPECT_EQ(opt.state(0)->buffers.count("momentum_buffer"), 0u);  // momentum 0: no buffer
  EXPECT_EQ(opt.state(1), nullptr);                               // b had no gradient
}

TEST(Optimizer, RejectsBadParametersAndHyperParameters) {
  Tensor w = mt::ones({2}).requires_grad_();
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{}, {.lr = 0.1}), mt::Error);
  EXPECT_THROW(optim::SGD({w, w}, {.lr = 0.1}), mt::Error);
  EXPECT_THROW(optim::SGD({mt::ones({2}, {.dtype = mt::kHalf}).requires_grad_()}, {.lr = 0.1}), mt::Error);
  EXPECT_THROW(optim::SGD({(w * 2)}, {.lr = 0.1}), mt::Error);  // not a leaf
  EXPECT_THROW(optim::SGD({w}, {.lr = -1}), mt::Error);
  EXPECT_THROW(optim::SGD({w}, {.lr = 0.1, .nesterov = true}), mt::Error);  // nesterov needs momentum
  EXPECT_THROW(optim::SGD({w}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}), mt::Error);
  EXPECT_THROW(optim::Adam({w}, {.betas = {1.0, 0.999}}), mt::Error);
  EXPECT_THROW(optim::Adam({w}, {.eps = -1}), mt::Error);
  EXPECT_THROW(optim::Adam({{.params = {w}, .momentum = 0.9}}), mt::Error);  // not an Adam option
  optim::SGD opt({w}, {.lr = 0.1});
  EXPECT_THROW(opt.add_param_group({.params = {w}}), mt::Error);  // already in a group
  opt.param_groups()[0].lr = -0.5;
  w.set_grad(mt::ones({2}));
  EXPECT_THROW(opt.step(), mt::Error);
  EXPECT_EQ(values(w), (std::vector<float>{1, 1}));
}

TEST(Optimizer, AddParamGroup) {
  Tensor a = mt::ones({2}).requires_grad_(), b = mt::ones({3}).requires_grad_();
  optim::Adam opt({a}, {.lr = 0.1});
  opt.add_param_group({.params = {b}, .lr = 0.01});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(*opt.param_groups()[1].lr, 0.01);
  EXPECT_EQ(opt.param_groups()[1].get("beta2"), 0.999);
  b.set_grad(mt::ones({3}));
  opt.step();
  ASSERT_NE(opt.state(1), nullptr);
  // First Adam step moves each element by lr * g / (|g| + eps).
  for (float v : values(b)) EXPECT_NEAR(v, 1 - 0.01, 1e-7);
}

TEST(Optimizer, NonContiguousGradientAndFloat64Master) {
  Tensor w = mt::zeros({2, 3}, {.dtype = mt::kDouble}).requires_grad_();
  Tensor g = mt::from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2}, {.dtype = mt::kDouble}).t();  // [2, 3] strided
  ASSERT_FALSE(g.is_contiguous());
  w.set_grad(g);
  const double lr = 1e-3, eps = 1e-8;
  optim::Adam opt({w}, {.lr = lr, .eps = eps});
  opt.step();
  const std::vector<double> gv = g.to_vector<double>(), wv = w.to_vector<double>();
  for (size_t i = 0; i < wv.size(); ++i) EXPECT_NEAR(wv[i], -lr * gv[i] / (gv[i] + eps), 1e-15);

  Tensor v = mt::ones({2}, {.dtype = mt::kDouble}).requires_grad_();
  optim::SGD sgd({v}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.5});
  v.set_grad(mt::full({2}, 2.0, {.dtype = mt::kDouble}));
  sgd.step();  // g = 2 + 0.5 * 1 = 2.5, buf = g, w = 1 - 0.25
  sgd.step();  // g = 2 + 0.5 * 0.75 = 2.375, buf = 0.9 * 2.5 + 2.375 = 4.625, w = 0.75 - 0.4625
  for (double x : v.to_vector<double>()) EXPECT_NEAR(x, 0.2875, 1e-15);
}

// ------------------------------------------------------------------ the AMP hook

TEST(OptimizerAmp, FusedStepRefreshesWorkingCopy) {
  for (mt::DType low : {mt::kHalf, mt::kBFloat16}) {
    SCOPED_TRACE(mt::dtype_name(low));
    Tensor w = mt::linspace(-1.3, 2.7, 24).reshape({4, 6}).detach().requires_grad_();
    const Tensor copy = mt::amp::working_copy(w, low);
    ASSERT_EQ(copy.dtype(), low);
    w.set_grad(mt::linspace(0.5, -0.5, 24).reshape({4, 6}));
    optim::AdamW opt({w}, {.lr = 0.05});
    const uint64_t casts = mt::amp::working_copy_casts();
    const uint64_t version = w.version();
    opt.step();
    EXPECT_GT(w.version(), version);
    // The copy holds the rounded new master, written by the update pass itself.
    const Tensor rounded = w.detach().to(low);
    EXPECT_EQ(values(copy), values(rounded));
    EXPECT_NE(values(copy), values(mt::linspace(-1.3, 2.7, 24).to(low)));
    // And autocast reuses it: no new cast.
    const Tensor again = mt::amp::working_copy(w, low);
    EXPECT_TRUE(again.is_same(copy));
    EXPECT_EQ(mt::amp::working_copy_casts(), casts);
  }
}

TEST(OptimizerAmp, AutocastTrainingReusesWorkingCopies) {
  Problem p;
  // w as [in, out] so that the parameter itself (not a transposed view) enters matmul.
  Tensor w = p.w.detach().t().contiguous().requires_grad_();
  optim::SGD opt({w, p.b}, {.lr = 0.05, .momentum = 0.9});
  const uint64_t casts_before = mt::amp::working_copy_casts();
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      mt::amp::Autocast ac(mt::kHalf);
      loss = mt::mean(mt::square(mt::matmul(p.x, w) + p.b - p.y));
    }
    loss.backward();
    ASSERT_EQ(w.grad().dtype(), mt::kFloat32);
    opt.step();
    // One cast, in the first forward; later forwards use the copy the step refreshed.
    EXPECT_EQ(mt::amp::working_copy_casts(), casts_before + 1) << "step " << step;
  }
  EXPECT_EQ(values(mt::amp::working_copy(w, mt::kHalf)), values(w.detach().to(mt::kHalf)));
}

TEST(OptimizerAmp, InverseScaleUnscalesInThePass) {
  // A power-of-two loss scale and its inverse are exact: the trajectory is bit-identical.
  for (const char* type : {"SGD", "Adam"}) {
    SCOPED_TRACE(type);
    const json defaults = {{"lr", 0.05}, {"momentum", 0.9}};
    const json adam_defaults = {{"lr", 0.05}};
    const json groups = json::array({{{"params", {"w", "b"}}}});
    Problem plain, scaled;
    auto o1 = make_optimizer(type, std::string(type) == "SGD" ? defaults : adam_defaults, groups,
                             {{"w", plain.w}, {"b", plain.b}});
    auto o2 = make_optimizer(type, std::string(type) == "SGD" ? defaults : adam_defaults, groups,
                             {{"w", scaled.w}, {"b", scaled.b}});
    for (int i = 0; i < 5; ++i) {
      plain.train_step(*o1);
      scaled.train_step(*o2, 1024.0f);
    }
    EXPECT_EQ(plain.values(), scaled.values());
  }
}

TEST(OptimizerAmp, FoundInfSkipsTheStep) {
  Problem p;
  optim::Adam opt({p.w, p.b}, {.lr = 0.05});
  p.train_step(opt);
  const std::vector<float> before = p.values();
  const optim::StateDict sd = opt.state_dict();
  opt.zero_grad();
  p.loss().backward();
  opt.step({.found_inf = mt::ones({1})});
  EXPECT_EQ(p.values(), before);
  EXPECT_EQ(opt.state(0)->step, 1);
  EXPECT_EQ(values(opt.state(0)->buffers.at("exp_avg")), values(sd.at("state.0.exp_avg")));
  opt.step({.found_inf = mt::zeros({1})});
  EXPECT_NE(p.values(), before);
  EXPECT_EQ(opt.state(0)->step, 2);
}

// ------------------------------------------------------------------ state dicts

namespace {

// Runs `first` steps, saves, runs `second` more; then rebuilds from the save point and checks
// that the resumed run reproduces the original bit for bit.
void check_round_trip(const std::string& type, const json& defaults) {
  SCOPED_TRACE(type);
  const json groups = json::array({{{"params", {"w"}}}, {{"params", {"b"}}, {"lr", 0.01}}});
  Problem a;
  auto opt_a = make_optimizer(type, defaults, groups, {{"w", a.w}, {"b", a.b}});
  for (int i = 0; i < 4; ++i) a.train_step(*opt_a);
  const optim::StateDict saved = opt_a.get()->state_dict();
  const std::vector<float> at_save = a.values();
  for (int i = 0; i < 4; ++i) a.train_step(*opt_a);

  Problem b;
  {
    mt::NoGradGuard ng;
    b.w.copy_(mt::from_vector(std::vector<float>(at_save.begin(), at_save.begin() + 6), {2, 3}));
    b.b.copy_(mt::from_vector(std::vector<float>(at_save.begin() + 6, at_save.end()), {2}));
  }
  auto opt_b = make_optimizer(type, {{"lr", 0.5}}, groups, {{"w", b.w}, {"b", b.b}});  // other lr: loaded
  opt_b->load_state_dict(saved);
  EXPECT_EQ(*opt_b->param_groups()[1].lr, 0.01);
  for (int i = 0; i < 4; ++i) b.train_step(*opt_b);
  EXPECT_EQ(a.values(), b.values());
}

}  // namespace

TEST(OptimizerStateDict, RoundTripContinuesBitIdentically) {
  check_round_trip("SGD", {{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}});
  check_round_trip("Adam", {{"lr", 0.05}, {"amsgrad", true}});
  check_round_trip("AdamW", {{"lr", 0.05}});
}

TEST(OptimizerStateDict, KeysAndDeepCopy) {
  Problem p;
  optim::Adam opt({{.params = {p.w}}, {.params = {p.b}, .lr = 0.01}}, {.lr = 0.05});
  p.train_step(opt);
  const optim::StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.scalars.at("state.0.step"), 1);
  EXPECT_EQ(sd.scalars.at("param_groups.1.lr"), 0.01);
  EXPECT_EQ(sd.scalars.at("param_groups.0.num_params"), 1);
  EXPECT_EQ(sd.scalars.at("param_groups.0.beta2"), 0.999);
  EXPECT_EQ(sd.at("state.0.exp_avg").sizes(), (mt::Shape{2, 3}));
  EXPECT_EQ(sd.at("state.1.exp_avg_sq").sizes(), (mt::Shape{2}));
  EXPECT_EQ(sd.contains("state.0.max_exp_avg_sq"), false);
  const std::vector<float> saved = values(sd.at("state.0.exp_avg"));
  p.train_step(opt);
  EXPECT_EQ(values(sd.at("state.0.exp_avg")), saved);  // a copy, not the live buffer
}

TEST(OptimizerStateDict, LoadValidatesBeforeChangingAnything) {
  Problem p;
  optim::Adam opt({p.w, p.b}, {.lr = 0.05});
  p.train_step(opt);
  const optim::StateDict good = opt.state_dict();

  auto expect_error = [&](const optim::StateDict& bad, const std::string& key) {
    try {
      opt.load_state_dict(bad);
      ADD_FAILURE() << "no error for " << key;
    } catch (const mt::Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
    // Nothing changed.
    const optim::StateDict now = opt.state_dict();
    EXPECT_EQ(now.scalars, good.scalars);
    for (const auto& [k, t] : good) EXPECT_EQ(values(now.at(k)), values(t)) << k;
  };

  optim::StateDict bad = good;
  bad.insert("state.0.exp_avg", mt::zeros({3, 2}));
  bad.scalars["param_groups.0.lr"] = 123;
  expect_error(bad, "state.0.exp_avg");

  bad = good;
  bad.insert("state.0.bogus", mt::zeros({2, 3}));
  expect_error(bad, "state.0.bogus");

  bad = good;
  bad.insert("state.2.exp_avg", mt::zeros({2, 3}));
  expect_error(bad, "state.2.exp_avg");

  bad = good;
  bad.erase("state.1.exp_avg_sq");
  expect_error(bad, "state.1.exp_avg_sq");

  bad = good;
  bad.scalars.erase("param_groups.0.beta1");
  expect_error(bad, "param_groups.0.beta1");

  bad = good;
  bad.scalars["param_groups.0.num_params"] = 1;
  expect_error(bad, "param_groups.0.num_params");

  bad = good;
  bad.scalars["param_groups.1.lr"] = 0.1;
  expect_error(bad, "param_groups.1.lr");  // there is no group 1

  bad = good;
  bad.scalars["state.0.step"] = 1.5;
  expect_error(bad, "state.0.step");

  bad = good;
  bad.scalars["param_groups.0.beta1"] = 2;
  expect_error(bad, "param_groups.0");

  bad = good;
  bad.insert("state.0.exp_avg", mt::zeros({2, 3}, {.dtype = mt::kInt64}));
  expect_error(bad, "state.0.exp_avg");

  // A state dict of another optimizer type.
  Problem q;
  optim::SGD sgd({q.w, q.b}, {.lr = 0.1, .momentum = 0.9});
  q.train_step(sgd);
  expect_error(sgd.state_dict(), "unknown key");

  // The good one loads, converting dtype (float64 state into float32 params).
  optim::StateDict wide = good;
  for (auto& [k, t] : wide) t = t.to(mt::kDouble);
  opt.load_state_dict(wide);
  EXPECT_EQ(opt.state(0)->buffers.at("exp_avg").dtype(), mt::kFloat32);
}

// ------------------------------------------------------------------ schedulers

TEST(LRScheduler, StateDictResumes) {
  auto make = [](std::vector<Tensor> params) {
    return std::make_unique<optim::SGD>(
        std::vector<optim::ParamGroup>{{.params = {params[0]}}, {.params = {params[1]}, .lr = 0.05}},
        optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  };
  std::vector<Tensor> pa = {mt::zeros({1}).requires_grad_(), mt::zeros({1}).requires_grad_()};
  auto oa = make(pa);
  optim::OneCycleLR sa(*oa, {0.1, 0.05}, 30);
  for (int i = 0; i < 7; ++i) sa.step();
  const optim::StateDict osd = oa->state_dict(), ssd = sa.state_dict();
  EXPECT_EQ(ssd.scalars.at("last_epoch"), 7);
  EXPECT_EQ(ssd.scalars.at("max_lr.1"), 0.05);
  std::vector<std::vector<double>> want;
  for (int i = 0; i < 10; ++i) {
    sa.step();
    want.push_back(sa.get_last_lr());
    want.back().push_back(oa->param_groups()[0].get("momentum"));
  }

  std::vector<Tensor> pb = {mt::zeros({1}).requires_grad_(), mt::zeros({1}).requires_grad_()};
  auto ob = make(pb);
  optim::OneCycleLR sb(*ob, 1.0, 30, {.pct_start = 0.5});  // settings are restored from the dict
  ob->load_state_dict(osd);
  sb.load_state_dict(ssd);
  EXPECT_EQ(sb.last_epoch(), 7);
  for (int i = 0; i < 10; ++i) {
    sb.step();
    std::vector<double> got = sb.get_last_lr();
    got.push_back(ob->param_groups()[0].get("momentum"));
    EXPECT_EQ(got, want[i]) << "step " << i;
  }
}

TEST(LRScheduler, Errors) {
  Tensor w = mt::zeros({1}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  EXPECT_THROW(optim::StepLR(opt, 0), mt::Error);
  EXPECT_THROW(optim::WarmupCosineLR(opt, 10, 5), mt::Error);
  EXPECT_THROW(optim::OneCycleLR(opt, 0.1, 10, {.anneal_strategy = "exp"}), mt::Error);
  EXPECT_THROW(optim::OneCycleLR(opt, std::vector<double>{0.1, 0.2}, 10), mt::Error);

  optim::OneCycleLR one(opt, 0.1, 3);
  for (int i = 0; i < 3; ++i) one.step();  // last_epoch 3 == total_steps is allowed, as in PyTorch
  EXPECT_THROW(one.step(), mt::Error);
  EXPECT_EQ(one.last_epoch(), 3);

  optim::StepLR step(opt, 2, 0.5);
  optim::StateDict sd = step.state_dict();
  sd.scalars["bogus"] = 1;
  EXPECT_THROW(step.load_state_dict(sd), mt::Error);
  sd = step.state_dict();
  sd.scalars.erase("gamma");
  try {
    step.load_state_dict(sd);
    ADD_FAILURE() << "no error";
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("gamma"), std::string::npos) << e.what();
  }
  sd = step.state_dict();
  sd.scalars["step_size"] = 0;
  EXPECT_THROW(step.load_state_dict(sd), mt::Error);
  EXPECT_EQ(step.state_dict().scalars.at("step_size"), 2);  // rolled back
}

// ------------------------------------------------------------------ gradient clipping

TEST(ClipGrad, NormValuesAndScaling) {
  Tensor a = mt::zeros({2}).requires_grad_(), b = mt::zeros({1, 1}).requires_grad_();
  Tensor none = mt::zeros({3}).requires_grad_();  // no gradient: ignored
  auto set = [&] {
    a.set_grad(mt::from_vector<float>({3, -4}, {2}));
    b.set_grad(mt::from_vector<float>({12}, {1, 1}));
  };
  set();
  Tensor total = optim::clip_grad_norm_({a, b, none}, 6.5);
  EXPECT_EQ(total.dim(), 0);
  EXPECT_NEAR(total.item<double>(), 13.0, 1e-6);
  const double coef = 6.5 / (13.0 + 1e-6);
  EXPECT_NEAR(values(a.grad())[0], 3 * coef, 1e-6);
  EXPECT_NEAR(values(a.grad())[1], -4 * coef, 1e-6);
  EXPECT_NEAR(values(b.grad())[0], 12 * coef, 1e-6);

  set();  // below the limit: unchanged
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100).item<double>(), 13.0, 1e-6);
  EXPECT_EQ(values(a.grad()), (std::vector<float>{3, -4}));

  set();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(optim::clip_grad_norm_({a, b}, 6, inf).item<double>(), 12);
  EXPECT_NEAR(values(b.grad())[0], 12 * 6 / (12 + 1e-6), 1e-5);

  set();
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100, 1).item<double>(), 19, 1e-6);
  set();
  EXPECT_NEAR(optim::clip_grad_norm_({a, b}, 100, 3).item<double>(), std::cbrt(27.0 + 64 + 1728), 1e-4);

  EXPECT_EQ(optim::clip_grad_norm_({none}, 1).item<double>(), 0);

  Tensor d = mt::zeros({2}, {.dtype = mt::kDouble}).requires_grad_();
  d.set_grad(mt::from_vector<double>({1e-3, 2e-3}, {2}, {.dtype = mt::kDouble}));
  Tensor td = optim::clip_grad_norm_({d}, 1);
  EXPECT_EQ(td.dtype(), mt::kDouble);
  EXPECT_NEAR(td.item<double>(), std::sqrt(5e-6), 1e-18);

  a.set_grad(mt::from_vector<float>({std::numeric_limits<float>::infinity(), 1}, {2}));
  EXPECT_THROW(optim::clip_grad_norm_({a}, 1, 2, /*error_if_nonfinite=*/true), mt::Error);
  EXPECT_TRUE(std::isinf(optim::clip_grad_norm_({a}, 1).item<double>()));

  a.set_grad(mt::from_vector<float>({3, -4}, {2}));
  optim::clip_grad_value_({a}, 3.5);
  EXPECT_EQ(values(a.grad()), (std::vector<float>{3, -3.5}));
}
