// data::DistributedSampler and DataLoaderOptions::sampler (no MPI needed: ranks are
// simulated by constructing one sampler per rank).
#include <gtest/gtest.h>
#include <mantissa.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace mt = mantissa;
namespace md = mantissa::data;

namespace {
std::vector<std::vector<int64_t>> shards(int64_t n, int world, md::DistributedSamplerOptions o, int64_t epoch) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < world; ++r) out.push_back(md::DistributedSampler(n, r, world, o).indices(epoch));
  return out;
}
}  // namespace

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheData) {
  auto s = shards(12, 3, {.seed = 5}, 0);
  std::vector<int64_t> all;
  for (auto& sh : s) {
    EXPECT_EQ(sh.size(), 4u);
    all.insert(all.end(), sh.begin(), sh.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(12);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected);
}

TEST(DistributedSampler, UnshuffledIsStrided) {
  auto s = shards(7, 2, {.shuffle = false}, 3);
  EXPECT_EQ(s[0], (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(s[1], (std::vector<int64_t>{1, 3, 5, 0}));  // padded from the start
  auto d = shards(7, 2, {.shuffle = false, .drop_last = true}, 0);
  EXPECT_EQ(d[0], (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(d[1], (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(md::DistributedSampler(7, 1, 2, {.drop_last = true}).size(), 3);
  EXPECT_EQ(md::DistributedSampler(7, 1, 2).size(), 4);
  // Fewer examples than ranks: padding cycles.
  auto tiny = shards(2, 3, {.shuffle = false}, 0);
  EXPECT_EQ(tiny[2], (std::vector<int64_t>{0}));
}

TEST(DistributedSampler, ShufflesPerEpochWithTheSharedSeed) {
  auto e0 = shards(100, 2, {.seed = 9}, 0), e0_again = shards(100, 2, {.seed = 9}, 0),
       e1 = shards(100, 2, {.seed = 9}, 1);
  EXPECT_EQ(e0, e0_again);  // a function of (seed, epoch) only
  EXPECT_NE(e0[0], e1[0]);
  EXPECT_NE(e0, shards(100, 2, {.seed = 10}, 0));
  // The union of an epoch is the shared permutation, dealt round-robin.
  auto perm = md::epoch_permutation(100, 9, 0);
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(e0[i % 2][i / 2], perm[i]);
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(md::DistributedSampler(10, 2, 2), mt::Error);
  EXPECT_THROW(md::DistributedSampler(10, -1, 2), mt::Error);
  EXPECT_THROW(md::DistributedSampler(10, 0, 0), mt::Error);
  EXPECT_THROW(md::DistributedSampler(1, 0, 2, {.drop_last = true}), mt::Error);
}

TEST(DistributedSampler, DrivesTheDataLoader) {
  mt::Tensor x = mt::arange(10, {.dtype = mt::kFloat32}).reshape({10, 1});
  mt::Tensor y = mt::arange(10);
  auto sampler = std::make_shared<md::DistributedSampler>(10, 1, 2, md::DistributedSamplerOptions{.seed = 3});
  md::DataLoader loader(md::TensorDataset(x, y), {.batch_size = 2, .prefetch = 0, .sampler = sampler});
  EXPECT_EQ(loader.size(), 3);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (auto& b : loader)
      for (int64_t v : b.target.to_vector<int64_t>()) seen.push_back(v);
    EXPECT_EQ(seen, sampler->indices(epoch)) << "epoch " << epoch;
  }
  EXPECT_THROW(md::DataLoader(md::TensorDataset(x, y), {.shuffle = true, .sampler = sampler}), mt::Error);
}
