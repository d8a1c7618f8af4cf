#include "optim/sgd.h"

#include "core/elementwise_math.h"
#include "optim/fused_step.h"

namespace mantissa::optim {

namespace {
std::map<std::string, double> sgd_options(const SGDOptions& o) {
  return {{"momentum", o.momentum},
          {"dampening", o.dampening},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults)
    : Optimizer("SGD", defaults.lr, defaults.weight_decay, sgd_options(defaults)) {
  init_groups(std::move(groups));
}

void SGD::check_group(const ParamGroup& g) const {
  const double lr = g.get("lr"), momentum = g.get("momentum"), dampening = g.get("dampening");
  const double wd = g.get("weight_decay"), nesterov = g.get("nesterov"), maximize = g.get("maximize");
  MT_CHECK(lr >= 0, "SGD", "invalid learning rate: ", lr);
  MT_CHECK(momentum >= 0, "SGD", "invalid momentum value: ", momentum);
  MT_CHECK(wd >= 0, "SGD", "invalid weight_decay value: ", wd);
  MT_CHECK(nesterov == 0 || nesterov == 1, "SGD", "nesterov must be 0 or 1, got ", nesterov);
  MT_CHECK(maximize == 0 || maximize == 1, "SGD", "maximize must be 0 or 1, got ", maximize);
  MT_CHECK(!nesterov || (momentum > 0 && dampening == 0), "SGD",
           "Nesterov momentum requires a momentum and zero dampening (momentum ", momentum, ", dampening ", dampening,
           ")");
}

void SGD::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state, float inv_scale) {
  const double momentum = group.get("momentum");
  const bool use_buffer = momentum != 0;
  const bool first_step = use_buffer && !state.buffers.count("momentum_buffer");
  // The buffer joins the state only after a successful pass (a failed step changes nothing).
  Tensor buf;
  if (use_buffer)
    buf = first_step ? empty(param.sizes(), {param.dtype(), param.device()}) : state.buffers.at("momentum_buffer");
  detail::dispatch_master("SGD.step", param, [&]<typename T>() {
    const math::SgdUpdateT<T> f{T(*group.lr),
                                T(momentum),
                                T(1.0 - group.get("dampening")),
                                T(*group.weight_decay),
                                group.get("nesterov") != 0,
                                group.get("maximize") != 0,
                                first_step};
    if (use_buffer) {
      detail::fused_update<T, 1>("SGD.step", param, grad, {buf}, T(inv_scale),
                                 [&f](T& w, T g, std::array<T, 1>& s) { f(w, g, s[0]); });
    } else {
      detail::fused_update<T, 0>("SGD.step", param, grad, {}, T(inv_scale), [&f](T& w, T g, std::array<T, 0>&) {
        T unused = 0;
        f(w, g, unused);
      });
    }
  });
  if (first_step) state.buffers["momentum_buffer"] = buf;
}

}  // namespace mantissa::optim
