// ExponentialLR, MultiStepLR, CosineAnnealingLR, LambdaLR and ReduceLROnPlateau against torch 1.13
// (tests/fixtures/reference_new_optim.json from tools/gen_reference_new_optim.py): the learning
// rate of two parameter groups at every step, a state-dict round trip in the middle of the run,
// and the errors.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace optim = mt::optim;
using json = nlohmann::json;
using testing::HasSubstr;

namespace {

const json& fixture() { return mt::test::load_fixture("reference_new_optim.json", "tools/gen_reference_new_optim.py"); }

std::vector<double> metrics() {
  std::vector<double> m;
  for (const json& v : fixture().at("metrics"))
    m.push_back(v.is_string() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>());
  return m;
}

// Two groups, lr 0.1 and 0.05, as the generator's.
struct TwoGroups {
  std::vector<mt::Tensor> p{mt::zeros({1}, {.requires_grad = true}), mt::zeros({1}, {.requires_grad = true})};
  optim::SGD opt{std::vector<optim::ParamGroup>{{.params = {p[0]}, .lr = 0.1}, {.params = {p[1]}, .lr = 0.05}},
                 {.lr = 0.1}};
};

using Make = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

std::vector<double> lrs(const optim::Optimizer& o) {
  std::vector<double> r;
  for (const auto& g : o.param_groups()) r.push_back(g.get("lr"));
  return r;
}

void expect_lrs(const std::vector<double>& got, const json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  // Within 1e-13 relative: the recursive cosine form drifts by a few ulps over 30 steps.
  for (size_t g = 0; g < got.size(); ++g) {
    const double w = want[g].get<double>();
    EXPECT_NEAR(got[g], w, 1e-13 * std::fabs(w)) << what << " group " << g;
  }
}

// The whole schedule, then again with a state-dict round trip (optimizer and scheduler) at step 12.
// A plateau schedule steps with the fixture's metrics times `metric_sign` (the "max" case negates them).
void check_schedule(const std::string& key, const Make& make, bool plateau = false, double metric_sign = 1) {
  const json& want = fixture().at("lrs").at(key);
  const std::vector<double> m = metrics();
  auto step = [&](optim::LRScheduler& s, size_t t) {
    if (plateau)
      static_cast<optim::ReduceLROnPlateau&>(s).step(metric_sign * m[t]);
    else
      s.step();
  };
  {
    TwoGroups a;
    auto s = make(a.opt);
    expect_lrs(lrs(a.opt), want[0], key + " step 0");
    for (size_t t = 0; t + 1 < want.size(); ++t) {
      step(*s, t);
      expect_lrs(lrs(a.opt), want[t + 1], key + " step " + std::to_string(t + 1));
      expect_lrs(s->get_last_lr(), want[t + 1], key + " get_last_lr " + std::to_string(t + 1));
    }
  }
  TwoGroups a, b;
  auto s = make(a.opt);
  for (size_t t = 0; t < 12; ++t) step(*s, t);
  auto r = make(b.opt);
  b.opt.load_state_dict(a.opt.state_dict());
  r->load_state_dict(s->state_dict());
  EXPECT_EQ(r->last_epoch(), 12);
  for (size_t t = 12; t + 1 < want.size(); ++t) {
    step(*r, t);
    expect_lrs(lrs(b.opt), want[t + 1], key + " resumed, step " + std::to_string(t + 1));
  }
}

}  // namespace

TEST(NewSchedulers, ExponentialLR) {
  check_schedule("exponential", [](auto& o) { return std::make_unique<optim::ExponentialLR>(o, 0.9); });
}
TEST(NewSchedulers, MultiStepLR) {
  check_schedule("multistep", [](auto& o) {
    return std::make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{3, 7, 7, 20}, 0.5);
  });
}
TEST(NewSchedulers, CosineAnnealingLR) {
  check_schedule("cosine", [](auto& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 10, 0.001); });
}
TEST(NewSchedulers, LambdaLR) {
  check_schedule("lambda", [](auto& o) {
    return std::make_unique<optim::LambdaLR>(
        o, std::vector<optim::LambdaLR::Lambda>{[](int64_t t) { return std::pow(0.95, double(t)); },
                                                [](int64_t t) { return 1.0 / double(1 + t); }});
  });
}
TEST(NewSchedulers, ReduceLROnPlateau) {
  check_schedule(
      "plateau_min",
      [](auto& o) {
        return std::make_unique<optim::ReduceLROnPlateau>(
            o, optim::ReduceLROnPlateauOptions{.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = {0.01, 0.02}});
      },
      true);
  check_schedule(
      "plateau_max_abs",
      [](auto& o) {
        return std::make_unique<optim::ReduceLROnPlateau>(
            o, optim::ReduceLROnPlateauOptions{
                   .mode_max = true, .factor = 0.3, .patience = 1, .threshold = 0.05, .threshold_abs = true});
      },
      true, -1);
}

TEST(NewSchedulers, Errors) {
  TwoGroups a;
  EXPECT_ERROR(optim::ExponentialLR(a.opt, -1.0), HasSubstr("ExponentialLR"), HasSubstr("gamma"));
  EXPECT_ERROR(optim::CosineAnnealingLR(a.opt, 0), HasSubstr("t_max"));
  EXPECT_ERROR(optim::MultiStepLR(a.opt, {-2}), HasSubstr("milestones"));
  EXPECT_ERROR(optim::LambdaLR(a.opt, std::vector<optim::LambdaLR::Lambda>{[](int64_t) { return 1.0; }}),
               HasSubstr("one per parameter group"));
  EXPECT_ERROR(optim::LambdaLR(a.opt, [](int64_t) { return -1.0; }), HasSubstr("LambdaLR"));
  EXPECT_ERROR(optim::ReduceLROnPlateau(a.opt, {.factor = 1.0}), HasSubstr("factor"));
  EXPECT_ERROR(optim::ReduceLROnPlateau(a.opt, {.min_lr = {0, 0, 0}}), HasSubstr("min_lr"));
  // A state dict of another kind of scheduler names the missing key.
  optim::ExponentialLR e(a.opt, 0.9);
  optim::CosineAnnealingLR c(a.opt, 5);
  EXPECT_ERROR(c.load_state_dict(e.state_dict()), HasSubstr("t_max"));
}
