#include "data/tensor_dataset.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace mantissa::data {

TensorDataset::TensorDataset(Tensor data, Tensor targets) {
  MT_CHECK(data.defined(), "TensorDataset", "data tensor is undefined");
  MT_CHECK(data.dim() >= 1, "TensorDataset", "data must have at least one dim (the example index), got a 0-dim tensor");
  if (targets.defined()) {
    MT_CHECK(targets.dim() >= 1, "TensorDataset",
             "targets must have at least one dim (the example index), got a 0-dim tensor");
    MT_CHECK(targets.size(0) == data.size(0), "TensorDataset",
             "data and targets must have the same size in dim 0, got ", data.shape_str(), " and ", targets.shape_str());
  }
  data_ = data.contiguous();
  targets_ = targets.defined() ? targets.contiguous() : targets;
}

Example TensorDataset::get(int64_t index) const {
  MT_CHECK(index >= 0 && index < size(), "TensorDataset::get", "index ", index, " is out of range for a dataset of ",
           size(), " examples");
  return {data_.select(0, index), targets_.defined() ? targets_.select(0, index) : Tensor()};
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices)
    MT_CHECK(i >= 0 && i < size(), "TensorDataset::get_batch", "index ", i, " is out of range for a dataset of ",
             size(), " examples");
  Tensor idx = from_vector(indices, {int64_t(indices.size())}, {.dtype = kInt64, .device = data_.device()});
  Batch b;
  b.data = index_select(data_, 0, idx);
  if (targets_.defined())
    b.target = index_select(targets_, 0, targets_.device() == data_.device() ? idx : idx.to(targets_.device()));
  return b;
}

}  // namespace mantissa::data
