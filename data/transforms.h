// Example transforms: Normalize, and TransformDataset to apply any transform per example.
//
//   // per example (data [C, H, W]), as a dataset wrapper:
//   mt::data::TransformDataset ds(mnist_train, mt::data::Normalize({0.2860}, {0.3530}));
//   // per batch (data [N, C, H, W]), on the loader's worker thread after collation:
//   mt::data::DataLoader loader(mnist_train, {.batch_size = 64,
//                                             .batch_transform = mt::data::Normalize({0.2860}, {0.3530})});
#pragma once
#include <concepts>
#include <functional>
#include <memory>
#include <vector>

#include "data/dataset.h"

namespace mantissa::data {

// (x - mean[c]) / stddev[c] along the channel dim. The default channel_dim -3 is the
// channel of both an example [C, H, W] and a batch [N, C, H, W]. Integer data is
// converted to float32 first; floating data keeps its dtype.
class Normalize {
 public:
  // `mean` and `stddev` hold one value per channel, or one value for all channels.
  Normalize(std::vector<double> mean, std::vector<double> stddev, int64_t channel_dim = -3);

  Tensor operator()(const Tensor& x) const;
  // Normalizes e.data and passes the target through.
  Example operator()(Example e) const {
    e.data = (*this)(e.data);
    return e;
  }

 private:
  std::vector<double> mean_, stddev_;
  int64_t channel_dim_;
};

// A dataset whose examples are `transform(base.get(i))`.
class TransformDataset : public Dataset {
 public:
  using Transform = std::function<Example(Example)>;
  TransformDataset(std::shared_ptr<const Dataset> base, Transform transform);
  template <typename D>
  requires std::derived_from<D, Dataset> TransformDataset(D base, Transform transform)
      : TransformDataset(std::make_shared<const D>(std::move(base)), std::move(transform)) {}

  int64_t size() const override { return base_->size(); }
  Example get(int64_t index) const override { return transform_(base_->get(index)); }

 private:
  std::shared_ptr<const Dataset> base_;
  Transform transform_;
};

}  // namespace mantissa::data
