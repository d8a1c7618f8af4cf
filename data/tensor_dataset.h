// TensorDataset: examples are the rows (dim 0) of a data tensor and a target tensor.
//
//   mt::data::TensorDataset ds(mt::randn({1000, 784}), mt::randint(0, 10, {1000}));
//   ds.size();                  // 1000
//   auto [x, y] = ds.get(3);    // x: [784], y: 0-dim int64
//   mt::data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true});
#pragma once
#include "data/dataset.h"

namespace mantissa::data {

class TensorDataset : public Dataset {
 public:
  // `data` and `targets` must have at least one dim and equal sizes in dim 0;
  // `targets` may be undefined (unlabeled data). Non-contiguous inputs are made
  // contiguous once here, so batches never copy the whole tensor.
  TensorDataset(Tensor data, Tensor targets);
  explicit TensorDataset(Tensor data) : TensorDataset(std::move(data), Tensor()) {}

  int64_t size() const override { return data_.size(0); }
  // Views of row `index` (no copy).
  Example get(int64_t index) const override;
  // Gathers the rows with index_select: one copy per batch, no per-example stacking.
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_, targets_;
};

}  // namespace mantissa::data
