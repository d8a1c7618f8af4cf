#include "optim/sgd.h"

#include "core/error.h"

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

math::OptimizerHyper SGD::step_hyper(const ParamGroup& group) const {
  math::OptimizerHyper h;
  h.kind = math::OptimizerKind::Sgd;
  h.lr = *group.lr;
  h.weight_decay = *group.weight_decay;
  h.momentum = group.get("momentum");
  h.dampening = group.get("dampening");
  h.nesterov = group.get("nesterov") != 0;
  h.maximize = group.get("maximize") != 0;
  return h;
}

std::vector<std::string> SGD::step_buffers(const ParamGroup& group) const {
  if (group.get("momentum") != 0) return {"momentum_buffer"};
  return {};
}

}  // namespace mantissa::optim
