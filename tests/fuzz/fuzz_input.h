// Shared by the fuzz harnesses: the readers take paths, so each input goes to a file first.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fuzz {

// Writes the input to a per-process temporary file (reused across inputs) and returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const char* suffix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/mantissa_fuzz_" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("fuzz: cannot write " + path);
  if (size && std::fwrite(data, 1, size, f) != size) throw std::runtime_error("fuzz: cannot write " + path);
  std::fclose(f);
  return path;
}

}  // namespace fuzz

// Every harness defines this (libFuzzer's entry point; replay_main.cpp calls it too).
// Any exception other than mantissa::Error escapes it and counts as a crash.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
