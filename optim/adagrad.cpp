#include "optim/adagrad.h"

#include "core/error.h"

namespace mantissa::optim {

namespace {
ParamGroup adagrad_defaults(const AdagradOptions& o) {
  return {.lr = o.lr,
          .weight_decay = o.weight_decay,
          .eps = o.eps,
          .lr_decay = o.lr_decay,
          .initial_accumulator_value = o.initial_accumulator_value,
          .maximize = o.maximize};
}
}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& options)
    : Adagrad(std::vector<ParamGroup>{ParamGroup{.params = std::move(params)}}, options) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults)
    : Optimizer("Adagrad", adagrad_defaults(defaults)) {
  init_groups(std::move(groups));
}

void Adagrad::check_group(const ParamGroup& g) const {
  const double lr = *g.lr, lr_decay = *g.lr_decay, wd = *g.weight_decay, init = *g.initial_accumulator_value,
               eps = *g.eps;
  MT_CHECK(lr >= 0, "Adagrad", "invalid learning rate: ", lr);
  MT_CHECK(lr_decay >= 0, "Adagrad", "invalid lr_decay value: ", lr_decay);
  MT_CHECK(wd >= 0, "Adagrad", "invalid weight_decay value: ", wd);
  MT_CHECK(init >= 0, "Adagrad", "invalid initial_accumulator_value value: ", init);
  MT_CHECK(eps >= 0, "Adagrad", "invalid epsilon value: ", eps);
}

math::OptimizerHyper Adagrad::step_hyper(const ParamGroup& group) const {
  math::OptimizerHyper h;
  h.kind = math::OptimizerKind::Adagrad;
  h.lr = *group.lr;
  h.weight_decay = *group.weight_decay;
  h.eps = *group.eps;
  h.lr_decay = *group.lr_decay;
  h.maximize = *group.maximize;
  return h;
}

}  // namespace mantissa::optim
