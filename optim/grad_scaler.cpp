#include "optim/grad_scaler.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/backend.h"
#include "core/error.h"
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

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& o) : opts_(o), scale_(o.init_scale) {
  MT_CHECK(o.init_scale > 0 && std::isfinite(o.init_scale), "GradScaler", "init_scale must be positive, got ",
           o.init_scale);
  MT_CHECK(o.growth_factor > 1, "GradScaler", "growth_factor must be > 1, got ", o.growth_factor);
  MT_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler", "backoff_factor must be in (0, 1), got ",
           o.backoff_factor);
  MT_CHECK(o.growth_interval > 0, "GradScaler", "growth_interval must be positive, got ", o.growth_interval);
  MT_CHECK(o.hysteresis >= 1, "GradScaler", "hysteresis must be >= 1, got ", o.hysteresis);
  MT_CHECK(o.min_scale >= 0 && o.min_scale <= o.init_scale, "GradScaler", "min_scale must be in [0, init_scale], got ",
           o.min_scale);
  sink_.owner = this;
}

Tensor GradScaler::Sink::flag_for(Device device) {
  Tensor& f = owner->flags_[device_key(device)];
  if (!f.defined()) f = zeros({1}, {.dtype = DType::Float32, .device = device});
  return f;
}

void GradScaler::backward(const Tensor& loss, bool retain_graph) {
  if (!opts_.enabled) {
    loss.backward({}, retain_graph);
    return;
  }
  MT_CHECK(loss.defined() && loss.numel() == 1, "GradScaler::backward", "expected a scalar loss, got shape ",
           loss.defined() ? loss.shape_str() : std::string("undefined"));
  // The scale must be representable: seed in fp32 even if the loss was computed in fp16.
  Tensor l = loss.dtype() == DType::Float32 || loss.dtype() == DType::Float64 ? loss : loss.to(DType::Float32);
  Tensor seed = full(l.sizes(), scale_, {.dtype = l.dtype(), .device = l.device()});
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
  MT_CHECK(stage_ == Stage::Ready, "GradScaler::unscale_",
           "unscale_() was already called (or step() taken) since the last update()");
  NoGradGuard no_grad;
  const double inv = 1.0 / scale_;
  for (const Tensor& p : opt.parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    // Gradients that did not come through scaler.backward are checked here.
    Tensor flag = sink_.flag_for(g.device());
    backend_for(g.device()).accumulate_grad(g * inv, g, /*init=*/true, flag);
    g.bump_version();
  }
  stage_ = Stage::Unscaled;
  return found_inf();
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!opts_.enabled) {
    opt.step();
    return true;
  }
  MT_CHECK(stage_ != Stage::Stepped, "GradScaler::step", "step() was already called since the last update()");
  const bool inf = found_inf();
  const float inv_scale = stage_ == Stage::Unscaled ? 1.0f : float(1.0 / scale_);
  stage_ = Stage::Stepped;
  if (inf) {
    ++skipped_;
    return false;
  }
  opt.step({.inv_scale = inv_scale});
  return true;
}

void GradScaler::update() {
  if (!opts_.enabled) return;
  const bool inf = found_inf();
  if (opts_.dynamic) {
    if (inf) {
      growth_tracker_ = 0;
      if (++overflows_in_a_row_ >= opts_.hysteresis) {
        scale_ = std::max(scale_ * opts_.backoff_factor, opts_.min_scale);
        overflows_in_a_row_ = 0;
      }
    } else {
      overflows_in_a_row_ = 0;
      if (++growth_tracker_ >= opts_.growth_interval) {
        const double grown = scale_ * opts_.growth_factor;
        if (std::isfinite(float(grown))) scale_ = grown;  // never grow past fp32 range
        growth_tracker_ = 0;
      }
    }
  }
  for (auto& [key, f] : flags_) f.zero_();
  stage_ = Stage::Ready;
}

std::map<std::string, double> GradScaler::state_dict() const {
  return {{"scale", scale_},
          {"growth_factor", opts_.growth_factor},
          {"backoff_factor", opts_.backoff_factor},
          {"growth_interval", double(opts_.growth_interval)},
          {"growth_tracker", double(growth_tracker_)},
          {"overflows_in_a_row", double(overflows_in_a_row_)},
          {"skipped_steps", double(skipped_)}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& s) {
  for (const char* k : {"scale", "growth_factor", "backoff_factor", "growth_interval", "growth_tracker",
                        "overflows_in_a_row", "skipped_steps"})
    MT_CHECK(s.count(k), "GradScaler::load_state_dict", "missing key '", k, "'");
  for (const auto& [k, v] : s) {
    (void)v;
    MT_CHECK(k == "scale" || k == "growth_factor" || k == "backoff_factor" || k == "growth_interval" ||
                 k == "growth_tracker" || k == "overflows_in_a_row" || k == "skipped_steps",
             "GradScaler::load_state_dict", "unexpected key '", k, "'");
  }
  MT_CHECK(s.at("scale") > 0 && std::isfinite(s.at("scale")), "GradScaler::load_state_dict",
           "scale must be positive and finite, got ", s.at("scale"));
  scale_ = s.at("scale");
  opts_.growth_factor = s.at("growth_factor");
  opts_.backoff_factor = s.at("backoff_factor");
  opts_.growth_interval = int64_t(s.at("growth_interval"));
  growth_tracker_ = int64_t(s.at("growth_tracker"));
  overflows_in_a_row_ = int64_t(s.at("overflows_in_a_row"));
  skipped_ = int64_t(s.at("skipped_steps"));
}

}  // namespace mantissa::amp
