#include "data/cifar100.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/gz_reader.h"

namespace mantissa::data {

namespace {
constexpr int64_t kPixels = 3 * 32 * 32;
constexpr int64_t kRecord = 2 + kPixels;  // coarse label, fine label, pixels
}  // namespace

LabeledImages read_cifar100(const std::string& path, Cifar100Labels labels) {
  constexpr const char* op = "read_cifar100";
  detail::GzReader in(path, op);
  std::vector<uint8_t> bytes;
  if (in.file_size() > 0) {
    // The whole (decompressed) file, read in chunks so a .gz never needs its size up front.
    size_t used = 0;
    for (;;) {
      bytes.resize(used + (size_t(1) << 22));
      const size_t got = in.read(bytes.data() + used, bytes.size() - used);
      used += got;
      if (used < bytes.size()) break;
    }
    bytes.resize(used);
  }
  const int64_t size = int64_t(bytes.size());
  MT_CHECK(size > 0, op, "'", path,
           "' is empty; a CIFAR-100 file holds 3074-byte records (50000 in train.bin, 10000 in test.bin)");
  MT_CHECK(
      size % kRecord == 0, op, "'", path, "' has ", size, " bytes", in.compressed() ? " (decompressed)" : "",
      ", not a whole number of 3074-byte records (coarse and fine label bytes + 3072 pixel bytes): ", size / kRecord,
      " records and ", size % kRecord, " extra bytes", in.stream_truncated() ? "; the gzip stream is cut short" : "",
      ". Is the file truncated, or not the binary version of CIFAR-100 (a CIFAR-10 file has 3073-byte records)?");
  const int64_t n = size / kRecord;

  LabeledImages out;
  out.images = make_tensor({n, 3, 32, 32}, kUInt8, Device::cpu());
  out.labels = make_tensor({n}, kInt64, Device::cpu());
  auto* img = out.images.data_ptr<uint8_t>();
  auto* lab = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* rec = bytes.data() + i * kRecord;
    // Both bytes are checked whichever is used: a bad one means the records are misaligned.
    MT_CHECK(rec[0] <= 19, op, "'", path, "': record ", i, " (byte offset ", i * kRecord, ") has coarse label ",
             int(rec[0]), "; CIFAR-100 coarse labels are 0..19");
    MT_CHECK(rec[1] <= 99, op, "'", path, "': record ", i, " (byte offset ", i * kRecord + 1, ") has fine label ",
             int(rec[1]), "; CIFAR-100 fine labels are 0..99");
    lab[i] = labels == Cifar100Labels::Fine ? rec[1] : rec[0];
    std::memcpy(img + i * kPixels, rec + 2, kPixels);
  }
  return out;
}

LabeledImages load_cifar100(const std::string& dir, Split split, Cifar100Labels labels) {
  namespace fs = std::filesystem;
  constexpr const char* op = "load_cifar100";
  std::error_code ec;
  MT_CHECK(fs::is_directory(dir, ec), op, "directory '", dir,
           "' does not exist; expected the extracted binary version of CIFAR-100 (cifar-100-binary, holding "
           "train.bin and test.bin)");
  const fs::path p = fs::path(dir) / (split == Split::Train ? "train.bin" : "test.bin");
  MT_CHECK(fs::is_regular_file(p, ec), op, "'", p.string(),
           "' does not exist; the binary version of CIFAR-100 has train.bin and test.bin in '", dir, "'");
  LabeledImages out = read_cifar100(p.string(), labels);
  out.images = out.images.to(kFloat32);
  out.images.div_(255.0);
  return out;
}

}  // namespace mantissa::data
