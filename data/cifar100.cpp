#include "data/cifar100.h"

#include <cstring>
#include <filesystem>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/cifar_records.h"

namespace mantissa::data {

LabeledImages read_cifar100(const std::string& path, Cifar100Labels labels) {
  const detail::CifarFormat format{"read_cifar100", "CIFAR-100", 2, 60000, " (a CIFAR-10 file has 3073-byte records)"};
  return detail::read_cifar_records(path, format, [&](const uint8_t* rec, int64_t i, int64_t offset) -> int64_t {
    // Both bytes are checked whichever is used: a bad one means the records are misaligned.
    MT_CHECK(rec[0] <= 19, format.op, "'", path, "': record ", i, " (byte offset ", offset, ") has coarse label ",
             int(rec[0]), "; CIFAR-100 coarse labels are 0..19");
    MT_CHECK(rec[1] <= 99, format.op, "'", path, "': record ", i, " (byte offset ", offset + 1, ") has fine label ",
             int(rec[1]), "; CIFAR-100 fine labels are 0..99");
    return labels == Cifar100Labels::Fine ? rec[1] : rec[0];
  });
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
