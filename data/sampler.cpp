#include "data/sampler.h"

#include <numeric>
#include <random>

#include "core/error.h"

namespace mantissa::data {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

// Uniform in [0, n) without modulo bias; std::uniform_int_distribution is not
// specified bit-for-bit, so it would give different orders on other standard libraries.
uint64_t bounded(std::mt19937_64& e, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: reject the short last bucket
  for (;;) {
    uint64_t r = e();
    if (r >= threshold) return r % n;
  }
}

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  if (n > 1) {
    std::mt19937_64 e(splitmix64(seed ^ splitmix64(uint64_t(epoch))));
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[size_t(i)], order[bounded(e, uint64_t(i + 1))]);
  }
  return order;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       DistributedSamplerOptions options)
    : n_(dataset_size), rank_(rank), world_(world_size), options_(options) {
  MT_CHECK(world_size >= 1, "DistributedSampler", "world_size must be >= 1, got ", world_size);
  MT_CHECK(rank >= 0 && rank < world_size, "DistributedSampler", "rank ", rank, " is not in [0, ", world_size, ")");
  MT_CHECK(dataset_size >= 0, "DistributedSampler", "dataset size must be non-negative, got ", dataset_size);
  per_rank_ = options.drop_last ? n_ / world_ : (n_ + world_ - 1) / world_;
  MT_CHECK(per_rank_ > 0 || n_ == 0, "DistributedSampler", "drop_last with ", n_, " examples and ", world_,
           " ranks leaves no example for any rank");
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  if (options_.shuffle)
    order = epoch_permutation(n_, options_.seed, epoch);
  else
    std::iota(order.begin(), order.end(), int64_t(0));
  const int64_t total = per_rank_ * world_;
  // Pad by cycling through the order (several times if n < world).
  for (int64_t i = n_; i < total; ++i) order.push_back(order[size_t(i % n_)]);
  order.resize(size_t(total));
  std::vector<int64_t> mine;
  mine.reserve(size_t(per_rank_));
  for (int64_t i = rank_; i < total; i += world_) mine.push_back(order[size_t(i)]);
  return mine;
}

}  // namespace mantissa::data
