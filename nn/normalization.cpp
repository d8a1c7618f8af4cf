#include "nn/normalization.h"

#include <sstream>

#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace mantissa::nn {

BatchNorm::BatchNorm(int64_t c, const BatchNormOptions& o, const char* name, int64_t min_dim, int64_t max_dim)
    : num_features(c), options(o), layer_name_(name), min_dim_(min_dim), max_dim_(max_dim) {
  MT_CHECK(c > 0, name, "num_features must be positive, got ", c);
  weight = register_parameter("weight", o.affine ? empty({c}) : Tensor());
  bias = register_parameter("bias", o.affine ? empty({c}) : Tensor());
  if (o.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::Int64}));
  }
  reset_parameters();
}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm::forward(const Tensor& x) {
  MT_CHECK(x.defined() && x.dim() >= min_dim_ && x.dim() <= max_dim_, layer_name_, "expected a ", min_dim_,
           min_dim_ == max_dim_ ? "" : mantissa::detail::concat(" or ", max_dim_), "-D input, got shape ",
           x.defined() ? x.shape_str() : "undefined");
  MT_CHECK(x.size(1) == num_features, layer_name_, "expected ", num_features, " channels in dim 1, got shape ",
           x.shape_str());
  double factor = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats) {
    NoGradGuard guard;
    if (options.momentum)
      num_batches_tracked.add_(1);
    else
      factor = 1.0 / double(count_batch());
  }
  // Batch statistics in training, or always when no running statistics are kept.
  const bool use_batch = is_training() || !options.track_running_stats;
  const bool update = !is_training() || options.track_running_stats;
  return functional::batch_norm(x, update ? running_mean : Tensor(), update ? running_var : Tensor(), weight, bias,
                                use_batch, factor, options.eps);
}

int64_t BatchNorm::count_batch() {
  if (!counted_buffer_.is_same(num_batches_tracked) || counted_version_ != num_batches_tracked.version()) {
    host_count_ = num_batches_tracked.item<int64_t>();
    counted_buffer_ = num_batches_tracked;
  }
  num_batches_tracked.add_(1);
  counted_version_ = num_batches_tracked.version();
  return ++host_count_;
}

std::string BatchNorm::extra_repr() const {
  std::ostringstream os;
  os << num_features << ", eps=" << options.eps << ", momentum=";
  if (options.momentum)
    os << *options.momentum;
  else
    os << "None";
  os << ", affine=" << (options.affine ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats ? "true" : "false");
  return os.str();
}

BatchNorm1d::BatchNorm1d(int64_t c, const BatchNormOptions& o) : BatchNorm(c, o, "BatchNorm1d", 2, 3) {}
BatchNorm2d::BatchNorm2d(int64_t c, const BatchNormOptions& o) : BatchNorm(c, o, "BatchNorm2d", 4, 4) {}

LayerNorm::LayerNorm(Shape shape, const LayerNormOptions& o) : normalized_shape(std::move(shape)), options(o) {
  MT_CHECK(!normalized_shape.empty(), "LayerNorm", "normalized_shape must not be empty");
  weight = register_parameter("weight", o.elementwise_affine ? empty(normalized_shape) : Tensor());
  bias = register_parameter("bias", o.elementwise_affine ? empty(normalized_shape) : Tensor());
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!options.elementwise_affine) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) {
  return functional::layer_norm(x, normalized_shape, weight, bias, options.eps);
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < normalized_shape.size(); ++i) os << (i ? ", " : "") << normalized_shape[i];
  os << (normalized_shape.size() == 1 ? ",)" : ")") << ", eps=" << options.eps
     << ", elementwise_affine=" << (options.elementwise_affine ? "true" : "false");
  return os.str();
}

}  // namespace mantissa::nn
