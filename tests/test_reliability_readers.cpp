// Checkpoint and reader edges (docs/reliability.md): optimizer state keys naming one slot
// twice, a gzip member boundary one byte before the reader's input chunk, the decompression
// caps of IDX and CIFAR .gz files at exactly their documented boundaries, and scaler scales
// in a checkpoint that cannot work. Fixtures: tests/fixtures/hostile (tools/gen_hostile_fixtures.py).
#include <filesystem>
#include <string>
#include <vector>

#include "data/gz_reader.h"
#include "optim/sgd.h"
#include "test_util.h"

namespace mt = mantissa;
namespace fs = std::filesystem;
using testing::HasSubstr;

namespace {
std::string fixture(const std::string& name) { return std::string(MANTISSA_TEST_DIR) + "/fixtures/hostile/" + name; }
}  // namespace

// "state.0.step" and "state.00.step" (or param_groups.0 / .00) would fill one slot twice.
TEST(ReliabilityReaders, OptimizerKeysNamingOneSlotTwiceAreRejected) {
  mt::Tensor w = mt::ones({2}).requires_grad_();
  mt::optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  w.sum().backward();
  opt.step();
  const mt::StateDict good = opt.state_dict();
  ASSERT_TRUE(good.scalars.count("state.0.step"));
  ASSERT_TRUE(good.scalars.count("param_groups.0.lr"));
  {
    mt::StateDict bad = good;
    bad.scalars["state.00.step"] = 5;
    EXPECT_ERROR(opt.load_state_dict(bad), HasSubstr("SGD.load_state_dict"), HasSubstr("'state.00.step'"),
                 HasSubstr("same slot as 'state.0.step'"));
  }
  {
    mt::StateDict bad = good;
    bad.insert("state.00.momentum_buffer", mt::zeros({2}));
    EXPECT_ERROR(opt.load_state_dict(bad), HasSubstr("'state.00.momentum_buffer'"), HasSubstr("leading zero"));
  }
  {
    mt::StateDict bad = good;
    bad.scalars["param_groups.00.lr"] = 7;
    EXPECT_ERROR(opt.load_state_dict(bad), HasSubstr("'param_groups.00.lr'"),
                 HasSubstr("same slot as 'param_groups.0.lr'"));
  }
  EXPECT_DOUBLE_EQ(opt.state_dict().scalars.at("param_groups.0.lr"), 0.1);  // untouched
  EXPECT_EQ(opt.state(0)->step, 1);
}

// The next member's magic straddles two 128 KiB reads; Python's gzip reads both files alike.
TEST(ReliabilityReaders, GzipMemberEndingOneByteBeforeTheInputChunk) {
  const mt::Tensor a = mt::data::read_idx(fixture("gz_member_ends_before_chunk.idx.gz"));
  const mt::Tensor b = mt::data::read_idx(fixture("gz_member_ends_after_chunk.idx.gz"));
  ASSERT_EQ(a.sizes(), (mt::Shape{132000}));
  ASSERT_EQ(b.sizes(), (mt::Shape{132000}));
  const std::vector<int64_t> va = a.to_vector<int64_t>(), vb = b.to_vector<int64_t>();
  EXPECT_EQ(va, vb);
  for (int64_t i : {int64_t(0), int64_t(131000), int64_t(131999)})
    EXPECT_EQ(va[size_t(i)], (i * 31 + i / 7) % 251) << i;  // the generator's values
}

// A small .gz may expand to 16 MiB: exactly that much IDX payload loads, one byte more does not.
TEST(ReliabilityReaders, IdxDecompressionCapAtItsBoundary) {
  const std::string exact = fixture("idx_cap_exact.idx.gz"), over = fixture("idx_cap_over.idx.gz");
  ASSERT_LT(fs::file_size(exact), uint64_t(1) << 16);  // so the bound is the 16 MiB floor
  ASSERT_EQ(mt::data::detail::max_decompressed_size(fs::file_size(exact)), uint64_t(16) << 20);
  EXPECT_EQ(mt::data::read_idx(exact).numel(), int64_t(16) << 20);
  EXPECT_ERROR(mt::data::read_idx(over), HasSubstr("read_idx"), HasSubstr(over), HasSubstr("16777217 bytes"),
               HasSubstr("decompression bomb"));
}

// CIFAR-10 records (3073 bytes) under the same 16 MiB: 5459 load, 5460 are rejected.
TEST(ReliabilityReaders, CifarDecompressionCapAtItsBoundary) {
  const std::string under = fixture("cifar_cap_under.bin.gz"), over = fixture("cifar_cap_over.bin.gz");
  ASSERT_LT(fs::file_size(over), uint64_t(1) << 16);
  ASSERT_EQ((uint64_t(16) << 20) / 3073, 5459u);
  EXPECT_EQ(mt::data::read_cifar10(under).labels.numel(), 5459);
  EXPECT_ERROR(mt::data::read_cifar10(over), HasSubstr("read_cifar10"), HasSubstr(over),
               HasSubstr("more than 5459 records"), HasSubstr("decompression bomb"));
}

// A shape longer than 64 dimensions is rejected by the streaming scan, before the JSON is
// parsed (a 100 MB header of 49 million 1s is stopped at element 65); 64 load.
TEST(ReliabilityReaders, SafetensorsArraysLongerThanAShapeAreRejectedEarly) {
  const std::string r65 = fixture("st_rank_65.safetensors");
  EXPECT_ERROR(mt::load_safetensors(r65), HasSubstr("load_safetensors"), HasSubstr(r65),
               HasSubstr("more than 64 elements"));
  const mt::Tensor t = mt::load_safetensors(fixture("st_rank_64.safetensors")).tensors.at("x");
  EXPECT_EQ(t.dim(), 64);
  EXPECT_EQ(t.to_vector<uint8_t>(), std::vector<uint8_t>{7});
  EXPECT_ERROR(mt::save_safetensors("/nonexistent/never_written.safetensors", {{"x", t.reshape(mt::Shape(65, 1))}}),
               HasSubstr("save_safetensors"), HasSubstr("65 dimensions"));
}
