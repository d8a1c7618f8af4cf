// MNIST-style datasets (MNIST, Fashion-MNIST, KMNIST) from a directory of IDX files:
//   train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte
// each plain or with a .gz suffix (the "train-images.idx3-ubyte" spelling is accepted too).
//
//   auto train = mt::data::load_mnist(mt::data::kFashionMnistDir, mt::data::Split::Train);
//   // train.images: float32 [60000, 1, 28, 28] in [0, 1]; train.labels: int64 [60000]
//   mt::data::DataLoader loader(mt::data::TensorDataset(train.images, train.labels), {.batch_size = 64});
#pragma once
#include <string>

#include "data/dataset.h"

namespace mantissa::data {

// Where Debian's dataset-fashion-mnist package installs Fashion-MNIST.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads one split: images float32 [N, 1, H, W] scaled to [0, 1], labels int64 [N].
// A missing directory or file is a mantissa::Error naming the path.
LabeledImages load_mnist(const std::string& dir = kFashionMnistDir, Split split = Split::Train);

}  // namespace mantissa::data
