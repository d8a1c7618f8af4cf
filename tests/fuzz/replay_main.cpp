// Runs a fuzz harness over files without libFuzzer (any compiler): each argument is a file
// or a directory of files, fed to LLVMFuzzerTestOneInput one by one. CTest runs this over
// tests/fuzz/corpus/<harness> and tests/fixtures/hostile, so every CI build replays them.
//   replay_fuzz_safetensors tests/fuzz/corpus/safetensors tests/fixtures/hostile
//   replay_fuzz_checkpoint --write-seeds DIR     (harnesses that can make valid seeds)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_input.h"

namespace fs = std::filesystem;

// Defined by harnesses that can write valid seed inputs; weak so the others link without it.
__attribute__((weak)) void fuzz_write_seeds(const std::string& dir);

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-seeds") == 0) {
    if (!fuzz_write_seeds) {
      std::fprintf(stderr, "this harness writes no seeds\n");
      return 2;
    }
    fuzz_write_seeds(argv[2]);
    return 0;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no inputs given\n");
    return 2;
  }
  double slowest = 0;
  std::string slowest_name;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > slowest) slowest = s, slowest_name = f.filename().string();
  }
  std::printf("replayed %zu inputs; slowest %.3f s (%s)\n", files.size(), slowest, slowest_name.c_str());
  return 0;
}
