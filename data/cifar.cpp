#include "data/cifar.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/cifar_records.h"
#include "data/gz_reader.h"

namespace mantissa::data {

namespace {
constexpr int64_t kPixels = 3 * 32 * 32;
// Records decompressed at a time: 8 at first, doubling up to 1000 (3 MB), so that reading a
// small file allocates little (the fuzz harness reads thousands of small files a second).
constexpr int64_t kFirstBlockRecords = 8;
constexpr int64_t kBlockRecords = 1000;
}  // namespace

namespace detail {

LabeledImages read_cifar_records(const std::string& path, const CifarFormat& f, const CifarLabelOf& label_of) {
  const char* op = f.op;
  const int64_t record = f.label_bytes + kPixels;
  GzReader in(path, op);
  // More records than the whole data set is a corrupt file or a decompression bomb, rejected
  // before it is allocated.
  const int64_t max_records = std::min<int64_t>(
      f.max_records, int64_t(std::min<uint64_t>(max_decompressed_size(in.file_size()), INT64_MAX) / record));
  if (!in.compressed()) {
    const uint64_t size = in.file_size();
    MT_CHECK(size > 0, op, "'", path, "' is empty; a ", f.name, " file holds ", record, "-byte records");
    MT_CHECK(size % record == 0, op, "'", path, "' has ", size, " bytes, not a whole number of ", record,
             "-byte records (", f.label_bytes, " label byte(s) + 3072 pixel bytes): ", size / record, " records and ",
             size % record, " extra bytes. Is the file truncated, or not the binary version of ", f.name, "?",
             f.wrong_format);
    MT_CHECK(size / record <= uint64_t(f.max_records), op, "'", path, "' holds ", size / record,
             " records, more than the ", f.max_records, " of all of ", f.name, "; not a ", f.name, " file");
  }

  std::vector<uint8_t> images, block(size_t(kFirstBlockRecords * record));
  std::vector<int64_t> labels;
  int64_t n = 0;
  for (;;) {
    const size_t got = in.read(block.data(), block.size());
    MT_CHECK(got % record == 0, op, "'", path, "' has ", uint64_t(n) * record + got, " bytes",
             in.compressed() ? " (decompressed)" : "", ", not a whole number of ", record, "-byte records (",
             f.label_bytes, " label byte(s) + 3072 pixel bytes): ", n + int64_t(got / record), " records and ",
             got % record, " extra bytes. Is the file truncated, or not the binary version of ", f.name, "?",
             f.wrong_format);
    const int64_t count = int64_t(got / record);
    MT_CHECK(n + count <= max_records, op, "'", path, "' decompresses to more than ", max_records,
             " records (the limit for a ", in.file_size(), "-byte file: all of ", f.name, " is ", f.max_records,
             "); a corrupt file or a decompression bomb");
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t* rec = block.data() + i * record;
      labels.push_back(label_of(rec, n + i, (n + i) * record));
      images.insert(images.end(), rec + f.label_bytes, rec + record);
    }
    n += count;
    if (got < block.size()) break;
    if (block.size() < size_t(kBlockRecords * record))
      block.resize(std::min(2 * block.size(), size_t(kBlockRecords * record)));
  }
  MT_CHECK(n > 0, op, "'", path, "' holds no data", in.compressed() ? " once decompressed" : "", "; a ", f.name,
           " file holds ", record, "-byte records");

  LabeledImages out;
  out.images = make_tensor({n, 3, 32, 32}, kUInt8, Device::cpu());
  out.labels = make_tensor({n}, kInt64, Device::cpu());
  std::memcpy(out.images.raw_data(), images.data(), images.size());
  std::memcpy(out.labels.raw_data(), labels.data(), labels.size() * sizeof(int64_t));
  return out;
}

}  // namespace detail

LabeledImages read_cifar10(const std::string& path) {
  const detail::CifarFormat format{"read_cifar10", "CIFAR-10", 1, 60000, ""};
  return detail::read_cifar_records(path, format, [&](const uint8_t* rec, int64_t i, int64_t offset) -> int64_t {
    MT_CHECK(rec[0] <= 9, format.op, "'", path, "': record ", i, " (byte offset ", offset, ") has label ", int(rec[0]),
             "; CIFAR-10 labels are 0..9 (a CIFAR-100 file has 2 label bytes per record)");
    return rec[0];
  });
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
