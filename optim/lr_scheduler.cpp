#include "optim/lr_scheduler.h"

#include <cmath>

#include "core/error.h"

namespace mantissa::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, std::string name)
    : optimizer_(&optimizer), name_(std::move(name)), base_lrs_(group_lrs()) {}

void LRScheduler::initial_step() { step(); }

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> lrs;
  for (const auto& g : optimizer_->param_groups()) lrs.push_back(g.get("lr"));
  return lrs;
}

void LRScheduler::step() {
  auto& groups = optimizer_->param_groups();
  MT_CHECK(groups.size() == base_lrs_.size(), name_, "the optimizer has ", groups.size(),
           " parameter groups but the scheduler was made for ", base_lrs_.size());
  ++last_epoch_;
  std::vector<double> lrs;
  try {
    lrs = compute_lr();
  } catch (...) {
    --last_epoch_;
    throw;
  }
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = lrs[g];
  last_lr_ = std::move(lrs);
}

void LRScheduler::visit_int(const Visitor& f, const std::string& key, int64_t& value) {
  double d = double(value);
  f(key, d);
  // A loaded value: converting a non-integer or out-of-range double would be undefined.
  MT_CHECK(d == std::floor(d) && std::fabs(d) < 9.0e15, "LRScheduler", "key '", key, "' must be an integer, got ", d);
  value = int64_t(d);
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  sd.scalars["last_epoch"] = double(last_epoch_);
  for (size_t g = 0; g < base_lrs_.size(); ++g) sd.scalars["base_lrs." + std::to_string(g)] = base_lrs_[g];
  for (size_t g = 0; g < last_lr_.size(); ++g) sd.scalars["last_lr." + std::to_string(g)] = last_lr_[g];
  // visit_state only reads here; the cast lets one visitor serve both directions.
  const_cast<LRScheduler*>(this)->visit_state([&](const std::string& key, double& v) { sd.scalars[key] = v; });
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& dict) {
  const std::string op = name_ + ".load_state_dict";
  MT_CHECK(dict.empty(), op, "unknown key '", dict.empty() ? "" : dict.begin()->first,
           "' (a scheduler has no tensors)");
  const size_t n = optimizer_->param_groups().size();
  auto get = [&](const std::string& key) {
    auto it = dict.scalars.find(key);
    MT_CHECK(it != dict.scalars.end(), op, "missing key '", key, "'");
    return it->second;
  };
  // Every expected key, read before anything changes.
  size_t expected = 1 + 2 * n;
  const double epoch = get("last_epoch");
  MT_CHECK(epoch >= 0 && epoch == std::floor(epoch) && epoch < 9.0e15, op,
           "key 'last_epoch': expected a non-negative integer, got ", epoch);
  std::vector<double> base(n), last(n);
  for (size_t g = 0; g < n; ++g) {
    base[g] = get("base_lrs." + std::to_string(g));
    last[g] = get("last_lr." + std::to_string(g));
    // A learning rate the optimizers would reject (they need lr >= 0) must not load.
    MT_CHECK(std::isfinite(base[g]) && base[g] >= 0, op, "key 'base_lrs.", g,
             "' must be a finite non-negative learning rate, got ", base[g]);
    MT_CHECK(std::isfinite(last[g]) && last[g] >= 0, op, "key 'last_lr.", g,
             "' must be a finite non-negative learning rate, got ", last[g]);
  }
  std::map<std::string, double> own;
  visit_state([&](const std::string& key, double&) {
    own[key] = get(key);
    ++expected;
  });
  if (dict.scalars.size() != expected) {
    for (const auto& [key, v] : dict.scalars) {
      bool known = key == "last_epoch" || own.count(key);
      for (size_t g = 0; g < n && !known; ++g)
        known = key == "base_lrs." + std::to_string(g) || key == "last_lr." + std::to_string(g);
      MT_CHECK(known, op, "unknown key '", key, "' for ", name_);
    }
  }

  // Apply the scheduler's own settings, validate, and roll back if they are invalid.
  std::map<std::string, double> saved;
  try {
    visit_state([&](const std::string& key, double& v) {
      saved[key] = v;
      v = own.at(key);
    });
    check_state();
  } catch (const Error& e) {
    // Restores the settings visited before the failure (an integer key may reject its value).
    visit_state([&](const std::string& key, double& v) {
      auto it = saved.find(key);
      if (it != saved.end()) v = it->second;
    });
    MT_FAIL(op, e.what());
  }
  last_epoch_ = int64_t(epoch);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

}  // namespace mantissa::optim
