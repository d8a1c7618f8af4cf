#include "optim/one_cycle_lr.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace mantissa::optim {

namespace {

// The momentum hyper-parameter a group has: "momentum" (SGD) or "beta1" (Adam); "" if none.
std::string momentum_key(const ParamGroup& g) {
  if (g.momentum) return "momentum";
  if (g.beta1) return "beta1";
  return "";
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, const OneCycleOptions& options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr), total_steps, options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       const OneCycleOptions& options)
    : LRScheduler(optimizer, "OneCycleLR"),
      total_steps_(total_steps),
      pct_start_(options.pct_start),
      anneal_cos_(options.anneal_strategy == "cos" ? 1 : 0),
      cycle_momentum_(options.cycle_momentum ? 1 : 0),
      three_phase_(options.three_phase ? 1 : 0),
      max_lrs_(std::move(max_lrs)) {
  const char* op = "OneCycleLR";
  auto& groups = optimizer.param_groups();
  const size_t n = groups.size();
  MT_CHECK(max_lrs_.size() == n, op, "expected ", n, " max_lr values (one per group), got ", max_lrs_.size());
  MT_CHECK(options.anneal_strategy == "cos" || options.anneal_strategy == "linear", op,
           "anneal_strategy must be \"cos\" or \"linear\", got \"", options.anneal_strategy, "\"");
  MT_CHECK(options.div_factor > 0 && options.final_div_factor > 0, op,
           "div_factor and final_div_factor must be positive");
  for (size_t g = 0; g < n; ++g) {
    initial_lrs_.push_back(max_lrs_[g] / options.div_factor);
    min_lrs_.push_back(initial_lrs_[g] / options.final_div_factor);
  }
  max_momentums_.assign(n, options.max_momentum);
  base_momentums_.assign(n, options.base_momentum);
  check_state();
  base_lrs_ = initial_lrs_;
  if (options.cycle_momentum)
    for (size_t g = 0; g < n; ++g) {
      const std::string key = momentum_key(groups[g]);
      MT_CHECK(!key.empty(), op, "optimizer ", optimizer.name(),
               " has no momentum or beta1 to cycle; pass cycle_momentum = false");
      groups[g].set(key, max_momentums_[g]);
    }
  initial_step();
}

void OneCycleLR::check_state() const {
  const char* op = "OneCycleLR";
  MT_CHECK(total_steps_ >= 1, op, "total_steps must be positive, got ", total_steps_);
  MT_CHECK(pct_start_ >= 0 && pct_start_ <= 1, op, "pct_start must be in [0, 1], got ", pct_start_);
  MT_CHECK(anneal_cos_ == 0 || anneal_cos_ == 1, op, "anneal_cos must be 0 or 1, got ", anneal_cos_);
  MT_CHECK(cycle_momentum_ == 0 || cycle_momentum_ == 1, op, "cycle_momentum must be 0 or 1");
  MT_CHECK(three_phase_ == 0 || three_phase_ == 1, op, "three_phase must be 0 or 1");
}

std::vector<double> OneCycleLR::compute_lr() {
  MT_CHECK(last_epoch_ <= total_steps_, "OneCycleLR", "tried to step ", last_epoch_,
           " times; the specified number of total steps is ", total_steps_);
  struct Phase {
    double end_step;
    const std::vector<double>*start_lr, *end_lr, *start_m, *end_m;
  };
  const double total = double(total_steps_);
  std::vector<Phase> phases;
  if (three_phase_ != 0) {
    phases = {{pct_start_ * total - 1, &initial_lrs_, &max_lrs_, &max_momentums_, &base_momentums_},
              {2 * pct_start_ * total - 2, &max_lrs_, &initial_lrs_, &base_momentums_, &max_momentums_},
              {total - 1, &initial_lrs_, &min_lrs_, &max_momentums_, &max_momentums_}};
  } else {
    phases = {{pct_start_ * total - 1, &initial_lrs_, &max_lrs_, &max_momentums_, &base_momentums_},
              {total - 1, &max_lrs_, &min_lrs_, &base_momentums_, &max_momentums_}};
  }
  auto anneal = [&](double start, double end, double pct) {
    if (anneal_cos_ != 0) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
    return (end - start) * pct + start;
  };

  const double step = double(last_epoch_);
  auto& groups = optimizer_->param_groups();
  std::vector<double> lrs;
  for (size_t g = 0; g < groups.size(); ++g) {
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases.size(); ++i) {
      const Phase& ph = phases[i];
      if (step <= ph.end_step || i + 1 == phases.size()) {
        const double pct = (step - start_step) / (ph.end_step - start_step);
        lr = anneal((*ph.start_lr)[g], (*ph.end_lr)[g], pct);
        momentum = anneal((*ph.start_m)[g], (*ph.end_m)[g], pct);
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
    if (cycle_momentum_ != 0) {
      const std::string key = momentum_key(groups[g]);
      MT_CHECK(!key.empty(), "OneCycleLR", "parameter group ", g, " has no momentum or beta1 to cycle");
      groups[g].set(key, momentum);
    }
  }
  return lrs;
}

void OneCycleLR::visit_state(const Visitor& f) {
  visit_int(f, "total_steps", total_steps_);
  f("pct_start", pct_start_);
  f("anneal_cos", anneal_cos_);
  f("cycle_momentum", cycle_momentum_);
  f("three_phase", three_phase_);
  const struct {
    const char* name;
    std::vector<double>* values;
  } per_group[] = {{"initial_lr", &initial_lrs_},
                   {"max_lr", &max_lrs_},
                   {"min_lr", &min_lrs_},
                   {"max_momentum", &max_momentums_},
                   {"base_momentum", &base_momentums_}};
  for (const auto& [name, values] : per_group)
    for (size_t g = 0; g < values->size(); ++g) f(std::string(name) + "." + std::to_string(g), (*values)[g]);
}

}  // namespace mantissa::optim
