#include "data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace mt = mantissa;
namespace md = mantissa::data;
namespace fs = std::filesystem;

namespace cifar {

namespace {

md::LabeledImages cat_files(const std::vector<md::LabeledImages>& parts) {
  std::vector<mt::Tensor> images, labels;
  for (const auto& p : parts) {
    images.push_back(p.images);
    labels.push_back(p.labels);
  }
  return {mt::cat(images), mt::cat(labels)};
}

md::LabeledImages first(const md::LabeledImages& d, int64_t limit) {
  if (limit <= 0 || limit >= d.images.size(0)) return d;
  return {d.images.narrow(0, 0, limit).contiguous(), d.labels.narrow(0, 0, limit).contiguous()};
}

std::string required(const fs::path& p) {
  MT_CHECK(fs::is_regular_file(p), "cifar", "'", p.string(), "' does not exist");
  return p.string();
}

}  // namespace

DataSet load(std::string dataset, std::string dir, bool coarse, int64_t limit) {
  if (dataset == "auto") {
    if (dir.empty())
      dataset = "fashion-mnist";
    else if (fs::exists(fs::path(dir) / "data_batch_1.bin"))
      dataset = "cifar10";
    else if (fs::exists(fs::path(dir) / "train.bin"))
      dataset = "cifar100";
    else
      dataset = "fashion-mnist";
  }
  DataSet d;
  d.name = dataset;
  if (dataset == "cifar10") {
    std::vector<md::LabeledImages> parts;
    for (int i = 1; i <= 5; ++i)
      parts.push_back(md::read_cifar10(required(fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin"))));
    d.train = cat_files(parts);
    d.test = md::read_cifar10(required(fs::path(dir) / "test_batch.bin"));
    d.num_classes = 10;
  } else if (dataset == "cifar100") {
    const auto labels = coarse ? md::Cifar100Labels::Coarse : md::Cifar100Labels::Fine;
    d.train = md::read_cifar100(required(fs::path(dir) / "train.bin"), labels);
    d.test = md::read_cifar100(required(fs::path(dir) / "test.bin"), labels);
    d.num_classes = md::cifar100_classes(labels);
  } else {
    MT_CHECK(dataset == "fashion-mnist", "cifar", "unknown data set '", dataset, "'");
    const std::string from = dir.empty() ? md::kFashionMnistDir : dir;
    md::Pad pad(2);  // 28x28 -> 32x32, once up front
    for (auto [split, out] : {std::pair{md::Split::Train, &d.train}, {md::Split::Test, &d.test}}) {
      md::LabeledImages m = md::load_mnist(from, split);
      // Back to the file's bytes: load_mnist scaled them to [0, 1].
      mt::Tensor bytes = (m.images * 255.0 + 0.5).to(mt::kUInt8);
      *out = {pad(bytes), m.labels};
    }
    d.num_classes = 10;
  }
  d.train = first(d.train, limit);
  d.test = first(d.test, limit);
  // Per-channel statistics of the training images, accumulated in float64 over chunks.
  const int64_t n = d.train.images.size(0), c = d.train.images.size(1);
  mt::Tensor sum = mt::zeros({c}, {.dtype = mt::kFloat64}), sum_sq = mt::zeros({c}, {.dtype = mt::kFloat64});
  for (int64_t start = 0; start < n; start += 1000) {
    mt::Tensor x = d.train.images.narrow(0, start, std::min<int64_t>(1000, n - start)).to(mt::kFloat64);
    sum = sum + x.sum({0, 2, 3});
    sum_sq = sum_sq + (x * x).sum({0, 2, 3});
  }
  const double count = double(n * d.train.images.size(2) * d.train.images.size(3));
  d.mean = (sum / count).to_vector<double>();
  std::vector<double> sq = (sum_sq / count).to_vector<double>();
  for (int64_t i = 0; i < c; ++i)
    d.stddev.push_back(std::max(std::sqrt(std::max(sq[size_t(i)] - d.mean[size_t(i)] * d.mean[size_t(i)], 0.0)), 1e-3));
  return d;
}

mt::Tensor to_network_input(const mt::Tensor& images, const DataSet& data) {
  mt::Tensor x = md::Normalize(data.mean, data.stddev)(images);  // uint8 -> float32
  if (x.size(1) == 1) x = x.expand({x.size(0), 3, x.size(2), x.size(3)}).contiguous();
  return x;
}

}  // namespace cifar
