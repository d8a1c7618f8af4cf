// GradScaler: loss scaling that is part of backward (docs/design.md §4).
//
//   mt::amp::GradScaler scaler;                 // dynamic: 2^16, x2 every 2000 clean steps, x0.5 on overflow
//   { mt::amp::Autocast ac(mt::kHalf); loss = F::cross_entropy(net.forward(x), y); }
//   opt.zero_grad();
//   scaler.backward(loss);   // seeds backward with S; the inf/NaN check rides on grad accumulation
//   scaler.step(opt);        // skipped if any grad overflowed, else one fused unscale+update+refresh pass
//
// Every gradient step() applies has been checked: the scaler remembers each gradient's
// version when its accumulation (or unscale_) checked it, and step() checks again, in one
// read-only pass, any gradient written or replaced since (a hook, an in-place edit of
// .grad(), set_grad, autograd::grad results, create_graph backward) before it decides.
//   scaler.update();         // adjusts S
//
// Several models, losses and optimizers (a GAN) share one scaler, as in PyTorch's recipe: each
// loss through scaler.backward, each optimizer through unscale_ (optional) and step (once per
// iteration each), one update() per iteration. The overflow flag is the iteration's: a step is
// skipped when any gradient checked so far in the iteration (the optimizer's own, or an earlier
// loss's) was non-finite, so an overflow skips the optimizers stepped after it (PyTorch decides
// per optimizer, on its gradients only); update() backs off once.
//
// On a GPU the scale, its counters and the found-inf flag live in device memory (the
// device of the first loss passed to backward): step() hands them to the optimizer's
// kernels, which skip the update on the device, and update() adjusts the scale in a
// one-thread kernel, so a training step never waits for the GPU. The readers below
// (scale(), found_inf(), skipped_steps(), state_dict(), unscale_()'s result) copy values
// back and therefore synchronise; call them for logging, not every step.
//
// A static scale (the mixed-precision paper's constant loss scale) is
// GradScaler({.init_scale = 128, .dynamic = false}). With enabled = false every call
// degrades to the plain fp32 behaviour (bf16 autocast needs no scaling).
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/state_dict.h"
#include "core/tensor.h"

namespace mantissa::optim {
class Optimizer;
}

namespace mantissa::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
  bool enabled = true;
  bool dynamic = true;  // false: the scale stays init_scale (overflowing steps are still skipped)
  // The scale never backs off below max(min_scale, kMinScale): 0 leaves only that floor.
  double min_scale = 0;
  int64_t hysteresis = 1;  // overflowing steps tolerated before backing off (1: back off at once)
};

// The smallest scale the scaler uses: 2^-126, the smallest normal float32 (its inverse, 2^126,
// is finite). Construction and load_state_dict reject scales outside [kMinScale, FLT_MAX];
// a dynamic scale that keeps backing off stops here, on every device, and steps keep being
// skipped while the gradients stay non-finite.
inline constexpr double kMinScale = 1.1754943508222875e-38;

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& opts = {});

  // Backpropagates `loss` (a scalar) seeded with the current scale S.
  void backward(const Tensor& loss, bool retain_graph = false);
  // Divides the optimizer's gradients by S in place (call before clipping); step() then
  // does not unscale again. Returns whether a non-finite gradient was found.
  bool unscale_(optim::Optimizer& opt);
  // Runs opt.step with the gradients unscaled in the same pass, unless an inf/NaN was
  // found during backward. Returns whether the step was taken; with the state on a GPU the
  // decision is the device's, and this returns true ("queued"): ask found_inf() to know.
  bool step(optim::Optimizer& opt);
  // Adjusts the scale for the next iteration, counts a skipped step, clears the overflow flag.
  void update();

  // The current loss scale (1 when disabled).
  double scale() const;
  // Steps skipped for overflow, counted by update().
  int64_t skipped_steps() const;
  int64_t growth_tracker() const;
  bool found_inf() const;
  // The scale as the kernels read it: float32 [1] on the scaler's device.
  const Tensor& scale_tensor() const { return scale_; }
  bool is_enabled() const { return opts_.enabled; }
  const GradScalerOptions& options() const { return opts_; }

  // Scalars only: scale, growth_factor, backoff_factor, growth_interval, growth_tracker,
  // overflows_in_a_row, skipped_steps.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 private:
  struct Sink final : autograd::FoundInfSink {
    GradScaler* owner;
    Tensor flag_for(Device device) override;
    void checked(const Tensor& grad) override;
  };
  // A gradient checked since the last update(), and its storage version then.
  struct Checked {
    std::weak_ptr<TensorImpl> grad;
    uint64_t version = 0;
  };

  // Moves the scale and counters to `device` (the first loss's device; rarely changes).
  void place_on(Device device);
  // The found-inf flags of every device OR-ed into one float32 [1] on the scaler's device
  // (the flag itself in the usual single-device case); undefined when there is none.
  Tensor combined_flag() const;
  std::vector<int32_t> counters() const;
  // Checks, into the flags, every gradient of `opt` not checked at its current version.
  void check_unchecked(optim::Optimizer& opt);

  GradScalerOptions opts_;
  Tensor scale_;     // float32 [1]
  Tensor counters_;  // int32 [3]: growth_tracker, overflows_in_a_row, skipped_steps
  // This iteration's optimizers (since the last update()): those unscaled, those stepped.
  std::set<const optim::Optimizer*> unscaled_, stepped_;
  std::map<int, Tensor> flags_;                   // found-inf flag per device (float32 [1] on that device)
  std::map<const TensorImpl*, Checked> checked_;  // cleared by update()
  Sink sink_;
};

}  // namespace mantissa::amp
