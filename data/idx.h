// The IDX file format of MNIST and its relatives (Fashion-MNIST, KMNIST, EMNIST),
// plain or gzip-compressed. Layout, all integers big-endian:
//   magic: 0x00 0x00 <type> <ndim>,  ndim x uint32 sizes,  the elements row-major.
// Type codes and the dtype read_idx returns:
//   0x08 uint8 -> UInt8   0x09 int8 -> Int32   0x0B int16 -> Int32
//   0x0C int32 -> Int32   0x0D float32 -> Float32   0x0E float64 -> Float64
//
//   mt::Tensor labels = mt::data::read_idx("t10k-labels-idx1-ubyte.gz");   // uint8 [10000]
//   mt::data::write_idx("subset-idx3-ubyte.gz", images.narrow(0, 0, 100)); // gzip by suffix
#pragma once
#include <string>

#include "core/tensor.h"

namespace mantissa::data {

// Reads an IDX file (gzip-compressed or not, detected from the content). Validates
// the magic number, the dimension count and sizes, and that the payload is complete
// and not followed by extra bytes; every failure is a mantissa::Error naming the path.
Tensor read_idx(const std::string& path);

// Writes `t` (UInt8, Int32, Float32 or Float64) as an IDX file; gzip-compressed when
// `path` ends in ".gz".
void write_idx(const std::string& path, const Tensor& t);

}  // namespace mantissa::data
