// The optimizer base: parameter groups, per-parameter state, zero_grad, the fused step
// and a serializable state dict. Concrete optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) supply the
// per-element update.
//
//   mt::optim::SGD opt({{.params = body, .weight_decay = 1e-4},   // group 0
//                       {.params = head, .lr = 0.01}},            // group 1: own lr
//                      {.lr = 0.1, .momentum = 0.9});             // defaults
//   opt.zero_grad();
//   loss.backward();
//   opt.step();
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/state_dict.h"
#include "core/step_math.h"
#include "core/tensor.h"

namespace mantissa::optim {

// Tensors and numbers keyed by dotted names, e.g. "state.3.exp_avg" (tensor), "state.3.step",
// "param_groups.0.lr" (scalars): the one state-dict type (core/state_dict.h).
using StateDict = mantissa::StateDict;

// A set of parameters sharing hyper-parameters (PyTorch semantics): unset fields take the
// optimizer's defaults when the group is added; afterwards every field the optimizer uses is
// set, and a field it does not use (momentum for Adam) is rejected.
//
//   mt::optim::ParamGroup g{.params = {w, b}, .lr = 0.01, .momentum = 0.5};
struct ParamGroup {
  std::vector<Tensor> params = {};
  std::optional<double> lr = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
  std::optional<double> momentum = std::nullopt;                   // SGD, RMSprop
  std::optional<double> dampening = std::nullopt;                  // SGD
  std::optional<bool> nesterov = std::nullopt;                     // SGD
  std::optional<double> beta1 = std::nullopt;                      // Adam, AdamW
  std::optional<double> beta2 = std::nullopt;                      // Adam, AdamW
  std::optional<double> eps = std::nullopt;                        // Adam, AdamW, RMSprop, Adagrad
  std::optional<bool> amsgrad = std::nullopt;                      // Adam, AdamW
  std::optional<double> alpha = std::nullopt;                      // RMSprop (smoothing constant)
  std::optional<bool> centered = std::nullopt;                     // RMSprop
  std::optional<double> lr_decay = std::nullopt;                   // Adagrad
  std::optional<double> initial_accumulator_value = std::nullopt;  // Adagrad
  std::optional<bool> maximize = std::nullopt;                     // every optimizer

  // By name, for schedulers and state dicts ("lr", "momentum", ...; flags read as 0 or 1).
  // get() throws when the field is not set, set() when it is not (not used by the optimizer).
  double get(const std::string& name) const;
  void set(const std::string& name, double value);
  bool has(const std::string& name) const;
  // The names of the fields that are set, in declaration order.
  std::vector<std::string> names() const;
};

struct StepOptions {
  // Gradients are multiplied by this inside the update pass (GradScaler: 1 / scale).
  float inv_scale = 1;
  // Optional flag (one element, e.g. the GradScaler's float32 [1] found-inf): when nonzero
  // the whole step is skipped and no parameter or state changes. A flag on the CPU (or any
  // step with CPU parameters) is read on the host before anything happens; a flag on a GPU
  // is read by the step kernels on the device, so the host never waits for it (new state
  // such as zeroed moments may then be allocated, but no value and no step count changes).
  Tensor found_inf = {};
  // Optional float32 [1] loss scale (the GradScaler's, on the device): gradients are also
  // divided by it inside the update pass, read on the device.
  Tensor scale = {};
};

// Per-parameter optimizer state.
struct ParamState {
  int64_t step = 0;                       // updates applied to this parameter
  std::map<std::string, Tensor> buffers;  // "momentum_buffer", "exp_avg", ...
  // The step count as the fused step kernels keep it: int64 [1] on the parameter's device,
  // incremented by the kernel unless the step is skipped on the device. Once defined it is
  // the truth; Optimizer::state() and state_dict() copy it into `step` (a host sync on a GPU).
  Tensor step_count = {};
  // SGD: the step count at which the momentum buffer starts as the gradient (set when the
  // buffer is created; a step skipped on the device leaves the count, so the next one still
  // initialises it). 0: never.
  int64_t first_at_step = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (parameters without one are skipped).
  //   opt.step();                        // plain
  //   opt.step({.inv_scale = 1 / S});    // what a GradScaler calls: unscales in the same pass
  // Each parameter is updated in one fused pass that also refreshes its AMP working copy.
  void step(const StepOptions& opts);
  void step() { step(StepOptions{}); }

  // Clears gradients: drops them (set_to_none, the default) or zeroes them in place.
  void zero_grad(bool set_to_none = true);

  // The groups, in order; schedulers and users may change hyper-parameters in place:
  //   for (auto& g : opt.param_groups()) g.lr = *g.lr * 0.1;
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Adds a group (PyTorch add_param_group); its parameters get the next indices.
  void add_param_group(ParamGroup group);
  // Every parameter in group order; a parameter's position here is its state index.
  std::vector<Tensor> parameters() const;

  // The state of the parameter at `index` (null before its first update). Reads the step
  // count back from the device (a sync on a GPU).
  const ParamState* state(int64_t index) const;

  // A deep copy of the optimizer's state and group hyper-parameters:
  //   tensors "state.<i>.<buffer>"; scalars "state.<i>.step",
  //   "param_groups.<g>.{lr, weight_decay, num_params, <option>...}".
  // <i> is the parameter's index in parameters().
  StateDict state_dict() const;
  // Restores a state_dict() of an optimizer of the same type over parameters of the same
  // shapes and grouping. Everything is validated before anything changes; a bad, missing
  // or unknown key throws mantissa::Error naming it.
  void load_state_dict(const StateDict& dict);

  const std::string& name() const { return name_; }

 protected:
  // `defaults` sets every hyper-parameter this optimizer uses, and only those.
  Optimizer(std::string name, ParamGroup defaults);
  // Adds the constructor's groups (at least one parameter in all).
  void init_groups(std::vector<ParamGroup> groups);

  // The fused step kernel's description of `group`: which update (SGD or Adam) and its
  // hyper-parameters. step() applies it to every parameter with a gradient, in one
  // multi-tensor pass per group, device and master dtype (core/backend.h FusedStepArgs).
  virtual math::OptimizerHyper step_hyper(const ParamGroup& group) const = 0;
  // The state buffers the kernel updates for a parameter of `group`, in the kernel's order
  // (SGD: momentum_buffer; Adam: exp_avg, exp_avg_sq[, max_exp_avg_sq]; RMSprop: square_avg
  // [, momentum_buffer][, grad_avg]; Adagrad: sum). Missing ones start at
  // initial_buffer_value() and join the state after the step.
  virtual std::vector<std::string> step_buffers(const ParamGroup& group) const = 0;
  // Throws mantissa::Error when the group's hyper-parameters are invalid.
  virtual void check_group(const ParamGroup& group) const = 0;
  // Names of every state buffer this optimizer may keep.
  virtual std::vector<std::string> buffer_names() const = 0;
  // Buffers a parameter with state must have under `group`'s hyper-parameters.
  virtual std::vector<std::string> required_buffers(const ParamGroup& group) const = 0;
  // The value a missing step buffer starts at (Adagrad's "sum": initial_accumulator_value).
  virtual double initial_buffer_value(const ParamGroup&, const std::string&) const { return 0; }

 private:
  std::string name_;
  ParamGroup defaults_;
  std::vector<ParamGroup> groups_;
  mutable std::map<int64_t, ParamState> state_;  // mutable: readers refresh `step` from step_count
};

}  // namespace mantissa::optim
