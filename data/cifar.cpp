#include "data/cifar.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/gz_reader.h"

namespace mantissa::data {

namespace {
constexpr int64_t kPixels = 3 * 32 * 32;
constexpr int64_t kRecord = 1 + kPixels;
}  // namespace

LabeledImages read_cifar10(const std::string& path) {
  constexpr const char* op = "read_cifar10";
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
  MT_CHECK(size > 0, op, "'", path, "' is empty; a CIFAR-10 batch holds 3073-byte records (10000 in a standard file)");
  MT_CHECK(size % kRecord == 0, op, "'", path, "' has ", size, " bytes", in.compressed() ? " (decompressed)" : "",
           ", not a whole number of 3073-byte records (1 label byte + 3072 pixel bytes): ", size / kRecord,
           " records and ", size % kRecord, " extra bytes",
           in.stream_truncated() ? "; the gzip stream is cut short" : "",
           ". Is the file truncated, or not the binary version of CIFAR-10?");
  const int64_t n = size / kRecord;

  LabeledImages out;
  out.images = make_tensor({n, 3, 32, 32}, kUInt8, Device::cpu());
  out.labels = make_tensor({n}, kInt64, Device::cpu());
  auto* img = out.images.data_ptr<uint8_t>();
  auto* lab = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* rec = bytes.data() + i * kRecord;
    MT_CHECK(rec[0] <= 9, op, "'", path, "': record ", i, " (byte offset ", i * kRecord, ") has label ", int(rec[0]),
             "; CIFAR-10 labels are 0..9 (a CIFAR-100 file has 2 label bytes per record)");
    lab[i] = rec[0];
    std::memcpy(img + i * kPixels, rec + 1, kPixels);
  }
  return out;
}

LabeledImages load_cifar10(const std::string& dir, Split split) {
  namespace fs = std::filesystem;
  constexpr const char* op = "load_cifar10";
  std::error_code ec;
  MT_CHECK(fs::is_directory(dir, ec), op, "directory '", dir,
           "' does not exist; expected the extracted binary version of CIFAR-10 (cifar-10-batches-bin, holding "
           "data_batch_1.bin ... data_batch_5.bin and test_batch.bin)");
  std::vector<std::string> names;
  if (split == Split::Train) {
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }
  std::vector<Tensor> images, labels;
  for (const std::string& name : names) {
    const fs::path p = fs::path(dir) / name;
    MT_CHECK(fs::is_regular_file(p, ec), op, "'", p.string(), "' does not exist; the binary version of CIFAR-10 has ",
             "data_batch_1.bin ... data_batch_5.bin and test_batch.bin in '", dir, "'");
    LabeledImages part = read_cifar10(p.string());
    images.push_back(part.images);
    labels.push_back(part.labels);
  }
  LabeledImages out;
  out.images = (images.size() == 1 ? images[0] : cat(images)).to(kFloat32);
  out.images.div_(255.0);
  out.labels = labels.size() == 1 ? labels[0] : cat(labels);
  return out;
}

}  // namespace mantissa::data
