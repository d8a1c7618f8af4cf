// Per-element math of the optimizer and loss-scaling steps, written once for the CPU and CUDA
// launchers (core/cpu/amp_step.cpp, core/cpu/grad.cpp, cuda/amp_step.cu, cuda/grad.cu): the
// checked gradient accumulation, the SGD, Adam, RMSprop and Adagrad updates and the GradScaler's scale update.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/dtype_dispatch.h"  // MT_HOST_DEVICE

namespace mantissa::math {

// Gradient accumulation into an fp32 (or fp64) master gradient that raises a flag on
// inf/NaN: the GradScaler's overflow check rides on this pass instead of a separate one.
struct AccumulateAndCheck {
  // Flag: bool, or int on the CPU, where an int OR reduction vectorizes (a conditional store
  // or a bool one does not).
  template <typename T, typename Flag>
  MT_HOST_DEVICE T operator()(T acc, T g, Flag& found_inf) const {
    found_inf |= Flag(!(g - g == T(0)));
    return acc + g;
  }
};

// The optimizer functors below are applied per element by the fused step launchers
// (core/cpu/amp_step.cpp, cuda/amp_step.cu): the launcher reads the gradient, multiplies it by the
// GradScaler's inverse scale, calls the functor on the master weight and its state, and
// writes the rounded weight into the AMP working copy. T is the master's type (float, or
// double for fp64 parameters). Every per-step scalar (1 - beta, lr / (1 - beta1^t), ...)
// is computed on the host in double and rounded to T once, as PyTorch does, so the
// per-element arithmetic follows torch.optim's operation order.

// One Adam/AdamW update of a single element.
template <typename T>
struct AdamUpdateT {
  T beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  T weight_decay;           // Adam: L2 term added to the gradient (0: off)
  T decay_factor;           // AdamW: w *= 1 - lr * weight_decay before the update (1: off)
  T step_size;              // lr / (1 - beta1^t)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  bool maximize, amsgrad;
  // m, v: first and second moments; vmax: running max of v (changed only with amsgrad).
  // Flags as selects and every store unconditional, so the CPU's element loop vectorizes.
  MT_HOST_DEVICE void operator()(T& w, T g, T& m, T& v, T& vmax) const {
    g = maximize ? -g : g;
    g = weight_decay != T(0) ? g + weight_decay * w : g;
    w *= decay_factor;
    m = m * beta1 + one_minus_beta1 * g;
    v = v * beta2 + one_minus_beta2 * g * g;
    const T running_max = vmax > v ? vmax : v;
    vmax = amsgrad ? running_max : vmax;
    const T second = amsgrad ? running_max : v;
    T denom = std::sqrt(second) / bias_correction2_sqrt + eps;
    w -= step_size * m / denom;
  }
};

// One SGD update with optional momentum / dampening / nesterov / weight decay / maximize.
// On a parameter's first step with momentum the buffer starts as the gradient (PyTorch).
template <typename T>
struct SgdUpdateT {
  T lr, momentum, one_minus_dampening, weight_decay;
  bool nesterov, maximize, first_step;
  // buf: the momentum buffer (changed only with momentum). Flags as selects and every store
  // unconditional, so the CPU's element loop vectorizes.
  MT_HOST_DEVICE void operator()(T& w, T g, T& buf) const {
    g = maximize ? -g : g;
    g = weight_decay != T(0) ? g + weight_decay * w : g;
    const T next = first_step ? g : buf * momentum + one_minus_dampening * g;
    const bool with_momentum = momentum != T(0);
    buf = with_momentum ? next : buf;
    g = with_momentum ? (nesterov ? g + momentum * next : next) : g;
    w -= lr * g;
  }
};

// One RMSprop update (torch.optim.RMSprop), optionally centered and with momentum. The fused
// multiply-adds are where torch 1.13's CPU kernels (AVX2 build) fuse: add(x, alpha=a) is
// fma(a, x, self) and addcmul(t1, t2, value=v) is fma(v * t1, t2, self); addcdiv(t1, t2,
// value=v) is self + v * t1 / t2; mul_ rounds on its own. With them the float32 steps equal
// torch's bit for bit (tests/test_optim_extra.cpp). Unlike the Adam and SGD functors above,
// whose `a * b + c` the compiler may contract, every rounding here is spelled out.
template <typename T>
struct RmsPropUpdateT {
  T lr, alpha, one_minus_alpha, eps, weight_decay, momentum;
  bool centered, maximize;
  // sq: square_avg; buf: momentum_buffer (changed only with momentum > 0); avg: grad_avg
  // (changed only when centered). Flags as selects, every store unconditional.
  MT_HOST_DEVICE void operator()(T& w, T g, T& sq, T& buf, T& avg) const {
    g = maximize ? -g : g;
    g = weight_decay != T(0) ? std::fma(weight_decay, w, g) : g;   // grad.add(param, alpha=wd)
    sq = std::fma(one_minus_alpha * g, g, sq * alpha);             // mul_(alpha).addcmul_(g, g, 1 - alpha)
    const T next_avg = std::fma(one_minus_alpha, g, avg * alpha);  // mul_(alpha).add_(g, alpha=1 - alpha)
    avg = centered ? next_avg : avg;
    const T var = centered ? std::fma(-next_avg, next_avg, sq) : sq;  // addcmul(avg, avg, value=-1)
    const T denom = std::sqrt(var) + eps;
    // mul_(momentum).addcdiv_(g, denom): the product rounded on its own. Compilers contract a
    // plain `buf * momentum + q` into one fma (GCC does in C++, nvcc does); fma(buf, momentum,
    // 0) is the rounded product and is not folded back (it differs from buf * momentum on -0).
    const T next_buf = std::fma(buf, momentum, T(0)) + g / denom;
    const bool with_momentum = momentum > T(0);
    buf = with_momentum ? next_buf : buf;
    w = with_momentum ? std::fma(-lr, next_buf, w)  // add_(buf, alpha=-lr)
                      : w + (-lr) * g / denom;      // addcdiv_(g, denom, value=-lr)
  }
};

// One Adagrad update (torch.optim.Adagrad, dense gradients); clr = lr / (1 + (t - 1) lr_decay).
template <typename T>
struct AdagradUpdateT {
  T neg_clr, eps, weight_decay;
  bool maximize;
  // sum: the accumulated squared gradients (starts at initial_accumulator_value).
  MT_HOST_DEVICE void operator()(T& w, T g, T& sum) const {
    g = maximize ? -g : g;
    g = weight_decay != T(0) ? std::fma(weight_decay, w, g) : g;  // grad.add(param, alpha=wd)
    sum = std::fma(g, g, sum);                                    // addcmul_(g, g, value=1)
    const T denom = std::sqrt(sum) + eps;
    w = w + neg_clr * g / denom;  // addcdiv_(g, std, value=-clr)
  }
};

// The hyper-parameters of one parameter group as the fused step kernels receive them
// (plain data: passed by value to CUDA kernels). The per-step functor is built from it per
// parameter, on the host (CPU row) or per thread on the device (CUDA row), by the two
// functions below, so both rows compute identical scalars.
enum class OptimizerKind : uint8_t { Sgd, Adam, RmsProp, Adagrad };
struct OptimizerHyper {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0, weight_decay = 0;
  bool maximize = false;
  double momentum = 0, dampening = 0;             // SGD
  bool nesterov = false;                          // SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam / AdamW
  bool decoupled_weight_decay = false;            // AdamW
  bool amsgrad = false;                           // Adam / AdamW
  double alpha = 0.99;                            // RMSprop (momentum, eps: the fields above)
  bool centered = false;                          // RMSprop
  double lr_decay = 0;                            // Adagrad (eps: the field above)
};

// Adam's functor at step t (t >= 1: the count including this step). Per-step scalars in
// double, rounded to T once, as torch.optim computes them.
template <typename T>
MT_HOST_DEVICE AdamUpdateT<T> adam_update_for(const OptimizerHyper& h, int64_t t) {
  const double bias_correction1 = 1 - std::pow(h.beta1, double(t));
  const double bias_correction2 = 1 - std::pow(h.beta2, double(t));
  return AdamUpdateT<T>{T(h.beta1),
                        T(h.beta2),
                        T(1 - h.beta1),
                        T(1 - h.beta2),
                        T(h.eps),
                        T(h.decoupled_weight_decay ? 0.0 : h.weight_decay),
                        T(h.decoupled_weight_decay ? 1 - h.lr * h.weight_decay : 1.0),
                        T(h.lr / bias_correction1),
                        T(std::sqrt(bias_correction2)),
                        h.maximize,
                        h.amsgrad};
}

// RMSprop's functor (the same at every step).
template <typename T>
MT_HOST_DEVICE RmsPropUpdateT<T> rmsprop_update_for(const OptimizerHyper& h) {
  return RmsPropUpdateT<T>{T(h.lr),           T(h.alpha),    T(1 - h.alpha), T(h.eps),
                           T(h.weight_decay), T(h.momentum), h.centered,     h.maximize};
}

// Adagrad's functor at step t (t >= 1): clr in double, as torch computes it on the host.
template <typename T>
MT_HOST_DEVICE AdagradUpdateT<T> adagrad_update_for(const OptimizerHyper& h, int64_t t) {
  const double clr = h.lr / (1 + double(t - 1) * h.lr_decay);
  return AdagradUpdateT<T>{T(-clr), T(h.eps), T(h.weight_decay), h.maximize};
}

// SGD's functor; first_step: the momentum buffer starts as the gradient.
template <typename T>
MT_HOST_DEVICE SgdUpdateT<T> sgd_update_for(const OptimizerHyper& h, bool first_step) {
  return SgdUpdateT<T>{T(h.lr),    T(h.momentum), T(1.0 - h.dampening), T(h.weight_decay), h.nesterov,
                       h.maximize, first_step};
}

// --- dynamic loss scaling (GradScaler::update), one application per step ---
// The scale and its counters live in tensors on the parameters' device; the CUDA row runs
// this in a one-thread kernel so that update() never reads the found-inf flag on the host.
struct ScaleUpdate {
  float growth_factor, backoff_factor, min_scale;
  int32_t growth_interval, hysteresis;
  bool dynamic;
  bool count_skip;  // a step was attempted since the last update: an overflow means it was skipped
  // counters: growth_tracker (clean steps in a row), overflows_in_a_row, skipped_steps.
  MT_HOST_DEVICE void operator()(float& scale, int32_t& growth_tracker, int32_t& overflows, int32_t& skipped,
                                 bool found_inf) const {
    if (found_inf && count_skip) ++skipped;
    if (!dynamic) return;
    if (found_inf) {
      growth_tracker = 0;
      if (++overflows >= hysteresis) {
        const float backed_off = scale * backoff_factor;
        scale = backed_off > min_scale ? backed_off : min_scale;
        overflows = 0;
      }
    } else {
      overflows = 0;
      if (++growth_tracker >= growth_interval) {
        const float grown = scale * growth_factor;
        if (grown - grown == 0.0f) scale = grown;  // never grow past fp32 range (inf - inf is NaN)
        growth_tracker = 0;
      }
    }
  }
};

}  // namespace mantissa::math
