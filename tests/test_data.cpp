// The data layer: IDX and CIFAR-10 readers, datasets, transforms and the DataLoader.
// Reader inputs are written byte by byte here (big-endian IDX headers, gzip with
// stored deflate blocks), independent of the code under test. Fashion-MNIST values
// come from Python's gzip + numpy on /usr/share/datasets/fashion-mnist.
#include <gtest/gtest.h>
#include <mantissa.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

namespace mt = mantissa;
namespace md = mantissa::data;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

// A fresh directory per test, removed afterwards.
class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("mantissa_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

void put_be32(Bytes& b, uint32_t v) {
  for (int k = 3; k >= 0; --k) b.push_back(uint8_t(v >> (8 * k)));
}
void put_le32(Bytes& b, uint32_t v) {
  for (int k = 0; k < 4; ++k) b.push_back(uint8_t(v >> (8 * k)));
}

// An IDX file: magic 00 00 <type> <ndim>, big-endian sizes, then `payload` as given.
Bytes idx_file(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, type, uint8_t(dims.size())};
  for (uint32_t d : dims) put_be32(b, d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

uint32_t crc32(const Bytes& b) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t x : b) {
    c ^= x;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// RFC 1952 gzip member holding `data` in stored (uncompressed) deflate blocks.
Bytes gzip_stored(const Bytes& data) {
  Bytes g = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(data.size() - pos, 65535);
    const bool last = pos + n == data.size();
    g.push_back(last ? 1 : 0);
    g.push_back(uint8_t(n));
    g.push_back(uint8_t(n >> 8));
    g.push_back(uint8_t(~n));
    g.push_back(uint8_t(~n >> 8));
    g.insert(g.end(), data.begin() + long(pos), data.begin() + long(pos + n));
    pos += n;
  } while (pos < data.size());
  put_le32(g, crc32(data));
  put_le32(g, uint32_t(data.size()));
  return g;
}

Bytes iota_bytes(size_t n, uint8_t start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(start + i);
  return b;
}

// Runs `fn`, expects a mantissa::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected mantissa::Error";
  } catch (const mt::Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace

// ---------------------------------------------------------------- IDX

using Idx = TempDir;

TEST_F(Idx, ReadsPlainUint8) {
  write_file(path("a-idx3-ubyte"), idx_file(0x08, {2, 3, 4}, iota_bytes(24, 10)));
  mt::Tensor t = md::read_idx(path("a-idx3-ubyte"));
  EXPECT_EQ(t.dtype(), mt::kUInt8);
  EXPECT_EQ(t.sizes(), (mt::Shape{2, 3, 4}));
  EXPECT_EQ(t.to_vector<uint8_t>(), iota_bytes(24, 10));
}

TEST_F(Idx, ReadsGzip) {
  write_file(path("a.gz"), gzip_stored(idx_file(0x08, {70000}, iota_bytes(70000))));  // two stored blocks
  mt::Tensor t = md::read_idx(path("a.gz"));
  EXPECT_EQ(t.sizes(), (mt::Shape{70000}));
  EXPECT_EQ(t.to_vector<uint8_t>(), iota_bytes(70000));
}

TEST_F(Idx, ConvertsBigEndianTypes) {
  // int8 0xFF = -1, 0x7F = 127; int16 0xFED4 = -300; int32 0xFFFFFFFE = -2;
  // float32 0x3FC00000 = 1.5; float64 0xC004000000000000 = -2.5.
  write_file(path("i8"), idx_file(0x09, {2}, {0xFF, 0x7F}));
  write_file(path("i16"), idx_file(0x0B, {2}, {0xFE, 0xD4, 0x01, 0x00}));
  write_file(path("i32"), idx_file(0x0C, {1}, {0xFF, 0xFF, 0xFF, 0xFE}));
  write_file(path("f32"), idx_file(0x0D, {1}, {0x3F, 0xC0, 0x00, 0x00}));
  write_file(path("f64"), idx_file(0x0E, {1}, {0xC0, 0x04, 0, 0, 0, 0, 0, 0}));
  mt::Tensor i8 = md::read_idx(path("i8")), i16 = md::read_idx(path("i16")), i32 = md::read_idx(path("i32"));
  EXPECT_EQ(i8.dtype(), mt::kInt32);
  EXPECT_EQ(i8.to_vector<int32_t>(), (std::vector<int32_t>{-1, 127}));
  EXPECT_EQ(i16.to_vector<int32_t>(), (std::vector<int32_t>{-300, 256}));
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{-2}));
  EXPECT_EQ(md::read_idx(path("f32")).to_vector<float>(), (std::vector<float>{1.5f}));
  mt::Tensor f64 = md::read_idx(path("f64"));
  EXPECT_EQ(f64.dtype(), mt::kFloat64);
  EXPECT_EQ(f64.to_vector<double>(), (std::vector<double>{-2.5}));
}

TEST_F(Idx, WriteReadRoundTrip) {
  std::vector<mt::Tensor> ts = {
      mt::from_vector<uint8_t>({0, 1, 254, 255, 7, 9}, {2, 3}), mt::from_vector<int32_t>({-7, 1 << 30, 3}, {3}),
      mt::from_vector<float>({1.25f, -3e-20f, 7.f, 0.f}, {2, 1, 2}), mt::from_vector<double>({1e300, -0.5}, {2})};
  for (const mt::Tensor& t : ts)
    for (const std::string name : {"x", "x.gz"}) {
      md::write_idx(path(name), t);
      mt::Tensor r = md::read_idx(path(name));
      EXPECT_EQ(r.dtype(), t.dtype());
      EXPECT_EQ(r.sizes(), t.sizes());
      EXPECT_EQ(r.to_vector<double>(), t.to_vector<double>());
    }
  // .gz really compresses; the plain file is byte-exact IDX.
  md::write_idx(path("z.gz"), mt::zeros({10000}, {.dtype = mt::kUInt8}));
  EXPECT_LT(fs::file_size(path("z.gz")), 1000u);
  md::write_idx(path("p"), mt::from_vector<int32_t>({-2}, {1}));
  EXPECT_EQ(read_file(path("p")), idx_file(0x0C, {1}, {0xFF, 0xFF, 0xFF, 0xFE}));
  expect_error([&] { md::write_idx(path("b"), mt::zeros({2}, {.dtype = mt::kInt64})); }, {"int64", path("b")});
}

TEST_F(Idx, TruncatedPayloadNamesPathAndCounts) {
  write_file(path("t"), idx_file(0x08, {10}, iota_bytes(7)));
  expect_error([&] { md::read_idx(path("t")); }, {path("t"), "truncated", "10 payload bytes", "only 7"});
  write_file(path("t.gz"), gzip_stored(idx_file(0x08, {10}, iota_bytes(7))));
  expect_error([&] { md::read_idx(path("t.gz")); }, {path("t.gz"), "truncated", "needs 10", "after 7"});
  // A gzip stream cut short: the decompressed data ends early.
  Bytes gz = gzip_stored(idx_file(0x08, {1000}, iota_bytes(1000)));
  gz.resize(gz.size() - 500);
  write_file(path("cut.gz"), gz);
  expect_error([&] { md::read_idx(path("cut.gz")); }, {path("cut.gz"), "truncated", "needs 1000", "cut short"});
}

TEST_F(Idx, TruncatedHeader) {
  Bytes b = idx_file(0x08, {5, 5, 5}, {});
  b.resize(9);  // magic + 1 of 3 sizes + 1 byte
  write_file(path("h"), b);
  expect_error([&] { md::read_idx(path("h")); }, {path("h"), "truncated", "needs 16", "after 9"});
  write_file(path("short"), {0, 0});
  expect_error([&] { md::read_idx(path("short")); }, {path("short"), "holds 2 bytes"});
  write_file(path("empty"), {});
  expect_error([&] { md::read_idx(path("empty")); }, {path("empty"), "holds 0 bytes"});
}

TEST_F(Idx, BadMagic) {
  write_file(path("m1"), {0x08, 0x03, 0, 0, 0, 0, 0, 1, 5});  // bytes in the wrong order
  expect_error([&] { md::read_idx(path("m1")); }, {path("m1"), "not an IDX file", "0x08030000"});
  write_file(path("m2"), idx_file(0x0A, {1}, {0}));  // no type 0x0A
  expect_error([&] { md::read_idx(path("m2")); }, {path("m2"), "not an IDX file", "0x00000A01"});
  write_file(path("m3"), {0, 0, 8, 0});
  expect_error([&] { md::read_idx(path("m3")); }, {path("m3"), "0 dimensions"});
  write_file(path("m4.gz"), gzip_stored({'G', 'I', 'F', '8', '9', 'a'}));
  expect_error([&] { md::read_idx(path("m4.gz")); }, {path("m4.gz"), "not an IDX file"});
}

TEST_F(Idx, TrailingBytes) {
  Bytes b = idx_file(0x08, {4}, iota_bytes(6));
  write_file(path("x"), b);
  expect_error([&] { md::read_idx(path("x")); }, {path("x"), "2 unexpected bytes"});
  write_file(path("x.gz"), gzip_stored(b));
  expect_error([&] { md::read_idx(path("x.gz")); }, {path("x.gz"), "unexpected data after the 4-byte payload"});
}

TEST_F(Idx, CorruptHeaderDoesNotAllocate) {
  // 3e9 x 3e9 bytes: must be rejected from the file size, not by trying to allocate it.
  Bytes b = idx_file(0x08, {3000000000u, 3000000000u}, iota_bytes(16));
  write_file(path("big"), b);
  expect_error([&] { md::read_idx(path("big")); }, {path("big"), "truncated"});
  write_file(path("big.gz"), gzip_stored(b));
  expect_error([&] { md::read_idx(path("big.gz")); }, {path("big.gz"), "gzip file can hold"});
  write_file(path("ovf"), idx_file(0x0E, {4000000000u, 4000000000u, 4000000000u}, {}));
  expect_error([&] { md::read_idx(path("ovf")); }, {path("ovf"), "overflow"});
}

TEST_F(Idx, CorruptGzipAndMissingFile) {
  Bytes gz = gzip_stored(idx_file(0x08, {3}, {1, 2, 3}));
  gz[gz.size() - 6] ^= 0xFF;  // break the CRC
  write_file(path("crc.gz"), gz);
  expect_error([&] { md::read_idx(path("crc.gz")); }, {path("crc.gz"), "corrupt gzip"});
  expect_error([&] { md::read_idx(path("nope")); }, {path("nope"), "does not exist"});
  expect_error([&] { md::read_idx(dir_.string()); }, {dir_.string(), "not a regular file"});
}

// ---------------------------------------------------------------- MNIST directories

using Mnist = TempDir;

TEST_F(Mnist, LoadsGeneratedDirectory) {
  Bytes pixels = iota_bytes(3 * 28 * 28, 3);
  write_file(path("train-images-idx3-ubyte.gz"), gzip_stored(idx_file(0x08, {3, 28, 28}, pixels)));
  write_file(path("train-labels-idx1-ubyte.gz"), gzip_stored(idx_file(0x08, {3}, {7, 0, 9})));
  write_file(path("t10k-images-idx3-ubyte"), idx_file(0x08, {1, 28, 28}, Bytes(784, 255)));
  write_file(path("t10k-labels-idx1-ubyte"), idx_file(0x08, {1}, {4}));
  md::LabeledImages train = md::load_mnist(dir_.string(), md::Split::Train);
  EXPECT_EQ(train.images.sizes(), (mt::Shape{3, 1, 28, 28}));
  EXPECT_EQ(train.images.dtype(), mt::kFloat32);
  EXPECT_EQ(train.labels.dtype(), mt::kInt64);
  EXPECT_EQ(train.labels.to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 9}));
  std::vector<float> v = train.images.to_vector<float>();
  for (size_t i = 0; i < v.size(); i += 97) EXPECT_FLOAT_EQ(v[i], float(pixels[i]) / 255.0f);
  md::LabeledImages test = md::load_mnist(dir_.string(), md::Split::Test);
  EXPECT_EQ(test.images.sizes(), (mt::Shape{1, 1, 28, 28}));
  EXPECT_EQ(test.images.max().item<float>(), 1.0f);
  EXPECT_EQ(test.labels.item<int64_t>(), 4);
}

TEST_F(Mnist, MissingDirectoryOrFile) {
  const std::string missing = path("no-such-dir");
  expect_error([&] { md::load_mnist(missing); }, {missing, "apt-get install dataset-fashion-mnist"});
  write_file(path("train-images-idx3-ubyte"), idx_file(0x08, {1, 28, 28}, Bytes(784)));
  expect_error([&] { md::load_mnist(dir_.string()); }, {"train-labels-idx1-ubyte", dir_.string()});
  write_file(path("train-labels-idx1-ubyte"), idx_file(0x08, {2}, {1, 2}));
  expect_error([&] { md::load_mnist(dir_.string()); }, {"1 images", "2 labels"});
}

TEST(FashionMnist, LoadsTheRealFilesWhenInstalled) {
  if (!fs::exists(md::kFashionMnistDir)) GTEST_SKIP() << md::kFashionMnistDir << " absent (dataset-fashion-mnist)";
  const std::string dir = md::kFashionMnistDir;
  md::LabeledImages train = md::load_mnist(dir, md::Split::Train);
  ASSERT_EQ(train.images.sizes(), (mt::Shape{60000, 1, 28, 28}));
  std::vector<int64_t> labels = train.labels.to_vector<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(labels.begin(), labels.begin() + 10),
            (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(std::count(labels.begin(), labels.end(), 3), 6000);
  EXPECT_NEAR(train.images.to(mt::kFloat64).mean().item<double>(), 0.286041, 1e-6);
  EXPECT_FLOAT_EQ(train.images.select(0, 0).select(0, 0).select(0, 14).select(0, 14).item<float>(), 217.0f / 255.0f);
  // The raw bytes: their exact sums over the set and over image 0.
  mt::Tensor raw = md::read_idx(dir + "/train-images-idx3-ubyte.gz").to(mt::kInt64);
  EXPECT_EQ(raw.sum().item<int64_t>(), 3431114169);
  EXPECT_EQ(raw.select(0, 0).sum().item<int64_t>(), 76247);
  md::LabeledImages test = md::load_mnist(dir, md::Split::Test);
  ASSERT_EQ(test.images.sizes(), (mt::Shape{10000, 1, 28, 28}));
  EXPECT_EQ(test.labels.slice(0, 0, 5).to_vector<int64_t>(), (std::vector<int64_t>{9, 2, 1, 1, 6}));
  EXPECT_EQ(md::read_idx(dir + "/t10k-images-idx3-ubyte.gz").to(mt::kInt64).sum().item<int64_t>(), 573469082);
}

// ---------------------------------------------------------------- CIFAR-10

using Cifar = TempDir;

namespace {
// `labels.size()` records; pixel byte j of record r is (r * 7 + j) mod 256.
Bytes cifar_records(const Bytes& labels) {
  Bytes b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.push_back(labels[r]);
    for (size_t j = 0; j < 3072; ++j) b.push_back(uint8_t(r * 7 + j));
  }
  return b;
}
}  // namespace

TEST_F(Cifar, ReadsRecords) {
  write_file(path("b.bin"), cifar_records({0, 9, 5}));
  md::LabeledImages d = md::read_cifar10(path("b.bin"));
  EXPECT_EQ(d.images.sizes(), (mt::Shape{3, 3, 32, 32}));
  EXPECT_EQ(d.images.dtype(), mt::kUInt8);
  EXPECT_EQ(d.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 9, 5}));
  // Record 2, green channel, row 4, column 10: byte 1024 + 4 * 32 + 10 of its pixels.
  EXPECT_EQ(d.images.select(0, 2).select(0, 1).select(0, 4).select(0, 10).item<int64_t>(),
            (2 * 7 + 1024 + 4 * 32 + 10) % 256);
  write_file(path("b.bin.gz"), gzip_stored(cifar_records({3})));
  EXPECT_EQ(md::read_cifar10(path("b.bin.gz")).labels.to_vector<int64_t>(), (std::vector<int64_t>{3}));
}

TEST_F(Cifar, ValidatesSizeAndLabels) {
  Bytes b = cifar_records({1, 2, 3});
  b.pop_back();
  write_file(path("t.bin"), b);
  expect_error([&] { md::read_cifar10(path("t.bin")); }, {path("t.bin"), "9218 bytes", "3073-byte records"});
  write_file(path("l.bin"), cifar_records({1, 10}));
  expect_error([&] { md::read_cifar10(path("l.bin")); }, {path("l.bin"), "record 1", "label 10"});
  write_file(path("e.bin"), {});
  expect_error([&] { md::read_cifar10(path("e.bin")); }, {path("e.bin"), "empty"});
  expect_error([&] { md::read_cifar10(path("none.bin")); }, {path("none.bin"), "does not exist"});
}

TEST_F(Cifar, LoadsSplitsFromDirectory) {
  expect_error([&] { md::load_cifar10(path("missing")); }, {path("missing"), "cifar-10-batches-bin"});
  write_file(path("test_batch.bin"), cifar_records({4, 2}));
  md::LabeledImages test = md::load_cifar10(dir_.string(), md::Split::Test);
  EXPECT_EQ(test.images.sizes(), (mt::Shape{2, 3, 32, 32}));
  EXPECT_EQ(test.images.dtype(), mt::kFloat32);
  EXPECT_FLOAT_EQ(test.images.to_vector<float>()[5], 5.0f / 255.0f);
  expect_error([&] { md::load_cifar10(dir_.string(), md::Split::Train); }, {"data_batch_1.bin"});
  for (int i = 1; i <= 5; ++i)
    write_file(path("data_batch_" + std::to_string(i) + ".bin"), cifar_records({uint8_t(i)}));
  md::LabeledImages train = md::load_cifar10(dir_.string(), md::Split::Train);
  EXPECT_EQ(train.labels.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(train.images.size(0), 5);
}

// ---------------------------------------------------------------- datasets and transforms

TEST(TensorDataset, IndexesRows) {
  mt::Tensor x = mt::arange(12, {.dtype = mt::kFloat32}).reshape({6, 2});
  mt::Tensor y = mt::arange(6);
  md::TensorDataset ds(x, y);
  EXPECT_EQ(ds.size(), 6);
  auto [d, t] = ds.get(4);
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{8, 9}));
  EXPECT_EQ(t.item<int64_t>(), 4);
  md::Batch b = ds.get_batch({5, 0, 5});
  EXPECT_EQ(b.data.sizes(), (mt::Shape{3, 2}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{10, 11, 0, 1, 10, 11}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{5, 0, 5}));
  // The default (stacking) path gives the same batch.
  md::Batch s = ds.Dataset::get_batch({5, 0, 5});
  EXPECT_EQ(s.data.to_vector<float>(), b.data.to_vector<float>());
  EXPECT_EQ(s.target.to_vector<int64_t>(), b.target.to_vector<int64_t>());
  // Non-contiguous input.
  md::TensorDataset tr(x.t(), mt::arange(2));
  EXPECT_EQ(tr.get_batch({1}).data.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  // Unlabeled.
  md::TensorDataset u(x);
  EXPECT_FALSE(u.get_batch({0, 1}).target.defined());
}

TEST(TensorDataset, Errors) {
  expect_error([] { md::TensorDataset(mt::zeros({3, 2}), mt::zeros({4})); }, {"[3, 2]", "[4]"});
  expect_error([] { md::TensorDataset(mt::zeros({}), mt::zeros({1})); }, {"0-dim"});
  md::TensorDataset ds(mt::zeros({3, 2}), mt::zeros({3}));
  expect_error([&] { ds.get(3); }, {"index 3", "3 examples"});
  expect_error([&] { ds.get_batch({0, -1}); }, {"index -1"});
}

TEST(Normalize, PerChannel) {
  mt::Tensor x = mt::from_vector<float>({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2});  // [C=2, H=2, W=2]
  md::Normalize norm({1.0, 10.0}, {2.0, 5.0});
  EXPECT_EQ(norm(x).to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 1.5f, 0, 2, 4, 6}));
  // The same transform on a batch [N=2, C, H, W] (channel dim -3) and on uint8 input.
  mt::Tensor batch = mt::stack({x, x});
  EXPECT_EQ(norm(batch).select(0, 1).to_vector<float>(), norm(x).to_vector<float>());
  mt::Tensor u8 = x.to(mt::kUInt8);
  EXPECT_EQ(norm(u8).dtype(), mt::kFloat32);
  EXPECT_EQ(norm(u8).to_vector<float>(), norm(x).to_vector<float>());
  // One value for all channels; channel dim 0 for 1-D features.
  md::Normalize all({1.0}, {0.5}, 0);
  EXPECT_EQ(all(mt::from_vector<double>({1, 2})).to_vector<double>(), (std::vector<double>{0, 2}));
  // As an Example transform: the target passes through.
  md::Example e = norm(md::Example{x, mt::scalar_tensor(3)});
  EXPECT_EQ(e.target.item<float>(), 3.0f);
}

TEST(Normalize, Errors) {
  expect_error([] { md::Normalize({0.5, 0.5}, {1.0}); }, {"2 values", "1"});
  expect_error([] { md::Normalize({0.5}, {0.0}); }, {"stddev[0]"});
  md::Normalize norm({0.5, 0.5, 0.5}, {1, 1, 1});
  expect_error([&] { norm(mt::zeros({1, 28, 28})); }, {"[1, 28, 28]", "1 channels", "3 values"});
  expect_error([&] { norm(mt::zeros({28, 28})); }, {"out of range", "[28, 28]"});
}

TEST(TransformDataset, AppliesPerExample) {
  md::TensorDataset base(mt::ones({4, 1, 2, 2}), mt::arange(4));
  md::TransformDataset ds(base, md::Normalize({0.5}, {0.25}));
  EXPECT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.get(2).data.to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_EQ(ds.get_batch({1, 3}).target.to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
}

// ---------------------------------------------------------------- DataLoader

namespace {

md::TensorDataset range_dataset(int64_t n) {
  return md::TensorDataset(mt::arange(n).reshape({n, 1}).to(mt::kFloat32), mt::arange(n));
}

// The targets of every batch of one epoch.
std::vector<std::vector<int64_t>> epoch_targets(md::DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& [x, y] : loader) out.push_back(y.to_vector<int64_t>());
  return out;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& v) {
  std::vector<int64_t> out;
  for (const auto& b : v) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Counts get() calls; throws at `bad` (if >= 0).
struct CountingDataset : md::Dataset {
  int64_t n, bad;
  mutable std::atomic<int64_t> calls{0};
  CountingDataset(int64_t n, int64_t bad = -1) : n(n), bad(bad) {}
  int64_t size() const override { return n; }
  md::Example get(int64_t i) const override {
    ++calls;
    if (i == bad) throw mt::Error("CountingDataset: example " + std::to_string(i) + " is broken");
    return {mt::full({2}, double(i)), mt::scalar_tensor(double(i), {.dtype = mt::kInt64})};
  }
};

}  // namespace

static_assert(std::input_iterator<md::DataLoader::Iterator>);
static_assert(std::sentinel_for<std::default_sentinel_t, md::DataLoader::Iterator>);

TEST(DataLoader, BatchesInOrder) {
  md::DataLoader loader(range_dataset(10), {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  int count = 0;
  for (auto& [x, y] : loader) {
    EXPECT_EQ(x.dim(), 2);
    EXPECT_EQ(x.size(0), y.size(0));
    EXPECT_EQ(x.select(1, 0).to(mt::kInt64).to_vector<int64_t>(), y.to_vector<int64_t>());
    ++count;
  }
  EXPECT_EQ(count, 3);
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
}

TEST(DataLoader, DropLast) {
  md::DataLoader loader(range_dataset(10), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.size(), 2);
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  md::DataLoader tiny(range_dataset(3), {.batch_size = 4, .drop_last = true});
  EXPECT_TRUE(epoch_targets(tiny).empty());
  md::DataLoader empty(md::TensorDataset(mt::zeros({0, 2})), {.batch_size = 4});
  EXPECT_TRUE(epoch_targets(empty).empty());
}

TEST(DataLoader, ShuffleIsSeededAndChangesPerEpoch) {
  auto run = [](uint64_t seed, int64_t prefetch) {
    md::DataLoader loader(range_dataset(50), {.batch_size = 8, .shuffle = true, .seed = seed, .prefetch = prefetch});
    std::vector<std::vector<int64_t>> epochs;
    for (int e = 0; e < 3; ++e) epochs.push_back(flatten(epoch_targets(loader)));
    return epochs;
  };
  auto a = run(42, 2), b = run(42, 2), c = run(43, 2), sync = run(42, 0);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, sync);
  EXPECT_NE(a, c);
  EXPECT_NE(a[0], a[1]);
  EXPECT_NE(a[1], a[2]);
  std::vector<int64_t> sorted_ids(50);
  std::iota(sorted_ids.begin(), sorted_ids.end(), 0);
  for (auto e : a) {
    EXPECT_NE(e, sorted_ids);
    std::sort(e.begin(), e.end());
    EXPECT_EQ(e, sorted_ids);  // a permutation: every example exactly once
  }
}

TEST(DataLoader, EarlyBreakStartsANewEpoch) {
  md::DataLoader loader(range_dataset(20), {.batch_size = 2, .shuffle = true, .seed = 7});
  md::DataLoader ref(range_dataset(20), {.batch_size = 2, .shuffle = true, .seed = 7});
  auto ref0 = epoch_targets(ref), ref1 = epoch_targets(ref);
  for (auto& [x, y] : loader) {
    EXPECT_EQ(y.to_vector<int64_t>(), ref0[0]);
    break;  // the worker is stopped and joined here
  }
  EXPECT_EQ(loader.state().epoch, 0);
  EXPECT_EQ(epoch_targets(loader), ref1);  // the interrupted epoch 0 does not resume
  EXPECT_EQ(loader.state().epoch, 2);
}

TEST(DataLoader, DestroyingTheLoaderStopsTheWorker) {
  CountingDataset ds(1000);
  auto loader = std::make_unique<md::DataLoader>(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                                                 md::DataLoaderOptions{.batch_size = 1});
  auto it = loader->begin();
  EXPECT_EQ((*it).target.item<int64_t>(), 0);
  loader.reset();  // joins the worker while the iterator is still alive
  const int64_t calls = ds.calls;
  EXPECT_LE(calls, 4);
  ++it;
  EXPECT_TRUE(it == std::default_sentinel);
  EXPECT_EQ(ds.calls, calls);
}

TEST(DataLoader, PrefetchIsBounded) {
  CountingDataset ds(1000);
  md::DataLoader loader(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                        {.batch_size = 5, .prefetch = 2});
  auto it = loader.begin();  // holds batch 0; the worker fills 2 more slots and waits
  for (int i = 0; i < 1000 && ds.calls < 15; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds.calls, 15);
  ++it;
  for (int i = 0; i < 1000 && ds.calls < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(ds.calls, 20);
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8, 9}));
}

TEST(DataLoader, WorkerExceptionIsRethrown) {
  for (int64_t prefetch : {2, 0}) {
    CountingDataset ds(10, /*bad=*/5);
    md::DataLoader loader(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                          {.batch_size = 2, .prefetch = prefetch});
    int seen = 0;
    expect_error(
        [&] {
          for (auto& [x, y] : loader) {
            (void)x;
            (void)y;
            ++seen;
          }
        },
        {"DataLoader", "batch 2", "example 5 is broken"});
    EXPECT_EQ(seen, 2);
    // The loader is usable again afterwards.
    ds.bad = -1;
    EXPECT_EQ(flatten(epoch_targets(loader)).size(), 10u);
  }
  // Exceptions that are not mantissa::Error pass through unchanged.
  struct Custom {};
  struct Throwing : md::Dataset {
    int64_t size() const override { return 4; }
    md::Example get(int64_t) const override { throw Custom{}; }
  };
  md::DataLoader loader(Throwing{}, {.batch_size = 2});
  EXPECT_THROW(loader.begin(), Custom);
}

// Batches that take longer the lower their number, so with several workers later batches
// finish first: the consumer must still receive them in order.
struct SlowStartDataset : md::Dataset {
  int64_t n;
  mutable std::atomic<int64_t> calls{0};
  explicit SlowStartDataset(int64_t n) : n(n) {}
  int64_t size() const override { return n; }
  md::Example get(int64_t i) const override {
    ++calls;
    std::this_thread::sleep_for(std::chrono::microseconds(200 * std::max<int64_t>(0, 20 - i)));
    return {mt::full({2}, double(i)), mt::scalar_tensor(double(i), {.dtype = mt::kInt64})};
  }
};

TEST(DataLoader, WorkersDeliverTheSameBatchesInOrder) {
  SlowStartDataset ds(40);
  auto shared = std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {});
  // The augmentation draws from a generator seeded by (seed, epoch, batch): with any number
  // of workers batch b gets the same draw.
  auto noise = [](md::Batch b, mt::Generator& g) {
    b.data = b.data + g.uniform();
    return b;
  };
  auto run = [&](int64_t workers, bool shuffle) {
    md::DataLoader loader(shared, {.batch_size = 3,
                                   .shuffle = shuffle,
                                   .seed = 11,
                                   .prefetch = 2,
                                   .workers = workers,
                                   .random_transform = noise});
    std::vector<std::vector<float>> data;
    std::vector<std::vector<int64_t>> targets;
    for (int e = 0; e < 2; ++e)
      for (auto& [x, y] : loader) {
        data.push_back(x.to_vector<float>());
        targets.push_back(y.to_vector<int64_t>());
      }
    return std::make_pair(data, targets);
  };
  for (bool shuffle : {false, true}) {
    const auto ref = run(0, shuffle);
    ASSERT_EQ(ref.second.size(), 28u);  // 14 batches per epoch, 2 epochs
    if (!shuffle) {
      EXPECT_EQ(ref.second[1], (std::vector<int64_t>{3, 4, 5}));
    }
    for (int64_t workers : {1, 3, 8}) {
      SCOPED_TRACE("workers " + std::to_string(workers) + (shuffle ? ", shuffled" : ""));
      EXPECT_EQ(run(workers, shuffle), ref);
    }
  }
}

TEST(DataLoader, WorkersBoundWhatIsLoadedAhead) {
  CountingDataset ds(1000);
  md::DataLoader loader(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                        {.batch_size = 5, .prefetch = 1, .workers = 3});
  auto it = loader.begin();  // holds batch 0; 3 workers load one batch ahead each and wait
  for (int i = 0; i < 1000 && ds.calls < 20; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ds.calls, 20);
  ++it;
  for (int i = 0; i < 1000 && ds.calls < 25; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ds.calls, 25);
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, 7, 8, 9}));
}

TEST(DataLoader, WorkerExceptionArrivesAfterTheBatchesBeforeIt) {
  for (int64_t workers : {2, 4}) {
    CountingDataset ds(40, /*bad=*/9);  // batch 4 of size 2
    md::DataLoader loader(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                          {.batch_size = 2, .workers = workers});
    std::vector<int64_t> seen;
    expect_error(
        [&] {
          for (auto& [x, y] : loader) {
            (void)x;
            seen.push_back(y.to_vector<int64_t>()[0]);
          }
        },
        {"DataLoader", "batch 4", "example 9 is broken"});
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 2, 4, 6}));
    ds.bad = -1;
    EXPECT_EQ(flatten(epoch_targets(loader)).size(), 40u);  // usable again
  }
}

TEST(DataLoader, BreakingOutJoinsEveryWorker) {
  CountingDataset ds(10000);
  {
    md::DataLoader loader(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                          {.batch_size = 4, .prefetch = 2, .workers = 4});
    for (auto& [x, y] : loader) {
      (void)x;
      (void)y;
      break;
    }
  }
  const int64_t calls = ds.calls;
  EXPECT_LE(calls, 4 * (1 + 2 * 4));  // the batch held plus 2 per worker, at most
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ds.calls, calls);  // nobody is still loading
}

TEST(DataLoader, CollateAndBatchTransform) {
  CountingDataset ds(6);
  md::DataLoader loader(std::shared_ptr<const md::Dataset>(&ds, [](const md::Dataset*) {}),
                        {.batch_size = 3,
                         .collate =
                             [](const std::vector<md::Example>& ex) {
                               md::Batch b = md::default_collate(ex);
                               b.data = b.data * 2.0;
                               return b;
                             },
                         .batch_transform = md::Normalize({1.0}, {2.0}, 1)});
  auto it = loader.begin();
  // example i has data [i, i]: collate doubles, then (2i - 1) / 2.
  EXPECT_EQ(it->data.sizes(), (mt::Shape{3, 2}));
  EXPECT_EQ(it->data.to_vector<float>(), (std::vector<float>{-0.5f, -0.5f, 0.5f, 0.5f, 1.5f, 1.5f}));
}

TEST(DataLoader, BatchesDoNotRecordGraphs) {
  mt::Tensor x = mt::randn({8, 3}, {.requires_grad = true});
  md::DataLoader loader(md::TensorDataset(x, mt::arange(8)), {.batch_size = 4});
  for (auto& [bx, by] : loader) {
    (void)by;
    EXPECT_FALSE(bx.requires_grad());
  }
}

TEST(DataLoader, StateResumesMidEpoch) {
  auto make = [] { return md::DataLoader(range_dataset(30), {.batch_size = 4, .shuffle = true, .seed = 5}); };
  md::DataLoader ref = make();
  epoch_targets(ref);
  auto ref1 = epoch_targets(ref), ref2 = epoch_targets(ref);

  md::DataLoader a = make();
  epoch_targets(a);
  md::DataLoaderState saved;
  int taken = 0;
  for (auto& [x, y] : a) {
    EXPECT_EQ(y.to_vector<int64_t>(), ref1[size_t(taken)]);
    if (++taken == 3) {
      saved = a.state();  // after the step on batch 2
      break;
    }
  }
  EXPECT_EQ(saved.seed, 5u);
  EXPECT_EQ(saved.epoch, 1);
  EXPECT_EQ(saved.batch, 3);

  md::DataLoader b(range_dataset(30), {.batch_size = 4, .shuffle = true, .seed = 999});
  b.set_state(saved);
  auto rest = epoch_targets(b);
  EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(ref1.begin() + 3, ref1.end()));
  EXPECT_EQ(epoch_targets(b), ref2);
  EXPECT_EQ(b.state().epoch, 3);
  EXPECT_EQ(b.state().batch, 0);
  expect_error([&] { b.set_state({.seed = 1, .epoch = -1}); }, {"non-negative"});
}

TEST(DataLoader, OptionErrors) {
  expect_error([] { md::DataLoader(range_dataset(4), {.batch_size = 0}); }, {"batch_size", "0"});
  expect_error([] { md::DataLoader(range_dataset(4), {.prefetch = -1}); }, {"prefetch"});
  expect_error([] { md::DataLoader(range_dataset(4), {.workers = -2}); }, {"workers", "-2"});
  expect_error([] { md::DataLoader(std::shared_ptr<const md::Dataset>(), {}); }, {"null"});
  if (mt::cuda_device_count() == 0)
    expect_error([] { md::DataLoader(range_dataset(4), {.device = mt::Device::cuda(0)}); },
                 {"cuda:0", "not available"});
}

// Pinned memory is a CUDA allocation: without a GPU pin_memory() is a plain contiguous
// copy; with one the copy is page-locked. Either way the values and shape are kept.
TEST(PinMemory, CopiesValuesAndReportsPinning) {
  mt::Tensor x = mt::arange(0, 12, 1, {.dtype = mt::kFloat32}).reshape({3, 4}).t();  // strided
  mt::Tensor p = x.pin_memory();
  EXPECT_TRUE(p.is_contiguous());
  EXPECT_EQ(p.sizes(), (mt::Shape{4, 3}));
  EXPECT_EQ(p.to_vector<float>(), x.contiguous().to_vector<float>());
  EXPECT_EQ(p.is_pinned(), mt::cuda_device_count() > 0);
  EXPECT_FALSE(x.is_pinned());
  if (p.is_pinned()) {
    EXPECT_TRUE(p.pin_memory().is_same(p));
  }
  expect_error([] { (void)mt::Tensor().pin_memory(); }, {"pin_memory", "undefined"});
}

TEST(DataLoader, MoveKeepsIterationWorking) {
  md::DataLoader a(range_dataset(6), {.batch_size = 2});
  auto it = a.begin();
  md::DataLoader b(std::move(a));
  ++it;
  EXPECT_EQ(it->target.to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b.state().batch, 2);
}
