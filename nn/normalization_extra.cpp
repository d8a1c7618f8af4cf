// GroupNorm, RMSNorm, InstanceNorm1d/2d and the channel dropout modules: each a module around
// its function in nn/functional_norm_extra.cpp.
#include <sstream>

#include "core/error.h"
#include "core/shape.h"
#include "nn/activation.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/normalization.h"

namespace mantissa::nn {

GroupNorm::GroupNorm(int64_t groups, int64_t channels, const GroupNormOptions& o)
    : num_groups(groups), num_channels(channels), options(o) {
  MT_CHECK(groups > 0 && channels > 0 && channels % groups == 0, "GroupNorm", "num_groups (", groups,
           ") must be positive and divide num_channels (", channels, ")");
  weight = register_parameter("weight", o.affine ? empty({channels}) : Tensor());
  bias = register_parameter("bias", o.affine ? empty({channels}) : Tensor());
  reset_parameters();
}

void GroupNorm::reset_parameters() {
  if (!options.affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor GroupNorm::forward(const Tensor& x) {
  MT_CHECK(x.defined() && x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm", "expected an input [N, ",
           num_channels, ", ...], got ", x.defined() ? x.shape_str() : "undefined");
  return functional::group_norm(x, num_groups, weight, bias, options.eps);
}

std::string GroupNorm::extra_repr() const {
  std::ostringstream os;
  os << num_groups << ", " << num_channels << ", eps=" << options.eps
     << ", affine=" << (options.affine ? "true" : "false");
  return os.str();
}

RMSNorm::RMSNorm(Shape shape, const RMSNormOptions& o) : normalized_shape(std::move(shape)), options(o) {
  weight = register_parameter("weight", o.elementwise_affine ? empty(normalized_shape) : Tensor());
  reset_parameters();
}

void RMSNorm::reset_parameters() {
  if (options.elementwise_affine) init::ones_(weight);
}

Tensor RMSNorm::forward(const Tensor& x) { return functional::rms_norm(x, normalized_shape, weight, options.eps); }

std::string RMSNorm::extra_repr() const {
  std::ostringstream os;
  os << mantissa::shape_str(normalized_shape) << ", eps=";
  if (options.eps)
    os << *options.eps;
  else
    os << "None";
  os << ", elementwise_affine=" << (options.elementwise_affine ? "true" : "false");
  return os.str();
}

InstanceNorm::InstanceNorm(int64_t c, const InstanceNormOptions& o, const char* name, int64_t rank)
    : num_features(c), options(o), name_(name), rank_(rank) {
  MT_CHECK(c > 0, name, "num_features must be positive, got ", c);
  weight = register_parameter("weight", o.affine ? empty({c}) : Tensor());
  bias = register_parameter("bias", o.affine ? empty({c}) : Tensor());
  reset_parameters();
}

void InstanceNorm::reset_parameters() {
  if (!options.affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor InstanceNorm::forward(const Tensor& x) {
  MT_CHECK(x.defined() && (x.dim() == rank_ || x.dim() == rank_ - 1), name_, "expected a ", rank_ - 1, "-D or ", rank_,
           "-D input, got ", x.defined() ? x.shape_str() : "undefined");
  const bool batched = x.dim() == rank_;
  const Tensor xb = batched ? x : x.unsqueeze(0);
  MT_CHECK(xb.size(1) == num_features, name_, "expected ", num_features, " channels, got shape ", x.shape_str());
  Tensor y = functional::instance_norm(xb, weight, bias, options.eps);
  return batched ? y : y.squeeze(0);
}

std::string InstanceNorm::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << options.eps << ", affine=" << (options.affine ? "true" : "false");
  return os.str();
}

InstanceNorm1d::InstanceNorm1d(int64_t c, const InstanceNormOptions& o) : InstanceNorm(c, o, "InstanceNorm1d", 3) {}
InstanceNorm2d::InstanceNorm2d(int64_t c, const InstanceNormOptions& o) : InstanceNorm(c, o, "InstanceNorm2d", 4) {}

Tensor Dropout1d::forward(const Tensor& x) { return functional::dropout1d(x, p, is_training()); }
Tensor Dropout2d::forward(const Tensor& x) { return functional::dropout2d(x, p, is_training()); }

}  // namespace mantissa::nn
