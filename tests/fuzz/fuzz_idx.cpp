// Fuzzes read_idx on plain and gzip-compressed input (the reader detects gzip by its magic
// bytes, so the seed corpus holds both kinds).
#include <mantissa.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, ".idx");
  try {
    mantissa::Tensor t = mantissa::data::read_idx(path);
    // Converting touches every element (and once looped over empty rows for minutes).
    (void)t.to(mantissa::kFloat32).numel();
  } catch (const mantissa::Error&) {
  }
  return 0;
}
