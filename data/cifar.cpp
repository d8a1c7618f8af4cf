#include "data/cifar.h"

#include <algorithm>
#include <cstdint>
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
constexpr int64_t kMaxRecords = 60000;   // all of CIFAR-10 (a batch file holds 10000)
constexpr int64_t kBlockRecords = 1000;  // records decompressed at a time (3 MB)
}  // namespace

LabeledImages read_cifar10(const std::string& path) {
  constexpr const char* op = "read_cifar10";
  detail::GzReader in(path, op);
  // A batch file holds 10000 records; the whole data set is 60000. More is a corrupt file or a
  // decompression bomb, rejected before it is allocated.
  const int64_t max_records = std::min<int64_t>(
      kMaxRecords, int64_t(std::min<uint64_t>(detail::max_decompressed_size(in.file_size()), INT64_MAX) / kRecord));
  if (!in.compressed()) {
    const uint64_t size = in.file_size();
    MT_CHECK(size > 0, op, "'", path,
             "' is empty; a CIFAR-10 batch holds 3073-byte records (10000 in a standard file)");
    MT_CHECK(size % kRecord == 0, op, "'", path, "' has ", size, " bytes, not a whole number of 3073-byte records (1 ",
             "label byte + 3072 pixel bytes): ", size / kRecord, " records and ", size % kRecord,
             " extra bytes. Is the file truncated, or not the binary version of CIFAR-10?");
    MT_CHECK(size / kRecord <= uint64_t(kMaxRecords), op, "'", path, "' holds ", size / kRecord,
             " records, more than the ", kMaxRecords, " of all of CIFAR-10; not a CIFAR-10 batch file");
  }

  // Streamed in blocks of records, so memory follows the data actually decompressed.
  std::vector<uint8_t> images, labels, block(size_t(kBlockRecords * kRecord));
  int64_t n = 0;
  for (;;) {
    const size_t got = in.read(block.data(), block.size());
    MT_CHECK(got % kRecord == 0, op, "'", path, "' has ", uint64_t(n) * kRecord + got, " bytes",
             in.compressed() ? " (decompressed)" : "", ", not a whole number of 3073-byte records (1 label byte + ",
             "3072 pixel bytes): ", n + int64_t(got / kRecord), " records and ", got % kRecord,
             " extra bytes. Is the file truncated, or not the binary version of CIFAR-10?");
    const int64_t count = int64_t(got / kRecord);
    MT_CHECK(n + count <= max_records, op, "'", path, "' decompresses to more than ", max_records,
             " records (the limit for a ", in.file_size(), "-byte file: all of CIFAR-10 is ", kMaxRecords,
             "); a corrupt file or a decompression bomb");
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t* rec = block.data() + i * kRecord;
      MT_CHECK(rec[0] <= 9, op, "'", path, "': record ", n + i, " (byte offset ", (n + i) * kRecord, ") has label ",
               int(rec[0]), "; CIFAR-10 labels are 0..9 (a CIFAR-100 file has 2 label bytes per record)");
      labels.push_back(rec[0]);
      images.insert(images.end(), rec + 1, rec + kRecord);
    }
    n += count;
    if (got < block.size()) break;
  }
  MT_CHECK(n > 0, op, "'", path, "' holds no data", in.compressed() ? " once decompressed" : "",
           "; a CIFAR-10 batch holds 3073-byte records (10000 in a standard file)");

  LabeledImages out;
  out.images = make_tensor({n, 3, 32, 32}, kUInt8, Device::cpu());
  out.labels = make_tensor({n}, kInt64, Device::cpu());
  std::memcpy(out.images.raw_data(), images.data(), images.size());
  auto* lab = out.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) lab[i] = labels[size_t(i)];
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
