// CIFAR-10, binary version (cifar-10-batches-bin): each file is a run of 3073-byte
// records, 1 label byte (0..9) then 3072 pixel bytes (1024 red, 1024 green, 1024 blue,
// each a 32x32 image row-major). The standard files hold 10000 records:
//   data_batch_1.bin ... data_batch_5.bin (train), test_batch.bin (test).
//
//   auto raw = mt::data::read_cifar10("cifar-10-batches-bin/test_batch.bin");  // uint8 [10000, 3, 32, 32]
//   auto train = mt::data::load_cifar10("cifar-10-batches-bin", mt::data::Split::Train);  // float32, 50000
#pragma once
#include <string>

#include "data/dataset.h"

namespace mantissa::data {

inline constexpr const char* kCifar10ClassNames[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                       "dog",      "frog",       "horse", "ship", "truck"};

// Reads one batch file (plain or gzip-compressed): images uint8 [N, 3, 32, 32],
// labels int64 [N]. Checks that the file is a whole number of records and every
// label is 0..9; any failure is a mantissa::Error naming the file.
LabeledImages read_cifar10(const std::string& path);

// Loads a split from the extracted cifar-10-batches-bin directory: images float32
// [N, 3, 32, 32] scaled to [0, 1], labels int64 [N].
LabeledImages load_cifar10(const std::string& dir, Split split = Split::Train);

}  // namespace mantissa::data
