#include "data/transforms.h"

#include <cmath>

#include "autograd/ops.h"
#include "core/error.h"

namespace mantissa::data {

Normalize::Normalize(std::vector<double> mean, std::vector<double> stddev, int64_t channel_dim)
    : mean_(std::move(mean)), stddev_(std::move(stddev)), channel_dim_(channel_dim) {
  MT_CHECK(!mean_.empty(), "Normalize", "mean must hold at least one value");
  MT_CHECK(mean_.size() == stddev_.size(), "Normalize", "mean has ", mean_.size(), " values but stddev has ",
           stddev_.size());
  for (size_t c = 0; c < stddev_.size(); ++c)
    MT_CHECK(std::isfinite(stddev_[c]) && stddev_[c] != 0, "Normalize", "stddev[", c,
             "] must be finite and nonzero, got ", stddev_[c]);
}

Tensor Normalize::operator()(const Tensor& x) const {
  MT_CHECK(x.defined(), "Normalize", "input tensor is undefined");
  const int64_t d = channel_dim_ < 0 ? channel_dim_ + x.dim() : channel_dim_;
  MT_CHECK(d >= 0 && d < x.dim(), "Normalize", "channel dim ", channel_dim_, " is out of range for input of shape ",
           x.shape_str());
  const int64_t channels = x.size(d);
  const int64_t n = int64_t(mean_.size());
  MT_CHECK(n == 1 || n == channels, "Normalize", "input of shape ", x.shape_str(), " has ", channels,
           " channels in dim ", channel_dim_, " but mean/stddev hold ", n, " values");
  // [C, 1, ..., 1]: broadcasts over the dims after the channel dim (and over those before it).
  Shape s(size_t(x.dim() - d), 1);
  s[0] = n;
  const DType dt = x.is_floating_point() ? x.dtype() : kFloat32;
  Tensor m = from_vector(mean_, s, {.dtype = dt, .device = x.device()});
  Tensor sd = from_vector(stddev_, s, {.dtype = dt, .device = x.device()});
  return ((x.dtype() == dt ? x : x.to(dt)) - m) / sd;
}

TransformDataset::TransformDataset(std::shared_ptr<const Dataset> base, Transform transform)
    : base_(std::move(base)), transform_(std::move(transform)) {
  MT_CHECK(base_ != nullptr, "TransformDataset", "base dataset is null");
  MT_CHECK(bool(transform_), "TransformDataset", "transform is empty");
}

}  // namespace mantissa::data
