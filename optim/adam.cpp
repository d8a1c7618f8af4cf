#include "optim/adam.h"

#include <cmath>

#include "core/elementwise_math.h"
#include "optim/fused_step.h"

namespace mantissa::optim {

namespace {
std::map<std::string, double> adam_options(const AdamOptions& o) {
  return {{"beta1", o.betas[0]},
          {"beta2", o.betas[1]},
          {"eps", o.eps},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam("Adam", std::move(groups), defaults, /*decoupled=*/false) {}

Adam::Adam(std::string name, std::vector<ParamGroup> groups, const AdamOptions& defaults, bool decoupled)
    : Optimizer(std::move(name), defaults.lr, defaults.weight_decay, adam_options(defaults)), decoupled_(decoupled) {
  init_groups(std::move(groups));
}

void Adam::check_group(const ParamGroup& g) const {
  const std::string& op = name();
  const double lr = g.get("lr"), eps = g.get("eps"), b1 = g.get("beta1"), b2 = g.get("beta2");
  const double wd = g.get("weight_decay"), amsgrad = g.get("amsgrad"), maximize = g.get("maximize");
  MT_CHECK(lr >= 0, op, "invalid learning rate: ", lr);
  MT_CHECK(eps >= 0, op, "invalid epsilon value: ", eps);
  MT_CHECK(b1 >= 0 && b1 < 1, op, "invalid beta parameter at index 0: ", b1);
  MT_CHECK(b2 >= 0 && b2 < 1, op, "invalid beta parameter at index 1: ", b2);
  MT_CHECK(wd >= 0, op, "invalid weight_decay value: ", wd);
  MT_CHECK(amsgrad == 0 || amsgrad == 1, op, "amsgrad must be 0 or 1, got ", amsgrad);
  MT_CHECK(maximize == 0 || maximize == 1, op, "maximize must be 0 or 1, got ", maximize);
}

std::vector<std::string> Adam::required_buffers(const ParamGroup& group) const {
  if (group.get("amsgrad") != 0) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state,
                  float inv_scale) {
  const std::string op = name() + ".step";
  const bool amsgrad = group.get("amsgrad") != 0;
  // Missing moments start at zero; they join the state only after a successful pass.
  std::map<std::string, Tensor> fresh;
  auto buffer = [&](const char* key) {
    auto it = state.buffers.find(key);
    if (it != state.buffers.end()) return it->second;
    return fresh[key] = zeros(param.sizes(), {param.dtype(), param.device()});
  };
  const Tensor m = buffer("exp_avg"), v = buffer("exp_avg_sq");
  const Tensor vmax = amsgrad ? buffer("max_exp_avg_sq") : Tensor();

  // Per-step scalars in double, as torch.optim computes them.
  const double lr = *group.lr, wd = *group.weight_decay;
  const double beta1 = group.get("beta1"), beta2 = group.get("beta2");
  const double t = double(state.step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2 = 1 - std::pow(beta2, t);
  detail::dispatch_master(op.c_str(), param, [&]<typename T>() {
    const math::AdamUpdateT<T> f{T(beta1),
                                 T(beta2),
                                 T(1 - beta1),
                                 T(1 - beta2),
                                 T(group.get("eps")),
                                 T(decoupled_ ? 0.0 : wd),
                                 T(decoupled_ ? 1 - lr * wd : 1.0),
                                 T(lr / bias_correction1),
                                 T(std::sqrt(bias_correction2)),
                                 group.get("maximize") != 0,
                                 amsgrad};
    if (amsgrad) {
      detail::fused_update<T, 3>(op.c_str(), param, grad, {m, v, vmax}, T(inv_scale),
                                 [&f](T& w, T g, std::array<T, 3>& s) { f(w, g, s[0], s[1], s[2]); });
    } else {
      detail::fused_update<T, 2>(op.c_str(), param, grad, {m, v}, T(inv_scale), [&f](T& w, T g, std::array<T, 2>& s) {
        T unused = 0;
        f(w, g, s[0], s[1], unused);
      });
    }
  });
  for (auto& [key, buf] : fresh) state.buffers[key] = buf;
}

}  // namespace mantissa::optim
