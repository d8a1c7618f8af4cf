// Writes small CIFAR-10 and CIFAR-100 data sets in the real binary formats, for the
// example's smoke test (no CIFAR file can be downloaded on the test machines):
//   write_synthetic_cifar DIR  ->  DIR/cifar10/{data_batch_1..5,test_batch}.bin, DIR/cifar100/{train,test}.bin
// Each class has its own colour and a horizontal bar at its own height (on top of noise),
// which survives crops of +-4 pixels and flips, so a few steps of training lower the loss.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

uint32_t lcg(uint32_t& s) { return s = s * 1664525u + 1013904223u; }

// 3072 pixel bytes of an image of class `k` (0..9).
void append_image(std::vector<uint8_t>& out, int k, uint32_t& rng) {
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 32; ++i)
      for (int j = 0; j < 32; ++j) {
        int v = 60 + int(lcg(rng) >> 26);               // noise 60..123
        if (c == k % 3) v += 60;                        // class colour
        if (i >= 4 + 2 * k && i < 8 + 2 * k) v += 100;  // class bar
        out.push_back(uint8_t(v > 255 ? 255 : v));
      }
}

void write(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "write_synthetic_cifar: cannot write %s\n", p.string().c_str());
    std::exit(1);
  }
}

// `n` records; label_bytes 1 (CIFAR-10: class) or 2 (CIFAR-100: coarse = class / 5, fine = class * 10 + ...).
std::vector<uint8_t> records(int n, int label_bytes, uint32_t seed) {
  std::vector<uint8_t> out;
  uint32_t rng = seed;
  for (int r = 0; r < n; ++r) {
    const int k = int(lcg(rng) >> 16) % 10;
    if (label_bytes == 2) {
      out.push_back(uint8_t(k * 2));                              // coarse 0..18
      out.push_back(uint8_t(k * 10 + int(lcg(rng) >> 28) % 10));  // fine: 10 fine classes per visual class
    } else {
      out.push_back(uint8_t(k));
    }
    append_image(out, k, rng);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_synthetic_cifar DIR\n");
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  fs::create_directories(dir / "cifar10");
  fs::create_directories(dir / "cifar100");
  for (int i = 1; i <= 5; ++i)
    write(dir / "cifar10" / ("data_batch_" + std::to_string(i) + ".bin"), records(64, 1, uint32_t(i)));
  write(dir / "cifar10" / "test_batch.bin", records(128, 1, 99));
  write(dir / "cifar100" / "train.bin", records(320, 2, 7));
  write(dir / "cifar100" / "test.bin", records(128, 2, 98));
  return 0;
}
