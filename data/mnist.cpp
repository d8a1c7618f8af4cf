#include "data/mnist.h"

#include <filesystem>

#include "autograd/tensor_methods.h"
#include "core/error.h"
#include "data/idx.h"

namespace mantissa::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kInstallHint =
    "Fashion-MNIST installs to /usr/share/datasets/fashion-mnist with `apt-get install dataset-fashion-mnist`; "
    "otherwise pass the directory that holds train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], "
    "t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz]";

// The first of "<prefix>-<kind>-<idx>", "<prefix>-<kind>.<idx>", each plain or .gz, that exists in `dir`.
std::string find_file(const std::string& dir, const std::string& prefix, const std::string& kind,
                      const std::string& idx) {
  const std::string bases[] = {prefix + "-" + kind + "-" + idx, prefix + "-" + kind + "." + idx};
  for (const std::string& base : bases)
    for (const char* ext : {"", ".gz"}) {
      fs::path p = fs::path(dir) / (base + ext);
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) return p.string();
    }
  MT_FAIL("load_mnist", "no ", prefix, "-", kind, "-", idx, " or ", prefix, "-", kind, "-", idx, ".gz in '", dir, "'. ",
          kInstallHint);
}

}  // namespace

LabeledImages load_mnist(const std::string& dir, Split split) {
  constexpr const char* op = "load_mnist";
  std::error_code ec;
  MT_CHECK(fs::is_directory(dir, ec), op, "directory '", dir, "' does not exist. ", kInstallHint);
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix, "images", "idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix, "labels", "idx1-ubyte");

  Tensor images = read_idx(images_path), labels = read_idx(labels_path);
  MT_CHECK(images.dtype() == kUInt8 && images.dim() == 3, op, "'", images_path,
           "' should hold uint8 images [N, H, W], but holds ", images.dtype(), " ", images.shape_str());
  MT_CHECK(labels.dtype() == kUInt8 && labels.dim() == 1, op, "'", labels_path,
           "' should hold uint8 labels [N], but holds ", labels.dtype(), " ", labels.shape_str());
  MT_CHECK(images.size(0) == labels.size(0), op, "'", images_path, "' holds ", images.size(0), " images but '",
           labels_path, "' holds ", labels.size(0), " labels");

  LabeledImages out;
  out.images = images.reshape({images.size(0), 1, images.size(1), images.size(2)}).to(kFloat32);
  out.images.div_(255.0);  // as torchvision's ToTensor: x / 255, not x * (1 / 255)
  out.labels = labels.to(kInt64);
  return out;
}

}  // namespace mantissa::data
