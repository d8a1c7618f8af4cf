#include "amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/profiler.h"
#include "optim/optimizer.h"

namespace mantissa::amp {

namespace {

int device_key(Device d) { return int(d.type) * 1024 + d.index; }

// Installs the scaler's found-inf sink for one backward pass.
struct SinkScope {
  autograd::FoundInfSink* prev;
  explicit SinkScope(autograd::FoundInfSink* s) : prev(autograd::found_inf_sink()) { autograd::set_found_inf_sink(s); }
  ~SinkScope() { autograd::set_found_inf_sink(prev); }
};

constexpr double kMaxFloat = std::numeric_limits<float>::max();

// A scale the kernels can divide by: a positive normal float32 (NaN fails every comparison).
bool usable_scale(double s) { return s >= kMinScale && s <= kMaxFloat; }

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& o) : opts_(o) {
  MT_CHECK(usable_scale(o.init_scale), "GradScaler",
           "init_scale must be a positive float32 with a finite inverse (in [", kMinScale, ", ", kMaxFloat, "]), got ",
           o.init_scale);
  MT_CHECK(o.growth_factor > 1, "GradScaler", "growth_factor must be > 1, got ", o.growth_factor);
  MT_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler", "backoff_factor must be in (0, 1), got ",
           o.backoff_factor);
  MT_CHECK(o.growth_interval > 0 && o.growth_interval <= std::numeric_limits<int32_t>::max(), "GradScaler",
           "growth_interval must be positive, got ", o.growth_interval);
  MT_CHECK(o.hysteresis >= 1 && o.hysteresis <= std::numeric_limits<int32_t>::max(), "GradScaler",
           "hysteresis must be >= 1, got ", o.hysteresis);
  MT_CHECK(o.min_scale >= 0 && o.min_scale <= o.init_scale, "GradScaler", "min_scale must be in [0, init_scale], got ",
           o.min_scale);
  // The state starts on the CPU and follows the first loss to its device (place_on).
  scale_ = full({1}, o.init_scale, {.dtype = DType::Float32});
  counters_ = zeros({3}, {.dtype = DType::Int32});
  sink_.owner = this;
}

Tensor GradScaler::Sink::flag_for(Device device) {
  Tensor& f = owner->flags_[device_key(device)];
  if (!f.defined()) f = zeros({1}, {.dtype = DType::Float32, .device = device});
  return f;
}

void GradScaler::Sink::checked(const Tensor& grad) { owner->checked_[grad.impl()] = {grad.impl_ptr(), grad.version()}; }

void GradScaler::check_unchecked(optim::Optimizer& opt) {
  for (const Tensor& p : opt.parameters()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    auto it = checked_.find(g.impl());
    if (it != checked_.end() && it->second.grad.lock() == g.impl_ptr() && it->second.version == g.version()) continue;
    // Written or replaced after its check (or never checked): one read-only pass.
    backend_for(g.device()).accumulate_grad(g, Tensor(), false, sink_.flag_for(g.device()));
    sink_.checked(g);
  }
}

void GradScaler::place_on(Device device) {
  if (scale_.device() == device) return;
  NoGradGuard no_grad;
  scale_ = launch::to_device(scale_, device);
  counters_ = launch::to_device(counters_, device);
}

Tensor GradScaler::combined_flag() const {
  if (flags_.empty()) return Tensor();
  const Device home = scale_.device();
  if (flags_.size() == 1 && flags_.begin()->second.device() == home) return flags_.begin()->second;
  // Several devices (or a flag elsewhere): sum them on the scaler's device; nonzero = overflow.
  NoGradGuard no_grad;
  Tensor sum = zeros({1}, {.dtype = DType::Float32, .device = home});
  for (const auto& [key, f] : flags_) sum = sum + (f.device() == home ? f : launch::to_device(f, home));
  return sum;
}

std::vector<int32_t> GradScaler::counters() const { return counters_.to_vector<int32_t>(); }

double GradScaler::scale() const { return opts_.enabled ? double(scale_.item<float>()) : 1.0; }
int64_t GradScaler::skipped_steps() const { return counters()[2]; }
int64_t GradScaler::growth_tracker() const { return counters()[0]; }

void GradScaler::backward(const Tensor& loss, bool retain_graph) {
  if (!opts_.enabled) {
    loss.backward({}, retain_graph);
    return;
  }
  MT_CHECK(loss.defined() && loss.numel() == 1, "GradScaler::backward", "expected a scalar loss, got shape ",
           loss.defined() ? loss.shape_str() : std::string("undefined"));
  place_on(loss.device());
  // The scale must be representable: seed in fp32 even if the loss was computed in fp16.
  Tensor l = loss.dtype() == DType::Float32 || loss.dtype() == DType::Float64 ? loss : loss.to(DType::Float32);
  // The seed S is copied from the device-resident scale: no host round trip.
  Tensor seed = make_tensor(l.sizes(), l.dtype(), l.device());
  backend_for(l.device()).copy(scale_.reshape(l.sizes()), seed);
  SinkScope scope(&sink_);
  autograd::run_backward({l}, {seed}, retain_graph, false);
}

bool GradScaler::found_inf() const {
  for (const auto& [key, f] : flags_)
    if (f.item<float>() != 0.0f) return true;
  return false;
}

bool GradScaler::unscale_(optim::Optimizer& opt) {
  if (!opts_.enabled) return false;
  MT_CHECK(!unscaled_.count(&opt) && !stepped_.count(&opt), "GradScaler::unscale_",
           "unscale_() was already called for this optimizer (or its step() taken) since the last update()");
  NoGradGuard no_grad;
  std::map<int, Tensor> inv_scales;  // 1 / S on each gradient's device
  for (const Tensor& p : opt.parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor& inv = inv_scales[device_key(g.device())];
    if (!inv.defined())
      inv = reciprocal(g.device() == scale_.device() ? scale_ : launch::to_device(scale_, g.device()));
    // Gradients that did not come through scaler.backward are checked here.
    Tensor flag = sink_.flag_for(g.device());
    backend_for(g.device()).accumulate_grad(g * inv, g, /*init=*/true, flag);
    g.bump_version();
    sink_.checked(g);
  }
  unscaled_.insert(&opt);
  return found_inf();
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!opts_.enabled) {
    opt.step();
    return true;
  }
  MT_CHECK(!stepped_.count(&opt), "GradScaler::step",
           "step() was already called for this optimizer since the last update()");
  const bool unscaled = unscaled_.count(&opt) > 0;
  stepped_.insert(&opt);
  {
    NoGradGuard no_grad;
    check_unchecked(opt);
  }
  const Tensor flag = combined_flag();
  if (scale_.device().is_cpu()) {
    // CPU state: reading it is free, so decide here exactly as the unfused code did.
    if (flag.defined() && flag.item<float>() != 0.0f) return false;
    opt.step({.inv_scale = unscaled ? 1.0f : float(1.0 / double(scale_.item<float>()))});
    return true;
  }
  opt.step({.found_inf = flag, .scale = unscaled ? Tensor() : scale_});
  return true;
}

void GradScaler::update() {
  if (!opts_.enabled) return;
  profiler::Range range("GradScaler.update");
  NoGradGuard no_grad;
  // The floor is kMinScale at least, so the inverse the step kernels form stays finite.
  const float floor = float(std::max(opts_.min_scale, kMinScale));
  const math::ScaleUpdate rule{float(opts_.growth_factor),
                               float(opts_.backoff_factor),
                               floor,
                               int32_t(opts_.growth_interval),
                               int32_t(opts_.hysteresis),
                               opts_.dynamic,
                               !stepped_.empty()};
  const Tensor flag = combined_flag();
  // A recording Profile keeps the loss-scale history (reading it back synchronises a GPU).
  const int64_t skipped_before = profiler::recording() ? skipped_steps() : 0;
  // Reads the flag, adjusts scale and counters, then clears the flag, all on the device.
  backend_for(scale_.device()).update_scale(scale_, counters_, flag, rule);
  for (auto& [key, f] : flags_)
    if (!f.is_same(flag)) f.zero_();
  checked_.clear();
  unscaled_.clear();
  stepped_.clear();
  if (profiler::recording())
    profiler::note("loss_scale", skipped_steps() > skipped_before ? "skipped" : "taken", scale());
}

StateDict GradScaler::state_dict() const {
  const std::vector<int32_t> c = counters();
  StateDict sd;
  sd.scalars = {{"scale", double(scale_.item<float>())},  {"growth_factor", opts_.growth_factor},
                {"backoff_factor", opts_.backoff_factor}, {"growth_interval", double(opts_.growth_interval)},
                {"growth_tracker", double(c[0])},         {"overflows_in_a_row", double(c[1])},
                {"skipped_steps", double(c[2])}};
  return sd;
}

void GradScaler::load_state_dict(const StateDict& dict) {
  MT_CHECK(dict.empty(), "GradScaler::load_state_dict", "unknown key '", dict.empty() ? "" : dict.begin()->first,
           "' (a GradScaler has no tensors)");
  const std::map<std::string, double>& s = dict.scalars;
  for (const char* k : {"scale", "growth_factor", "backoff_factor", "growth_interval", "growth_tracker",
                        "overflows_in_a_row", "skipped_steps"})
    MT_CHECK(s.count(k), "GradScaler::load_state_dict", "missing key '", k, "'");
  for (const auto& [k, v] : s) {
    (void)v;
    MT_CHECK(k == "scale" || k == "growth_factor" || k == "backoff_factor" || k == "growth_interval" ||
                 k == "growth_tracker" || k == "overflows_in_a_row" || k == "skipped_steps",
             "GradScaler::load_state_dict", "unexpected key '", k, "'");
  }
  // The constructor's rules, each naming its key; NaN fails every comparison.
  constexpr const char* op = "GradScaler::load_state_dict";
  MT_CHECK(usable_scale(s.at("scale")), op, "key 'scale' must be a positive float32 with a finite inverse (in [",
           kMinScale, ", ", kMaxFloat, "]), got ", s.at("scale"));
  MT_CHECK(s.at("growth_factor") > 1 && std::isfinite(s.at("growth_factor")), op,
           "key 'growth_factor' must be finite and > 1, got ", s.at("growth_factor"));
  MT_CHECK(s.at("backoff_factor") > 0 && s.at("backoff_factor") < 1, op, "key 'backoff_factor' must be in (0, 1), got ",
           s.at("backoff_factor"));
  const double interval = s.at("growth_interval");
  MT_CHECK(interval >= 1 && interval <= double(std::numeric_limits<int32_t>::max()) && interval == std::floor(interval),
           op, "key 'growth_interval' must be a positive 32-bit integer, got ", interval);
  for (const char* k : {"growth_tracker", "overflows_in_a_row", "skipped_steps"})
    MT_CHECK(s.at(k) >= 0 && s.at(k) <= double(std::numeric_limits<int32_t>::max()) && s.at(k) == std::floor(s.at(k)),
             op, "key '", k, "' must be a non-negative 32-bit integer count, got ", s.at(k));
  NoGradGuard no_grad;
  const Device home = scale_.device();
  scale_ = full({1}, s.at("scale"), {.dtype = DType::Float32, .device = home});
  counters_ =
      from_vector<int32_t>(
          {int32_t(s.at("growth_tracker")), int32_t(s.at("overflows_in_a_row")), int32_t(s.at("skipped_steps"))}, {3})
          .to(home);
  opts_.growth_factor = s.at("growth_factor");
  opts_.backoff_factor = s.at("backoff_factor");
  opts_.growth_interval = int64_t(s.at("growth_interval"));
}

}  // namespace mantissa::amp
