// Samplers: which examples a DataLoader visits in each epoch, and in what order
// (DataLoaderOptions::sampler). The default, without a sampler, is every example, shuffled
// or not.
//
//   // Data parallelism: each rank sees its own 1/world of the data, reshuffled each epoch.
//   auto shard = std::make_shared<mt::data::DistributedSampler>(train.size(), rank, world,
//                                                               mt::data::DistributedSamplerOptions{.seed = 1});
//   mt::data::DataLoader loader(train, {.batch_size = 64, .sampler = shard});
#pragma once
#include <cstdint>
#include <vector>

namespace mantissa::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // Indices visited per epoch (the same every epoch).
  virtual int64_t size() const = 0;
  // The indices of epoch `epoch`, in visiting order; a function of the epoch alone.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

// SplitMix64: a well-mixed 64-bit hash, used to derive independent seeds (per epoch, per
// batch) from the user's seed.
uint64_t splitmix64(uint64_t x);

// The visiting order of 0..n-1 in epoch `epoch`: a permutation that depends only on
// (seed, epoch) (the DataLoader's own shuffle uses it), identical on every machine.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;       // must be the same on every rank
  bool drop_last = false;  // false: pad with examples from the start so every rank gets as many
};

// Rank r of `world` takes positions r, r + world, r + 2 world, ... of the epoch's order
// (a permutation shared by all ranks through the seed). The ranks' shards are disjoint and
// the same size: when n is not a multiple of world, drop_last drops the last n % world
// examples of the order, otherwise the order is padded by repeating its beginning.
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, DistributedSamplerOptions options = {});
  int64_t size() const override { return per_rank_; }
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  int64_t n_;
  int rank_, world_;
  DistributedSamplerOptions options_;
  int64_t per_rank_;
};

}  // namespace mantissa::data
