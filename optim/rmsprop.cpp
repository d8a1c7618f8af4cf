#include "optim/rmsprop.h"

#include "core/error.h"

namespace mantissa::optim {

namespace {
ParamGroup rmsprop_defaults(const RMSpropOptions& o) {
  return {.lr = o.lr,
          .weight_decay = o.weight_decay,
          .momentum = o.momentum,
          .eps = o.eps,
          .alpha = o.alpha,
          .centered = o.centered,
          .maximize = o.maximize};
}
}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults)
    : Optimizer("RMSprop", rmsprop_defaults(defaults)) {
  init_groups(std::move(groups));
}

void RMSprop::check_group(const ParamGroup& g) const {
  const double lr = *g.lr, eps = *g.eps, alpha = *g.alpha, momentum = *g.momentum, wd = *g.weight_decay;
  MT_CHECK(lr >= 0, "RMSprop", "invalid learning rate: ", lr);
  MT_CHECK(eps >= 0, "RMSprop", "invalid epsilon value: ", eps);
  MT_CHECK(momentum >= 0, "RMSprop", "invalid momentum value: ", momentum);
  MT_CHECK(wd >= 0, "RMSprop", "invalid weight_decay value: ", wd);
  MT_CHECK(alpha >= 0, "RMSprop", "invalid alpha value: ", alpha);
}

std::vector<std::string> RMSprop::required_buffers(const ParamGroup& group) const {
  std::vector<std::string> out = {"square_avg"};
  if (*group.momentum > 0) out.push_back("momentum_buffer");
  if (*group.centered) out.push_back("grad_avg");
  return out;
}

math::OptimizerHyper RMSprop::step_hyper(const ParamGroup& group) const {
  math::OptimizerHyper h;
  h.kind = math::OptimizerKind::RmsProp;
  h.lr = *group.lr;
  h.weight_decay = *group.weight_decay;
  h.momentum = *group.momentum;
  h.eps = *group.eps;
  h.alpha = *group.alpha;
  h.centered = *group.centered;
  h.maximize = *group.maximize;
  return h;
}

// The kernel's order: square_avg, then momentum_buffer, then grad_avg (core/step_math.h).
std::vector<std::string> RMSprop::step_buffers(const ParamGroup& group) const { return required_buffers(group); }

}  // namespace mantissa::optim
