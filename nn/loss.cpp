#include "nn/loss.h"

namespace mantissa::nn {

namespace F = functional;
using mantissa::detail::concat;

namespace {
std::string reduction_repr(Reduction r) { return concat("reduction=", reduction_name(r)); }
const char* kl_reduction_name(F::KlDivReduction r) {
  switch (r) {
    case F::KlDivReduction::None:
      return "none";
    case F::KlDivReduction::Mean:
      return "mean";
    case F::KlDivReduction::Sum:
      return "sum";
    case F::KlDivReduction::BatchMean:
      return "batchmean";
  }
  return "mean";
}
}  // namespace

Tensor MSELoss::forward(const Tensor& x, const Tensor& t) { return F::mse_loss(x, t, reduction); }
std::string MSELoss::extra_repr() const { return reduction_repr(reduction); }
Tensor L1Loss::forward(const Tensor& x, const Tensor& t) { return F::l1_loss(x, t, reduction); }
std::string L1Loss::extra_repr() const { return reduction_repr(reduction); }
Tensor SmoothL1Loss::forward(const Tensor& x, const Tensor& t) { return F::smooth_l1_loss(x, t, reduction, beta); }
std::string SmoothL1Loss::extra_repr() const { return concat(reduction_repr(reduction), ", beta=", beta); }
Tensor HuberLoss::forward(const Tensor& x, const Tensor& t) { return F::huber_loss(x, t, reduction, delta); }
std::string HuberLoss::extra_repr() const { return concat(reduction_repr(reduction), ", delta=", delta); }
Tensor BCELoss::forward(const Tensor& x, const Tensor& t) { return F::binary_cross_entropy(x, t, opts); }
std::string BCELoss::extra_repr() const { return reduction_repr(opts.reduction); }
Tensor BCEWithLogitsLoss::forward(const Tensor& x, const Tensor& t) {
  return F::binary_cross_entropy_with_logits(x, t, opts);
}
std::string BCEWithLogitsLoss::extra_repr() const { return reduction_repr(opts.reduction); }
Tensor CrossEntropyLoss::forward(const Tensor& x, const Tensor& t) { return F::cross_entropy(x, t, opts); }
std::string CrossEntropyLoss::extra_repr() const {
  return concat(reduction_repr(opts.reduction), ", ignore_index=", opts.ignore_index,
                ", label_smoothing=", opts.label_smoothing);
}
Tensor NLLLoss::forward(const Tensor& x, const Tensor& t) { return F::nll_loss(x, t, opts); }
std::string NLLLoss::extra_repr() const {
  return concat(reduction_repr(opts.reduction), ", ignore_index=", opts.ignore_index);
}
Tensor KLDivLoss::forward(const Tensor& x, const Tensor& t) { return F::kl_div(x, t, opts); }
std::string KLDivLoss::extra_repr() const {
  return concat("reduction=", kl_reduction_name(opts.reduction), ", log_target=", opts.log_target ? "true" : "false");
}

}  // namespace mantissa::nn
