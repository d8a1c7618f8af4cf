// Fuzzes read_cifar10 on plain and gzip-compressed input.
#include <mantissa.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, ".bin");
  try {
    mantissa::data::LabeledImages d = mantissa::data::read_cifar10(path);
    (void)d.labels.numel();
  } catch (const mantissa::Error&) {
  }
  return 0;
}
