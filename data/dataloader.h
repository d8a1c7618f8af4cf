// DataLoader: batches of a Dataset, shuffled with its own seeded generator and
// prepared on background threads while the consumer trains.
//
//   mt::data::TensorDataset train(images, labels);
//   mt::data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto& [x, y] : loader) { ... }        // x: [64, ...], y: [64]
//
// Epochs: every begin() starts a new epoch. Epoch e visits the examples in a
// permutation derived only from (seed, e), so the same seed gives the same order
// on every run and machine, and each epoch a different one. Breaking out of the
// loop ends that epoch early (the workers are stopped and joined at once).
//
// Threading: `workers` threads (default 1) keep up to `prefetch` batches each loaded
// ahead; batches reach the consumer in order whichever worker finishes first, and are the
// same batches with any number of workers. Workers run with grad recording off and
// single-threaded OpenMP so they never compete with the consumer's thread pool. An
// exception thrown while loading a batch is re-thrown on the consumer's thread by the
// iterator, after the batches before it. workers = 0 or prefetch = 0 loads on the
// consumer's thread (no thread), which is handy for debugging.
//
// Checkpoints: state() is {seed, epoch, batch}; after set_state(s) the next
// begin() resumes epoch s.epoch at batch s.batch with the same order.
#pragma once
#include <concepts>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <vector>

#include "core/random.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace mantissa::data {

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  int64_t prefetch = 2;    // batches prepared ahead per worker; 0 = no thread
  // Threads loading batches (torch's num_workers, as threads: a dataset's get/get_batch is
  // called concurrently and must be safe to call from several threads, as const reads are).
  // 0 = load on the consumer's thread.
  int64_t workers = 1;
  // Collates examples into a batch; empty = dataset.get_batch(indices), which stacks
  // (or gathers rows, for TensorDataset).
  std::function<Batch(const std::vector<Example>&)> collate = {};
  // Applied to every batch after collation, on the worker thread (e.g. Normalize).
  std::function<Batch(Batch)> batch_transform = {};
  // Random augmentation (data/augment.h), applied after collation and before
  // batch_transform, on the worker thread. Its generator is seeded from (seed, epoch,
  // batch) alone, so a batch is augmented the same way on every run and after a resume.
  std::function<Batch(Batch, Generator&)> random_transform = {};
  // Where batches are delivered. For a GPU the worker thread (with that GPU current) queues
  // each batch's upload itself, so loading, collating and pinning overlap the consumer's
  // compute; the DMA itself runs on the device's legacy default stream, in order with the
  // consumer's kernels (no copy/compute overlap on the device).
  Device device = Device::cpu();
  // With a GPU device: stage batches in page-locked memory (Tensor::pin_memory) so the
  // upload is an asynchronous DMA.
  bool pin_memory = true;
  // Chooses the examples of each epoch and their order (e.g. DistributedSampler: this
  // rank's shard); when set, `shuffle` must be false and `seed` is not used.
  std::shared_ptr<const Sampler> sampler = {};
};

// What a checkpoint needs to resume a loader: the seed, the current epoch, and
// how many batches of that epoch were already handed out.
struct DataLoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
};

class DataLoader {
  class Epoch;  // one pass over the data: the order, the worker and its queue

 public:
  // An input iterator over one epoch; move-only, since it owns the epoch's worker.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Iterator() = default;
    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;
    ~Iterator();

    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return epoch_ == nullptr; }

   private:
    friend class DataLoader;
    explicit Iterator(std::unique_ptr<Epoch> epoch);
    void advance();
    std::unique_ptr<Epoch> epoch_;  // null at the end
  };

  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  // Takes a copy of the dataset (cheap for TensorDataset: tensors are handles).
  template <typename D>
  requires std::derived_from<D, Dataset> DataLoader(D dataset, DataLoaderOptions options = {})
      : DataLoader(std::make_shared<const D>(std::move(dataset)), std::move(options)) {}
  DataLoader(DataLoader&& other) noexcept;
  DataLoader& operator=(DataLoader&& other) noexcept;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  ~DataLoader();

  // Starts the next epoch (stopping an iteration still in progress).
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }

  // Batches per epoch.
  int64_t size() const;
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

  DataLoaderState state() const { return {options_.seed, epoch_, batch_}; }
  // Stops an iteration in progress; the next begin() resumes at `s`.
  void set_state(const DataLoaderState& s);

 private:
  void stop_active();
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;        // the epoch running, or the next to run
  int64_t batch_ = 0;        // batches of epoch_ handed out so far
  bool in_epoch_ = false;    // begin() was called and the epoch has not reached its end
  Epoch* active_ = nullptr;  // owned by the live iterator
};

}  // namespace mantissa::data
