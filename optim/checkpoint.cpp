#include "optim/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/random.h"
#include "core/safetensors.h"

namespace mantissa::optim {

namespace {

constexpr const char* kFormat = "mantissa-checkpoint-1";

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

double parse_num(const std::string& path, const std::string& key, const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  MT_CHECK(end && *end == '\0' && !s.empty(), "load_checkpoint", path, ": metadata '", key, "' is not a number: '",
           s.substr(0, 40), s.size() > 40 ? "...'" : "'");
  return v;
}

// Scalars saved under `prefix` in the metadata, parsed back.
std::map<std::string, double> scalars_with(const std::string& path, const std::map<std::string, std::string>& meta,
                                           const std::string& prefix) {
  std::map<std::string, double> out;
  for (const auto& [k, v] : meta)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = parse_num(path, k, v);
  return out;
}

StateDict scalars_dict(const std::string& path, const std::map<std::string, std::string>& meta,
                       const std::string& prefix) {
  StateDict d;
  d.scalars = scalars_with(path, meta, prefix);
  return d;
}

StateDict optimizer_dict(const std::string& path, const SafeTensors& f) {
  StateDict d;
  for (const auto& [k, t] : f.tensors)
    if (k.rfind("optimizer.", 0) == 0) d.insert(k.substr(10), t);
  d.scalars = scalars_with(path, f.metadata, "optimizer.");
  return d;
}

// A deep copy of a model's state (so a failed load can be undone).
StateDict snapshot(const ModelState& m) {
  StateDict s;
  for (const auto& [k, t] : m.state_dict()) s.insert(k, t.clone());
  return s;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& parts, const CheckpointInfo& info) {
  MT_CHECK(bool(parts.model), "save_checkpoint", "a model is required");
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> meta{
      {"format", kFormat}, {"epoch", std::to_string(info.epoch)}, {"rng", default_generator().get_state()}};
  for (const auto& [k, t] : parts.model.state_dict()) tensors[k] = t;
  if (parts.optimizer) {
    StateDict d = parts.optimizer->state_dict();
    for (const auto& [k, t] : d) tensors["optimizer." + k] = t;
    for (const auto& [k, v] : d.scalars) meta["optimizer." + k] = num(v);
    meta["optimizer_type"] = parts.optimizer->name();
  }
  if (parts.scheduler) {
    StateDict d = parts.scheduler->state_dict();
    for (const auto& [k, v] : d.scalars) meta["scheduler." + k] = num(v);
    meta["scheduler_type"] = parts.scheduler->name();
  }
  if (parts.scaler)
    for (const auto& [k, v] : parts.scaler->state_dict().scalars) meta["scaler." + k] = num(v);
  for (const auto& [k, v] : info.extra) meta["extra." + k] = v;
  save_safetensors(path, tensors, meta);
}

CheckpointInfo load_checkpoint(const std::string& path, const Checkpoint& parts) {
  MT_CHECK(bool(parts.model), "load_checkpoint", "a model is required");
  SafeTensors f = load_safetensors(path);
  auto meta_at = [&](const std::string& k) -> const std::string& {
    auto it = f.metadata.find(k);
    MT_CHECK(it != f.metadata.end(), "load_checkpoint", path, ": missing metadata '", k, "'");
    return it->second;
  };
  MT_CHECK(meta_at("format") == kFormat, "load_checkpoint", path, ": unknown format '", meta_at("format"), "'");
  CheckpointInfo info;
  // Exactly representable, non-negative and whole: anything else would resume at a wrong epoch.
  const double epoch = parse_num(path, "epoch", meta_at("epoch"));
  MT_CHECK(epoch >= 0 && epoch <= 9007199254740992.0 && epoch == std::floor(epoch), "load_checkpoint", path,
           ": metadata 'epoch' must be a non-negative integer, got ", meta_at("epoch").substr(0, 40));
  info.epoch = int64_t(epoch);
  for (const auto& [k, v] : f.metadata)
    if (k.rfind("extra.", 0) == 0) info.extra[k.substr(6)] = v;
  if (parts.optimizer)
    MT_CHECK(meta_at("optimizer_type") == parts.optimizer->name(), "load_checkpoint", path, ": optimizer '",
             meta_at("optimizer_type"), "' saved, '", parts.optimizer->name(), "' given");
  if (parts.scheduler)
    MT_CHECK(meta_at("scheduler_type") == parts.scheduler->name(), "load_checkpoint", path, ": scheduler '",
             meta_at("scheduler_type"), "' saved, '", parts.scheduler->name(), "' given");
  const std::string rng = meta_at("rng");

  StateDict model;
  for (const auto& [k, t] : f.tensors)
    if (k.rfind("optimizer.", 0) != 0) model.insert(k, t);

  // Apply part by part; each part validates itself before changing. If a later part
  // fails, the earlier ones are rolled back from these snapshots.
  NoGradGuard no_grad;
  StateDict model_before = snapshot(parts.model);
  StateDict opt_before, sched_before, scaler_before;
  if (parts.optimizer) opt_before = parts.optimizer->state_dict();
  if (parts.scheduler) sched_before = parts.scheduler->state_dict();
  if (parts.scaler) scaler_before = parts.scaler->state_dict();
  int stage = 0;
  try {
    parts.model.load_state_dict(model, parts.strict);
    stage = 1;
    if (parts.optimizer) parts.optimizer->load_state_dict(optimizer_dict(path, f));
    stage = 2;
    if (parts.scheduler) parts.scheduler->load_state_dict(scalars_dict(path, f.metadata, "scheduler."));
    stage = 3;
    if (parts.scaler) parts.scaler->load_state_dict(scalars_dict(path, f.metadata, "scaler."));
    stage = 4;
    Generator g;
    g.set_state(rng);
    default_generator() = g;
  } catch (const Error& e) {
    if (stage >= 1) parts.model.load_state_dict(model_before, false);
    if (stage >= 2 && parts.optimizer) parts.optimizer->load_state_dict(opt_before);
    if (stage >= 3 && parts.scheduler) parts.scheduler->load_state_dict(sched_before);
    if (stage >= 4 && parts.scaler) parts.scaler->load_state_dict(scaler_before);
    throw Error(std::string(e.what()) + " (while loading checkpoint " + path + "; nothing was changed)");
  }
  return info;
}

}  // namespace mantissa::optim
