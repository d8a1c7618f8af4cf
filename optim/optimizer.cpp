#include "optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/tensor_methods.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/profiler.h"
#include "optim/fused_step.h"

namespace mantissa::optim {

namespace {

// The group's hyper-parameters by name: a number or a flag (0/1), in declaration order.
struct Field {
  const char* name;
  std::optional<double> ParamGroup::*number;
  std::optional<bool> ParamGroup::*flag;
};
constexpr Field kFields[] = {
    {"lr", &ParamGroup::lr, nullptr},
    {"weight_decay", &ParamGroup::weight_decay, nullptr},
    {"momentum", &ParamGroup::momentum, nullptr},
    {"dampening", &ParamGroup::dampening, nullptr},
    {"nesterov", nullptr, &ParamGroup::nesterov},
    {"beta1", &ParamGroup::beta1, nullptr},
    {"beta2", &ParamGroup::beta2, nullptr},
    {"eps", &ParamGroup::eps, nullptr},
    {"amsgrad", nullptr, &ParamGroup::amsgrad},
    {"alpha", &ParamGroup::alpha, nullptr},
    {"centered", nullptr, &ParamGroup::centered},
    {"lr_decay", &ParamGroup::lr_decay, nullptr},
    {"initial_accumulator_value", &ParamGroup::initial_accumulator_value, nullptr},
    {"maximize", nullptr, &ParamGroup::maximize},
};

const Field* find_field(const std::string& name) {
  for (const Field& f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

bool is_set(const ParamGroup& g, const Field& f) {
  return f.number ? (g.*f.number).has_value() : (g.*f.flag).has_value();
}

}  // namespace

bool ParamGroup::has(const std::string& name) const {
  const Field* f = find_field(name);
  return f && is_set(*this, *f);
}

double ParamGroup::get(const std::string& name) const {
  const Field* f = find_field(name);
  MT_CHECK(f && is_set(*this, *f), "ParamGroup", "no hyper-parameter named '", name, "' is set");
  return f->number ? *(this->*f->number) : double(*(this->*f->flag));
}

void ParamGroup::set(const std::string& name, double value) {
  const Field* f = find_field(name);
  MT_CHECK(f && is_set(*this, *f), "ParamGroup", "no hyper-parameter named '", name, "' in this group");
  if (f->number) {
    this->*f->number = value;
  } else {
    MT_CHECK(value == 0 || value == 1, "ParamGroup", "flag '", name, "' must be 0 or 1, got ", value);
    this->*f->flag = value != 0;
  }
}

std::vector<std::string> ParamGroup::names() const {
  std::vector<std::string> out;
  for (const Field& f : kFields)
    if (is_set(*this, f)) out.push_back(f.name);
  return out;
}

Optimizer::Optimizer(std::string name, ParamGroup defaults) : name_(std::move(name)), defaults_(std::move(defaults)) {}

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  size_t total = 0;
  for (const auto& g : groups) total += g.params.size();
  MT_CHECK(total > 0, name_, "got an empty parameter list");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  const std::string op = name_ + ".add_param_group";
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& g : groups_)
    for (const auto& p : g.params) seen.insert(p.impl());
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    MT_CHECK(p.defined(), op, "parameter ", i, " of the group is undefined");
    MT_CHECK(p.is_leaf(), op, "can't optimize a non-leaf tensor (parameter ", i, " of shape ", p.shape_str(), ")");
    MT_CHECK(p.dtype() == DType::Float32 || p.dtype() == DType::Float64, op, "parameter ", i, " of shape ",
             p.shape_str(), " is ", dtype_name(p.dtype()),
             "; optimizers update float32 (or float64) master weights: keep parameters in float32 and use "
             "amp::Autocast for float16/bfloat16 compute");
    MT_CHECK(seen.insert(p.impl()).second, op, "some parameters appear in more than one parameter group");
  }
  for (const Field& f : kFields) {
    const bool used = is_set(defaults_, f);
    MT_CHECK(used || !is_set(group, f), op, "unknown hyper-parameter '", f.name, "' for ", name_);
    if (used && !is_set(group, f)) {
      if (f.number)
        group.*f.number = defaults_.*f.number;
      else
        group.*f.flag = defaults_.*f.flag;
    }
  }
  check_group(group);
  groups_.push_back(std::move(group));
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

namespace {

// The step count as the kernels left it (see ParamState::step_count).
void refresh_step(ParamState& st) {
  if (st.step_count.defined()) st.step = st.step_count.item<int64_t>();
}

int device_key(Device d) { return int(d.type) * 1024 + d.index; }

}  // namespace

const ParamState* Optimizer::state(int64_t index) const {
  auto it = state_.find(index);
  if (it == state_.end()) return nullptr;
  refresh_step(it->second);
  return &it->second;
}

void Optimizer::step(const StepOptions& opts) {
  const std::string op = name_ + ".step";
  profiler::Range range(op.c_str());
  MT_CHECK(std::isfinite(opts.inv_scale), op, "inv_scale must be finite, got ", opts.inv_scale);
  if (opts.found_inf.defined())
    MT_CHECK(opts.found_inf.numel() == 1, op, "found_inf must have one element, got shape ",
             opts.found_inf.shape_str());
  if (opts.scale.defined())
    MT_CHECK(opts.scale.numel() == 1 && opts.scale.dtype() == DType::Float32, op,
             "scale must be a float32 tensor of one element, got ", opts.scale.shape_str(), " ",
             dtype_name(opts.scale.dtype()));
  NoGradGuard no_grad;
  for (const auto& group : groups_) check_group(group);  // users and schedulers edit them between steps

  bool any = false, any_cpu = false;
  for (const auto& group : groups_)
    for (const auto& p : group.params)
      if (p.grad().defined()) {
        any = true;
        any_cpu = any_cpu || p.device().is_cpu();
      }
  if (!any) return;
  // On the CPU the flag is plain memory: decide here and leave everything untouched. On a
  // GPU the kernels read it, so the host never waits.
  Tensor device_flag;
  if (opts.found_inf.defined()) {
    if (any_cpu || opts.found_inf.device().is_cpu()) {
      if (opts.found_inf.item<double>() != 0) return;
    } else {
      device_flag = opts.found_inf;
    }
  }
  // The flag and the scale as each device's kernels read them (moved once per device).
  std::map<int, Tensor> flags, scales;
  auto on = [](std::map<int, Tensor>& cache, const Tensor& t, Device d) {
    if (!t.defined()) return Tensor();
    Tensor& slot = cache[device_key(d)];
    if (!slot.defined()) slot = t.device() == d ? t : launch::to_device(t, d);
    return slot;
  };

  // Everything is checked and prepared before the first kernel runs; new state joins after.
  std::map<int64_t, ParamState> fresh_states;
  struct NewBuffer {
    int64_t index;
    std::string name;
    Tensor buffer;
  };
  std::vector<NewBuffer> new_buffers;
  std::vector<detail::AfterStep> after;
  struct Launch {
    Device device;
    FusedStepArgs args;
  };
  std::vector<Launch> launches;
  int64_t index = 0;
  for (const auto& group : groups_) {
    const math::OptimizerHyper hyper = step_hyper(group);
    const std::vector<std::string> names = step_buffers(group);
    MT_CHECK(names.size() <= 3, op, "internal: at most 3 state buffers per parameter");
    std::map<std::pair<int, DType>, size_t> launch_of;  // (device, master dtype) -> launches index
    for (const auto& p : group.params) {
      const int64_t i = index++;
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      auto existing = state_.find(i);
      const bool is_new = existing == state_.end();
      ParamState& st = is_new ? fresh_states[i] : existing->second;

      FusedStepTensor t = detail::prepare_param(op.c_str(), p, grad, after);
      const Device dev = p.device();
      bool fresh_momentum = false;
      for (size_t k = 0; k < names.size(); ++k) {
        auto b = st.buffers.find(names[k]);
        if (b != st.buffers.end()) {
          const Tensor& buf = b->second;
          MT_CHECK(buf.device() == dev && buf.dtype() == p.dtype() && buf.sizes() == p.sizes() && buf.is_contiguous(),
                   op, "state '", names[k], "' of parameter ", i, " is ", buf.shape_str(), " ", dtype_name(buf.dtype()),
                   " on ", buf.device(), " but the parameter is ", p.shape_str(), " ", dtype_name(p.dtype()), " on ",
                   dev, " (move a model before building its optimizer)");
          t.state[k] = buf;
        } else {
          const double init = initial_buffer_value(group, names[k]);
          t.state[k] = init == 0 ? zeros(p.sizes(), {p.dtype(), dev}) : full(p.sizes(), init, {p.dtype(), dev});
          new_buffers.push_back({i, names[k], t.state[k]});
          fresh_momentum = fresh_momentum || names[k] == "momentum_buffer";
        }
      }
      if (!st.step_count.defined() || st.step_count.device() != dev)
        st.step_count = full({1}, st.step, {.dtype = DType::Int64, .device = dev});
      t.step = st.step_count;
      if (fresh_momentum) {
        // SGD's buffer starts as the gradient on its first update: the count after the next
        // update that is not skipped. For new state that is 1; a buffer missing from existing
        // state (momentum switched on later) needs the count, read back only in that rare case.
        st.first_at_step = (is_new ? 0 : st.step_count.item<int64_t>()) + 1;
      }
      t.first_at_step = st.first_at_step;

      auto key = std::make_pair(device_key(dev), p.dtype());
      auto l = launch_of.find(key);
      if (l == launch_of.end()) {
        FusedStepArgs args;
        args.hyper = hyper;
        args.num_state = int(names.size());
        args.inv_scale = opts.inv_scale;
        args.scale = on(scales, opts.scale, dev);
        args.found_inf = on(flags, device_flag, dev);
        l = launch_of.emplace(key, launches.size()).first;
        launches.push_back({dev, std::move(args)});
      }
      launches[l->second].args.tensors.push_back(std::move(t));
    }
  }

  for (const Launch& l : launches) backend_for(l.device).fused_optimizer_step(l.args);
  for (const detail::AfterStep& a : after) detail::finish_param(a);
  for (auto& [i, st] : fresh_states) state_.emplace(i, std::move(st));
  for (NewBuffer& b : new_buffers) state_.at(b.index).buffers[b.name] = std::move(b.buffer);
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const auto& group : groups_)
    for (const auto& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        if (g.grad_fn()) {  // a gradient with history (create_graph): keep the values, drop the graph
          g = g.detach();
          p.set_grad(g);
        }
        g.zero_();
      }
    }
}

StateDict Optimizer::state_dict() const {
  NoGradGuard no_grad;
  StateDict sd;
  for (auto& [index, st] : state_) {
    refresh_step(st);
    const std::string prefix = "state." + std::to_string(index) + ".";
    sd.scalars[prefix + "step"] = double(st.step);
    for (const auto& [name, buf] : st.buffers) sd.insert(prefix + name, buf.clone());
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    sd.scalars[prefix + "num_params"] = double(group.params.size());
    for (const std::string& name : group.names()) sd.scalars[prefix + name] = group.get(name);
  }
  return sd;
}

namespace {

// Splits "<head><index>.<rest>"; false when the key does not have that form. An index with a
// leading zero ("state.00.step") is an error: it would name the same slot as "state.0.step".
bool split_key(const std::string& op, const std::string& key, const std::string& head, int64_t& index,
               std::string& rest) {
  if (key.compare(0, head.size(), head) != 0) return false;
  size_t pos = head.size(), end = pos;
  while (end < key.size() && end - pos < 18 && std::isdigit(static_cast<unsigned char>(key[end]))) ++end;
  if (end == pos || end >= key.size() || key[end] != '.') return false;
  MT_CHECK(end - pos == 1 || key[pos] != '0', op, "key '", key, "': index '", key.substr(pos, end - pos),
           "' has a leading zero (it would name the same slot as '", head, std::stoll(key.substr(pos, end - pos)),
           key.substr(end), "')");
  index = std::stoll(key.substr(pos, end - pos));
  rest = key.substr(end + 1);
  return !rest.empty();
}

}  // namespace

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::string op = name_ + ".load_state_dict";
  NoGradGuard no_grad;
  const std::vector<Tensor> params = parameters();
  const int64_t num_params = int64_t(params.size());
  std::vector<size_t> group_of(params.size());
  for (size_t g = 0, i = 0; g < groups_.size(); ++g)
    for (size_t k = 0; k < groups_[g].params.size(); ++k) group_of[i++] = g;

  std::vector<ParamGroup> groups = groups_;
  std::map<int64_t, ParamState> state;
  for (const auto& [key, value] : dict.scalars) {
    int64_t index;
    std::string rest;
    if (split_key(op, key, "param_groups.", index, rest)) {
      MT_CHECK(index < int64_t(groups.size()), op, "key '", key, "': the optimizer has ", groups.size(),
               " parameter group(s)");
      ParamGroup& group = groups[index];
      if (rest == "num_params") {
        MT_CHECK(value == double(group.params.size()), op, "key '", key, "': the saved group has ", value,
                 " parameters, this one ", group.params.size());
      } else {
        MT_CHECK(group.has(rest), op, "unknown key '", key, "' for ", name_);
        group.set(rest, value);
      }
    } else if (split_key(op, key, "state.", index, rest) && rest == "step") {
      MT_CHECK(index < num_params, op, "key '", key, "': the optimizer has ", num_params, " parameters");
      MT_CHECK(value >= 0 && value == std::floor(value) && value < 9.0e15, op, "key '", key,
               "': step must be a non-negative integer, got ", value);
      state[index].step = int64_t(value);
    } else {
      MT_FAIL(op, "unknown key '", key, "' for ", name_);
    }
  }

  // Every group hyper-parameter present (unknown keys were rejected above).
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::vector<std::string> names = groups[g].names();
    names.push_back("num_params");
    for (const auto& name : names) MT_CHECK(dict.scalars.count(prefix + name), op, "missing key '", prefix + name, "'");
  }

  const std::vector<std::string> known = buffer_names();
  for (const auto& [key, t] : dict) {
    int64_t index;
    std::string rest;
    MT_CHECK(split_key(op, key, "state.", index, rest), op, "unknown key '", key, "' for ", name_);
    MT_CHECK(index < num_params, op, "key '", key, "': the optimizer has ", num_params, " parameters");
    MT_CHECK(std::find(known.begin(), known.end(), rest) != known.end(), op, "unknown key '", key, "' for ", name_);
    const Tensor& p = params[index];
    MT_CHECK(t.defined(), op, "key '", key, "': undefined tensor");
    MT_CHECK(t.sizes() == p.sizes(), op, "key '", key, "': shape ", t.shape_str(), " does not match parameter ", index,
             " of shape ", p.shape_str());
    MT_CHECK(t.is_floating_point(), op, "key '", key, "': expected a floating-point tensor, got ",
             dtype_name(t.dtype()));
    // A private contiguous copy in the parameter's dtype and device (as torch casts state on load).
    state[index].buffers[rest] = t.detach().to(p.device()).to(p.dtype()).clone();
  }

  for (const auto& [index, st] : state) {
    const std::string prefix = "state." + std::to_string(index) + ".";
    MT_CHECK(dict.scalars.count(prefix + "step"), op, "missing key '", prefix, "step'");
    for (const auto& name : required_buffers(groups[group_of[index]]))
      MT_CHECK(st.buffers.count(name), op, "missing key '", prefix + name, "'");
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    try {
      check_group(groups[g]);
    } catch (const Error& e) {
      MT_FAIL(op, "param_groups.", g, ": ", e.what());
    }
  }

  // Everything checked: commit.
  groups_ = std::move(groups);
  state_ = std::move(state);
}

}  // namespace mantissa::optim
