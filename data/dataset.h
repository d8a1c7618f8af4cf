// The Dataset interface: a sized, randomly indexable collection of examples.
// A DataLoader reads a dataset from one background thread, so get() and
// get_batch() must not modify shared state without a lock.
//
//   struct Squares : mt::data::Dataset {
//     int64_t size() const override { return 100; }
//     mt::data::Example get(int64_t i) const override {
//       return {mt::full({1}, double(i)), mt::full({}, double(i * i))};
//     }
//   };
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace mantissa::data {

// One example, or a batch of them (data [N, ...], target [N, ...]). An aggregate,
// so `auto& [x, y] = batch;` works. `target` may be undefined for unlabeled data.
struct Example {
  Tensor data;
  Tensor target;
};
using Batch = Example;

// A whole image dataset in memory: images [N, C, H, W], labels int64 [N].
struct LabeledImages {
  Tensor images;
  Tensor labels;
};

enum class Split { Train, Test };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The example at `index` (0 <= index < size()).
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices`, collated into a batch. The default stacks get(i);
  // in-memory datasets override it to gather rows in one op.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
};

// Stacks the data (and the targets, when defined) of `examples` along a new dim 0.
Batch default_collate(const std::vector<Example>& examples);

}  // namespace mantissa::data
