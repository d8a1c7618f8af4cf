// Fuzzes load_safetensors: any input must load or throw mantissa::Error; loaded tensors
// must be readable end to end.
#include <mantissa.h>

#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, ".safetensors");
  try {
    mantissa::SafeTensors f = mantissa::load_safetensors(path);
    for (const auto& [name, t] : f.tensors) (void)t.contiguous().nbytes();
  } catch (const mantissa::Error&) {
  }
  return 0;
}
