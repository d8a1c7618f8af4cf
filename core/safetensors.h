// The safetensors file format (Hugging Face), read and written:
//   8 bytes   N, little-endian uint64: the header length
//   N bytes   JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//                    "__metadata__": {"key": "value", ...}}   (padded with spaces to 8-byte alignment)
//   the rest  the tensors' bytes, row-major little-endian, offsets relative to the end of the header
// Files match the reference writer byte for byte: tensors ordered by descending dtype
// alignment then name, header keys in the order dtype, shape, data_offsets.
// dtypes: F32 F64 F16 BF16 I64 I32 U8 BOOL.
//
//   mt::save_safetensors("model.safetensors", {{"fc.weight", w}, {"fc.bias", b}}, {{"step", "1000"}});
//   mt::SafeTensors f = mt::load_safetensors("model.safetensors");
//   mt::Tensor w2 = f.tensors.at("fc.weight");
//   std::string step = f.metadata.at("step");
#pragma once
#include <map>
#include <string>

#include "core/tensor.h"

namespace mantissa {

struct SafeTensors {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any device, any layout: saved as contiguous CPU data) to `path`.
// Writes through AtomicFile (core/atomic_file.h): a uniquely named temporary next to `path`
// (never following a link), synced and renamed over `path`, so a failed or interrupted save
// leaves the previous file intact; temporaries of killed saves are removed by the next
// successful one. Throws mantissa::Error on any failure (removing the temporary file).
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file into CPU tensors. Validates everything before returning:
// the file and header sizes, the JSON, each entry's dtype, shape and offsets (in
// range, matching shape x dtype size, neither overlapping nor leaving gaps), no bytes
// after the last tensor, and BOOL bytes being 0 or 1. Any violation is a
// mantissa::Error naming the file and the offending key.
SafeTensors load_safetensors(const std::string& path);

}  // namespace mantissa
