// CIFAR-100, binary version (cifar-100-binary): each file is a run of 3074-byte records,
// 1 coarse label byte (0..19, the superclass), 1 fine label byte (0..99, the class), then
// 3072 pixel bytes (1024 red, 1024 green, 1024 blue, each a 32x32 image row-major).
// The standard files: train.bin (50000 records) and test.bin (10000).
//
//   auto raw = mt::data::read_cifar100("cifar-100-binary/test.bin");           // uint8 [10000, 3, 32, 32], fine labels
//   auto train = mt::data::load_cifar100("cifar-100-binary", mt::data::Split::Train,
//                                        mt::data::Cifar100Labels::Coarse);     // float32, 20 classes
#pragma once
#include <string>

#include "data/dataset.h"

namespace mantissa::data {

// Which of the two label bytes becomes the target.
enum class Cifar100Labels { Fine, Coarse };

// Number of classes of each labelling: 100 fine, 20 coarse.
inline constexpr int64_t cifar100_classes(Cifar100Labels labels) { return labels == Cifar100Labels::Fine ? 100 : 20; }

// Reads one file (plain or gzip-compressed): images uint8 [N, 3, 32, 32], labels int64 [N]
// (fine or coarse). Checks that the file is a whole number of records and that both label
// bytes of every record are in range; any failure is a mantissa::Error naming the file
// (and the record and its byte offset).
LabeledImages read_cifar100(const std::string& path, Cifar100Labels labels = Cifar100Labels::Fine);

// Loads train.bin or test.bin from the extracted cifar-100-binary directory: images
// float32 [N, 3, 32, 32] scaled to [0, 1], labels int64 [N].
LabeledImages load_cifar100(const std::string& dir, Split split = Split::Train,
                            Cifar100Labels labels = Cifar100Labels::Fine);

}  // namespace mantissa::data
