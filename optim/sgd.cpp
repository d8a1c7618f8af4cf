#include "optim/sgd.h"

#include "core/error.h"

namespace mantissa::optim {

namespace {
ParamGroup sgd_defaults(const SGDOptions& o) {
  return {.lr = o.lr,
          .weight_decay = o.weight_decay,
          .momentum = o.momentum,
          .dampening = o.dampening,
          .nesterov = o.nesterov,
          .maximize = o.maximize};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults) : Optimizer("SGD", sgd_defaults(defaults)) {
  init_groups(std::move(groups));
}

void SGD::check_group(const ParamGroup& g) const {
  const double lr = *g.lr, momentum = *g.momentum, dampening = *g.dampening, wd = *g.weight_decay;
  const bool nesterov = *g.nesterov;
  MT_CHECK(lr >= 0, "SGD", "invalid learning rate: ", lr);
  MT_CHECK(momentum >= 0, "SGD", "invalid momentum value: ", momentum);
  MT_CHECK(wd >= 0, "SGD", "invalid weight_decay value: ", wd);
  MT_CHECK(!nesterov || (momentum > 0 && dampening == 0), "SGD",
           "Nesterov momentum requires a momentum and zero dampening (momentum ", momentum, ", dampening ", dampening,
           ")");
}

math::OptimizerHyper SGD::step_hyper(const ParamGroup& group) const {
  math::OptimizerHyper h;
  h.kind = math::OptimizerKind::Sgd;
  h.lr = *group.lr;
  h.weight_decay = *group.weight_decay;
  h.momentum = *group.momentum;
  h.dampening = *group.dampening;
  h.nesterov = *group.nesterov;
  h.maximize = *group.maximize;
  return h;
}

std::vector<std::string> SGD::step_buffers(const ParamGroup& group) const {
  if (*group.momentum != 0) return {"momentum_buffer"};
  return {};
}

}  // namespace mantissa::optim
