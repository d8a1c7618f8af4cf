// Normalization layers: BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm, RMSNorm, InstanceNorm1d/2d.
#pragma once
#include <optional>

#include "nn/module.h"

namespace mantissa::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  // Weight of the batch statistic in the running estimate; nullopt: a cumulative average.
  std::optional<double> momentum = 0.1;
  bool affine = true;               // learn weight (ones) and bias (zeros)
  bool track_running_stats = true;  // buffers running_mean, running_var, num_batches_tracked
};

// Batch normalization over dim 1 (channels), as torch.nn.BatchNorm*d. Training uses the
// batch statistics and updates the running ones (with the unbiased batch variance);
// eval mode normalizes with the running statistics.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  void reset_running_stats();
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_features;
  BatchNormOptions options;
  Tensor weight, bias;                                    // [C], undefined unless affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined unless tracked

 protected:
  BatchNorm(int64_t num_features, const BatchNormOptions& options, const char* name, int64_t min_dim, int64_t max_dim);

 private:
  // Counts a training batch into num_batches_tracked and returns the new count (the factor of
  // momentum = nullopt's cumulative average is 1 / count). The count is mirrored on the host:
  // reading the buffer every forward would be a device-to-host copy per step on a GPU. The
  // mirror holds while the buffer is the same tensor at the version this wrote; a load, a
  // move to another device or a user's write re-reads it once.
  int64_t count_batch();
  int64_t host_count_ = 0;
  Tensor counted_buffer_;
  uint64_t counted_version_ = 0;

  const char* layer_name_;
  int64_t min_dim_, max_dim_;
};

// Over [N, C] or [N, C, L] inputs.
//
//   mt::nn::BatchNorm1d bn(128);
//   mt::Tensor y = bn(x);              // x [N, 128]
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, const BatchNormOptions& options = {});
};

// Over [N, C, H, W] inputs.
//
//   mt::nn::BatchNorm2d bn(64, {.momentum = 0.01});
//   bn.eval();                         // use the running statistics
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, const BatchNormOptions& options = {});
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  // learn weight (ones) and bias (zeros) of normalized_shape
};

// Normalizes over the trailing dims `normalized_shape` of each sample.
//
//   mt::nn::LayerNorm ln(512);         // x [B, T, 512]
//   mt::nn::LayerNorm ln2({8, 64}, {.elementwise_affine = false});
class LayerNorm : public Module {
 public:
  LayerNorm(Shape normalized_shape, const LayerNormOptions& options = {});
  explicit LayerNorm(int64_t features, const LayerNormOptions& options = {}) : LayerNorm(Shape{features}, options) {}
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  Shape normalized_shape;
  LayerNormOptions options;
  Tensor weight, bias;
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;  // learn weight (ones) and bias (zeros) of [num_channels]
};

// x [N, C, ...]: the C channels in num_groups groups, each normalized over its channels and
// positions (functional::group_norm).    mt::nn::GroupNorm gn(8, 64);   // x [N, 64, H, W]
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, const GroupNormOptions& options = {});
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_groups, num_channels;
  GroupNormOptions options;
  Tensor weight, bias;
};

struct RMSNormOptions {
  std::optional<double> eps;       // default: the machine epsilon of the input's dtype (PyTorch's)
  bool elementwise_affine = true;  // learn weight (ones) of normalized_shape
};

// x / rms(x) * weight over the trailing dims normalized_shape (functional::rms_norm).
//   mt::nn::RMSNorm norm(512);      // x [B, T, 512]
class RMSNorm : public Module {
 public:
  RMSNorm(Shape normalized_shape, const RMSNormOptions& options = {});
  explicit RMSNorm(int64_t features, const RMSNormOptions& options = {}) : RMSNorm(Shape{features}, options) {}
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  Shape normalized_shape;
  RMSNormOptions options;
  Tensor weight;
};

struct InstanceNormOptions {
  double eps = 1e-5;
  bool affine = false;  // PyTorch's default; learn weight (ones) and bias (zeros) of [num_features]
};

// Each (sample, channel) normalized over its positions (functional::instance_norm), without
// running statistics. InstanceNorm1d takes [N, C, L] (or unbatched [C, L]), InstanceNorm2d
// [N, C, H, W] (or [C, H, W]).
class InstanceNorm : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_features;
  InstanceNormOptions options;
  Tensor weight, bias;

 protected:
  InstanceNorm(int64_t num_features, const InstanceNormOptions& options, const char* name, int64_t rank);

 private:
  const char* name_;
  int64_t rank_;  // of a batched input
};

class InstanceNorm1d : public InstanceNorm {
 public:
  explicit InstanceNorm1d(int64_t num_features, const InstanceNormOptions& options = {});
};

class InstanceNorm2d : public InstanceNorm {
 public:
  explicit InstanceNorm2d(int64_t num_features, const InstanceNormOptions& options = {});
};

}  // namespace mantissa::nn
