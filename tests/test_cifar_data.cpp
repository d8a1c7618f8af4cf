// CIFAR-100 reader and image augmentation (data/cifar100.h, data/augment.h), and the
// DataLoader's seeded random_transform. Reader inputs are written byte by byte in the
// real binary format (coarse label, fine label, 3072 pixel bytes per record).
#include <gtest/gtest.h>
#include <mantissa.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace mt = mantissa;
namespace md = mantissa::data;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

class Cifar100 : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / ("mantissa_cifar100_" + std::string(info->name()) + "_" + std::to_string(getpid()));
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

// One record per (coarse, fine) pair; pixel byte j of record r is (r * 5 + j) mod 256.
Bytes cifar100_records(const std::vector<std::pair<uint8_t, uint8_t>>& labels) {
  Bytes b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.push_back(labels[r].first);
    b.push_back(labels[r].second);
    for (size_t j = 0; j < 3072; ++j) b.push_back(uint8_t(r * 5 + j));
  }
  return b;
}

// Runs f, expecting a mantissa::Error whose message contains every fragment.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected mantissa::Error";
  } catch (const mt::Error& e) {
    const std::string msg = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos) << "'" << frag << "' not in: " << msg;
  }
}

// Same shape and bit-for-bit equal values.
bool same(const mt::Tensor& a, const mt::Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>();
}

}  // namespace

// ---------------------------------------------------------------- CIFAR-100 reader

TEST_F(Cifar100, ReadsFineAndCoarseLabels) {
  write_file(path("b.bin"), cifar100_records({{0, 99}, {19, 0}, {7, 42}}));
  md::LabeledImages fine = md::read_cifar100(path("b.bin"));
  EXPECT_EQ(fine.images.sizes(), (mt::Shape{3, 3, 32, 32}));
  EXPECT_EQ(fine.images.dtype(), mt::kUInt8);
  EXPECT_EQ(fine.labels.to_vector<int64_t>(), (std::vector<int64_t>{99, 0, 42}));
  // Record 2, blue channel, row 31, column 1: pixel byte 2048 + 31 * 32 + 1.
  EXPECT_EQ(fine.images.select(0, 2).select(0, 2).select(0, 31).select(0, 1).item<int64_t>(),
            (2 * 5 + 2048 + 31 * 32 + 1) % 256);
  md::LabeledImages coarse = md::read_cifar100(path("b.bin"), md::Cifar100Labels::Coarse);
  EXPECT_EQ(coarse.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 19, 7}));
  EXPECT_EQ(md::cifar100_classes(md::Cifar100Labels::Fine), 100);
  EXPECT_EQ(md::cifar100_classes(md::Cifar100Labels::Coarse), 20);
}

TEST_F(Cifar100, RejectsMalformedFiles) {
  Bytes b = cifar100_records({{1, 2}, {3, 4}});
  b.pop_back();  // a truncated last record
  write_file(path("t.bin"), b);
  expect_error([&] { md::read_cifar100(path("t.bin")); },
               {path("t.bin"), "6147 bytes", "3074-byte records", "1 records and 3073 extra bytes"});
  // A CIFAR-10 file (3073-byte records) is the wrong size for CIFAR-100.
  write_file(path("c10.bin"), Bytes(2 * 3073, 1));
  expect_error([&] { md::read_cifar100(path("c10.bin")); }, {path("c10.bin"), "6146 bytes", "CIFAR-10"});
  write_file(path("coarse.bin"), cifar100_records({{1, 2}, {20, 5}}));
  expect_error([&] { md::read_cifar100(path("coarse.bin")); },
               {path("coarse.bin"), "record 1", "byte offset 3074", "coarse label 20", "0..19"});
  write_file(path("fine.bin"), cifar100_records({{1, 2}, {3, 4}, {5, 100}}));
  // Checked even when the coarse labels are the ones asked for.
  expect_error([&] { md::read_cifar100(path("fine.bin"), md::Cifar100Labels::Coarse); },
               {path("fine.bin"), "record 2", "byte offset 6149", "fine label 100", "0..99"});
  write_file(path("e.bin"), {});
  expect_error([&] { md::read_cifar100(path("e.bin")); }, {path("e.bin"), "empty"});
  expect_error([&] { md::read_cifar100(path("none.bin")); }, {path("none.bin"), "does not exist"});
}

TEST_F(Cifar100, LoadsSplitsFromDirectory) {
  expect_error([&] { md::load_cifar100(path("missing")); }, {path("missing"), "cifar-100-binary"});
  expect_error([&] { md::load_cifar100(dir_.string(), md::Split::Test); }, {"test.bin", "does not exist"});
  write_file(path("train.bin"), cifar100_records({{4, 40}, {2, 21}, {3, 33}}));
  write_file(path("test.bin"), cifar100_records({{9, 90}}));
  md::LabeledImages train = md::load_cifar100(dir_.string(), md::Split::Train, md::Cifar100Labels::Coarse);
  EXPECT_EQ(train.images.sizes(), (mt::Shape{3, 3, 32, 32}));
  EXPECT_EQ(train.images.dtype(), mt::kFloat32);
  EXPECT_FLOAT_EQ(train.images.to_vector<float>()[7], 7.0f / 255.0f);
  EXPECT_EQ(train.labels.to_vector<int64_t>(), (std::vector<int64_t>{4, 2, 3}));
  EXPECT_EQ(md::load_cifar100(dir_.string(), md::Split::Test).labels.to_vector<int64_t>(), (std::vector<int64_t>{90}));
}

// ---------------------------------------------------------------- augmentation

namespace {

// [n, c, h, w] float32 with distinct positive values (so a zero is always padding).
mt::Tensor distinct_images(int64_t n, int64_t c, int64_t h, int64_t w) {
  return mt::arange(1.0, double(n * c * h * w + 1), 1.0, {.dtype = mt::kFloat32}).reshape({n, c, h, w});
}

// The shift (dy, dx) with out[i, j] == in[i + dy, j + dx] (0 outside) for every pixel of
// every channel of one image, or nullopt when no shift in [-pad, pad] explains it.
std::optional<std::pair<int, int>> find_shift(const mt::Tensor& in, const mt::Tensor& out, int pad) {
  const auto a = in.contiguous().to_vector<float>(), b = out.contiguous().to_vector<float>();
  const int c = int(in.size(0)), h = int(in.size(1)), w = int(in.size(2));
  for (int dy = -pad; dy <= pad; ++dy)
    for (int dx = -pad; dx <= pad; ++dx) {
      bool ok = true;
      for (int ch = 0; ch < c && ok; ++ch)
        for (int i = 0; i < h && ok; ++i)
          for (int j = 0; j < w && ok; ++j) {
            const int si = i + dy, sj = j + dx;
            const float want = (si < 0 || si >= h || sj < 0 || sj >= w) ? 0.0f : a[size_t((ch * h + si) * w + sj)];
            ok = b[size_t((ch * h + i) * w + j)] == want;
          }
      if (ok) return std::pair{dy, dx};
    }
  return std::nullopt;
}

}  // namespace

TEST(Augment, RandomCropShiftsEachImageWithZeroPadding) {
  mt::Tensor x = distinct_images(400, 2, 5, 6);
  mt::Generator gen(7);
  md::RandomCrop crop(5, 1);  // height 5 fits exactly with padding: shifts -1..1; width 6 -> crop 5 of 8
  mt::Tensor y = crop(x.narrow(3, 0, 5).contiguous(), gen);
  ASSERT_EQ(y.sizes(), (mt::Shape{400, 2, 5, 5}));
  std::set<std::pair<int, int>> seen;
  for (int64_t n = 0; n < 400; ++n) {
    auto shift = find_shift(x.narrow(3, 0, 5).select(0, n), y.select(0, n), 1);
    ASSERT_TRUE(shift.has_value()) << "image " << n << " is not a padded shift of its input";
    seen.insert(*shift);
  }
  EXPECT_EQ(seen.size(), 9u) << "every shift in [-1, 1]^2 should occur in 400 draws";
  // The standard CIFAR setting on one image [3, 32, 32]: same shape, a shift within 4 pixels.
  mt::Tensor img = distinct_images(1, 3, 32, 32).select(0, 0);
  mt::Tensor out = md::RandomCrop(32, 4)(img, gen);
  EXPECT_EQ(out.sizes(), (mt::Shape{3, 32, 32}));
  EXPECT_TRUE(find_shift(img, out, 4).has_value());
  // A smaller crop without padding stays inside the image: no zeros.
  mt::Tensor small = md::RandomCrop(3)(distinct_images(50, 1, 5, 5), gen);
  EXPECT_EQ(small.sizes(), (mt::Shape{50, 1, 3, 3}));
  EXPECT_GT(small.min().item<float>(), 0.0f);
}

TEST(Augment, HorizontalFlipMirrorsColumns) {
  mt::Tensor x = distinct_images(200, 3, 4, 5);
  mt::Generator gen(3);
  mt::Tensor y = md::RandomHorizontalFlip()(x, gen);
  int flipped = 0;
  for (int64_t n = 0; n < 200; ++n) {
    const auto in = x.select(0, n).to_vector<float>(), out = y.select(0, n).to_vector<float>();
    bool same = in == out, mirrored = true;
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 5; ++j) mirrored &= out[size_t((c * 4 + i) * 5 + j)] == in[size_t((c * 4 + i) * 5 + 4 - j)];
    ASSERT_TRUE(same != mirrored) << "image " << n << " is neither unchanged nor mirrored";
    flipped += mirrored;
  }
  EXPECT_GT(flipped, 70);
  EXPECT_LT(flipped, 130);
  EXPECT_TRUE(same(md::RandomHorizontalFlip(1.0)(x, gen).select(3, 0), x.select(3, 4)));
  EXPECT_TRUE(same(md::RandomHorizontalFlip(0.0)(x, gen), x));
}

TEST(Augment, PadAndUint8) {
  mt::Tensor x = mt::full({2, 1, 28, 28}, 200.0, {.dtype = mt::kUInt8});
  mt::Tensor y = md::Pad(2)(x);
  ASSERT_EQ(y.sizes(), (mt::Shape{2, 1, 32, 32}));
  EXPECT_EQ(y.dtype(), mt::kUInt8);
  EXPECT_EQ(y.to(mt::kInt64).sum().item<int64_t>(), 2 * 28 * 28 * 200);
  EXPECT_EQ(y.select(2, 1).to(mt::kInt64).sum().item<int64_t>(), 0);
  EXPECT_EQ(y.select(2, 2).select(2, 2).to(mt::kInt64).sum().item<int64_t>(), 2 * 200);
}

TEST(Augment, DeterministicForASeed) {
  mt::Tensor x = distinct_images(16, 3, 8, 8);
  md::Compose augment{md::RandomCrop(8, 2), md::RandomHorizontalFlip(), md::Normalize({1, 2, 3}, {2, 2, 2})};
  EXPECT_EQ(augment.size(), 3u);
  mt::Generator g1(11), g2(11), g3(12);
  mt::Tensor a = augment(md::Example{x, {}}, g1).data, b = augment(md::Example{x, {}}, g2).data;
  mt::Tensor c = augment(md::Example{x, {}}, g3).data;
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, c));
  // Normalize ran last: the zero padding became (0 - mean) / std.
  mt::Tensor pad_value = a.select(1, 0).min();
  EXPECT_FLOAT_EQ(pad_value.item<float>(), -0.5f);
}

TEST(Augment, RejectsBadInput) {
  mt::Generator gen;
  expect_error([&] { md::RandomCrop(0); }, {"RandomCrop", "size"});
  expect_error([&] { md::RandomCrop(32, -1); }, {"RandomCrop", "padding"});
  expect_error(
      [&] {
        md::RandomCrop(40, 3)(mt::zeros({1, 3, 32, 32}), gen);
      },
      {"RandomCrop", "40x40", "[1, 3, 32, 32]"});
  expect_error([&] { md::RandomCrop(4)(mt::zeros({32, 32}), gen); }, {"RandomCrop", "[C, H, W]", "[32, 32]"});
  expect_error([&] { md::RandomHorizontalFlip(1.5); }, {"RandomHorizontalFlip", "p must be"});
  expect_error(
      [&] {
        md::RandomHorizontalFlip()(mt::zeros({1, 1, 2, 2}, {.dtype = mt::kInt64}), gen);
      },
      {"RandomHorizontalFlip", "int64"});
  expect_error([&] { md::Pad(-1); }, {"Pad", "non-negative"});
}

// The loader's generator depends on (seed, epoch, batch) only: the same batches with or
// without a worker thread, and after resuming mid-epoch.
TEST(Augment, DataLoaderRandomTransformIsReproducible) {
  mt::Tensor x = distinct_images(40, 1, 6, 6);
  mt::Tensor y = mt::arange(40);
  md::Compose augment{md::RandomCrop(6, 2), md::RandomHorizontalFlip()};
  auto epoch_batches = [&](int64_t prefetch, md::DataLoaderState state) {
    md::DataLoader loader(
        md::TensorDataset(x, y),
        {.batch_size = 8, .shuffle = true, .seed = 5, .prefetch = prefetch, .random_transform = augment});
    loader.set_state(state);
    std::vector<mt::Tensor> out;
    for (auto& batch : loader) out.push_back(batch.data);
    return out;
  };
  auto threaded = epoch_batches(2, {5, 1, 0});
  auto inline_ = epoch_batches(0, {5, 1, 0});
  auto resumed = epoch_batches(2, {5, 1, 3});
  ASSERT_EQ(threaded.size(), 5u);
  ASSERT_EQ(resumed.size(), 2u);
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(same(threaded[i], inline_[i])) << "batch " << i;
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(same(threaded[3 + i], resumed[i])) << "batch " << 3 + i;
  auto other_epoch = epoch_batches(2, {5, 2, 0});
  EXPECT_FALSE(same(threaded[0], other_epoch[0]));
}
