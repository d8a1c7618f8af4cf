#include "optim/adam.h"

#include "core/error.h"

namespace mantissa::optim {

namespace {
ParamGroup adam_defaults(const AdamOptions& o) {
  return {.lr = o.lr,
          .weight_decay = o.weight_decay,
          .beta1 = o.betas[0],
          .beta2 = o.betas[1],
          .eps = o.eps,
          .amsgrad = o.amsgrad,
          .maximize = o.maximize};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam("Adam", std::move(groups), defaults, /*decoupled=*/false) {}

Adam::Adam(std::string name, std::vector<ParamGroup> groups, const AdamOptions& defaults, bool decoupled)
    : Optimizer(std::move(name), adam_defaults(defaults)), decoupled_(decoupled) {
  init_groups(std::move(groups));
}

void Adam::check_group(const ParamGroup& g) const {
  const std::string& op = name();
  const double lr = *g.lr, eps = *g.eps, b1 = *g.beta1, b2 = *g.beta2, wd = *g.weight_decay;
  MT_CHECK(lr >= 0, op, "invalid learning rate: ", lr);
  MT_CHECK(eps >= 0, op, "invalid epsilon value: ", eps);
  MT_CHECK(b1 >= 0 && b1 < 1, op, "invalid beta parameter at index 0: ", b1);
  MT_CHECK(b2 >= 0 && b2 < 1, op, "invalid beta parameter at index 1: ", b2);
  MT_CHECK(wd >= 0, op, "invalid weight_decay value: ", wd);
}

std::vector<std::string> Adam::required_buffers(const ParamGroup& group) const {
  if (*group.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

math::OptimizerHyper Adam::step_hyper(const ParamGroup& group) const {
  math::OptimizerHyper h;
  h.kind = math::OptimizerKind::Adam;
  h.lr = *group.lr;
  h.weight_decay = *group.weight_decay;
  h.beta1 = *group.beta1;
  h.beta2 = *group.beta2;
  h.eps = *group.eps;
  h.decoupled_weight_decay = decoupled_;
  h.amsgrad = *group.amsgrad;
  h.maximize = *group.maximize;
  return h;
}

std::vector<std::string> Adam::step_buffers(const ParamGroup& group) const { return required_buffers(group); }

}  // namespace mantissa::optim
