// The CIFAR example's data: CIFAR-10, CIFAR-100 or Fashion-MNIST as uint8 images
// [N, C, 32, 32] in memory, with the per-channel statistics used to normalize them.
#pragma once
#include <mantissa.h>

#include <string>
#include <vector>

namespace cifar {

struct DataSet {
  std::string name;                           // "cifar10", "cifar100" or "fashion-mnist"
  mantissa::data::LabeledImages train, test;  // images uint8 [N, C, 32, 32], labels int64 [N]
  int64_t num_classes = 0;
  // Per channel, in pixel units (0..255), over the training images.
  std::vector<double> mean, stddev;
};

// `dataset`: "cifar10", "cifar100", "fashion-mnist" or "auto" (what `dir` holds:
// data_batch_1.bin -> CIFAR-10, train.bin -> CIFAR-100, else Fashion-MNIST IDX files;
// an empty dir means Debian's Fashion-MNIST). Fashion-MNIST is padded from 28x28 to 32x32
// (its single gray channel is repeated to 3 per batch, see to_network_input).
// `coarse`: CIFAR-100's 20 superclasses instead of its 100 classes. `limit` > 0 keeps the
// first `limit` images of each split.
DataSet load(std::string dataset, std::string dir, bool coarse, int64_t limit);

// uint8 [N, C, 32, 32] -> float32 [N, 3, 32, 32]: normalized per channel, a 1-channel
// image repeated to 3.
mantissa::Tensor to_network_input(const mantissa::Tensor& images, const DataSet& data);

}  // namespace cifar
