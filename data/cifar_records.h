// Internal: the record reader shared by the CIFAR-10 and CIFAR-100 binary formats. A file is
// whole records of `label_bytes` label bytes and 3 x 32 x 32 pixel bytes, plain or gzip. It is
// streamed in blocks of records (memory follows the data actually decompressed), with the
// record count capped by the data set's size and by the decompression limit of the file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "data/cifar.h"

namespace mantissa::data::detail {

struct CifarFormat {
  const char* op;            // names the caller in errors ("read_cifar10")
  const char* name;          // "CIFAR-10"
  int64_t label_bytes;       // 1 (CIFAR-10) or 2 (CIFAR-100: coarse, fine)
  int64_t max_records;       // the whole data set
  const char* wrong_format;  // a hint appended to a misaligned-size error
};

// label_of(record labels, record index, byte offset) validates the record's label bytes and
// returns its label (throwing mantissa::Error naming the record and offset when out of range).
using CifarLabelOf = std::function<int64_t(const uint8_t* labels, int64_t index, int64_t offset)>;

// images uint8 [N, 3, 32, 32], labels int64 [N].
LabeledImages read_cifar_records(const std::string& path, const CifarFormat& format, const CifarLabelOf& label_of);

}  // namespace mantissa::data::detail
