#include "data/dataloader.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <utility>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/grad_mode.h"
#include "autograd/tensor_methods.h"
#include "core/error.h"
#include "core/profiler.h"
#include "cuda/cuda_api.h"

namespace mantissa::data {

namespace {

// The visiting order of epoch `epoch`: a function of (seed, epoch) alone (or the sampler's
// choice), so a resumed run and an interrupted epoch never disturb later orders.
std::vector<int64_t> epoch_order(const DataLoaderOptions& o, int64_t n, int64_t epoch) {
  if (o.sampler) return o.sampler->indices(epoch);
  if (o.shuffle) return epoch_permutation(n, o.seed, epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  return order;
}

}  // namespace

// ---------------------------------------------------------------- Epoch

class DataLoader::Epoch {
 public:
  Epoch(DataLoader* owner, int64_t start, int64_t num_batches)
      : owner_(owner),
        dataset_(owner->dataset_),
        options_(owner->options_),
        epoch_(owner->epoch_),
        order_(epoch_order(options_, dataset_->size(), epoch_)),
        next_(start),
        num_batches_(num_batches),
        capacity_(options_.prefetch * options_.workers),
        claimed_(start) {
    if (capacity_ == 0) return;
    workers_.reserve(size_t(options_.workers));
    for (int64_t w = 0; w < options_.workers; ++w) workers_.emplace_back([this] { run(); });
  }

  ~Epoch() {
    stop();
    if (owner_ && owner_->active_ == this) owner_->active_ = nullptr;
  }

  // Joins the workers; fetch() returns false from now on.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    slot_free_.notify_all();
    batch_ready_.notify_all();
    for (std::thread& w : workers_)
      if (w.joinable()) w.join();
  }

  // Blocks for the next batch in order; false at the end of the epoch (or once stopped).
  // Re-throws an exception raised while loading the batch.
  bool fetch() {
    if (next_ >= num_batches_) return false;
    if (capacity_ == 0) {
      if (stop_) return false;
      current_ = load(next_++);
      return true;
    }
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      batch_ready_.wait(lock, [&] { return stop_ || ready_.count(next_) != 0; });
      if (stop_) return false;
      auto it = ready_.find(next_);
      item = std::move(it->second);
      ready_.erase(it);
      ++next_;  // under the lock: the workers' window is counted from it
    }
    slot_free_.notify_one();
    if (item.error) std::rethrow_exception(item.error);
    current_ = std::move(item.batch);
    return true;
  }

  Batch& current() { return current_; }
  DataLoader* owner() const { return owner_; }
  void set_owner(DataLoader* owner) { owner_ = owner; }

 private:
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };

  // The batch on options_.device, uploaded from pinned memory when asked. Non-blocking: the
  // DMA is queued on the device's current stream (the legacy default stream, which orders it
  // before the consumer's kernels), and the staging block, freed when this function returns,
  // is not reused before an event recorded on that (device, stream) has completed.
  Batch to_device(Batch batch) const {
    for (Tensor* t : {&batch.data, &batch.target}) {
      if (!t->defined() || t->device() == options_.device) continue;
      if (options_.pin_memory && t->device().is_cpu()) *t = t->pin_memory();
      *t = t->to(options_.device, /*non_blocking=*/true);
    }
    return batch;
  }

  Batch load(int64_t b) const {
    try {
      const int64_t n = int64_t(order_.size()), bs = options_.batch_size;
      const int64_t lo = b * bs, hi = std::min(lo + bs, n);
      std::vector<int64_t> indices(order_.begin() + lo, order_.begin() + hi);
      Batch batch;
      if (options_.collate) {
        std::vector<Example> examples;
        examples.reserve(indices.size());
        for (int64_t i : indices) examples.push_back(dataset_->get(i));
        batch = options_.collate(examples);
      } else {
        batch = dataset_->get_batch(indices);
      }
      if (options_.random_transform) {
        Generator gen(splitmix64(splitmix64(options_.seed ^ splitmix64(uint64_t(epoch_))) ^ uint64_t(b)));
        batch = options_.random_transform(std::move(batch), gen);
      }
      if (options_.batch_transform) batch = options_.batch_transform(std::move(batch));
      if (!options_.device.is_cpu()) batch = to_device(std::move(batch));
      return batch;
    } catch (const Error& e) {
      throw Error(detail::concat("DataLoader: loading batch ", b, " of epoch ", epoch_, ": ", e.what()));
    }
  }

  // One worker: claims the lowest batch nobody has claimed, loads it, files it under its
  // number; the consumer takes them in order whichever worker finishes first.
  void run() {
    NoGradGuard no_grad;  // batches are inputs, never part of a graph
    // This thread's CUDA work (page-locked allocations, uploads) belongs to the target GPU:
    // without this it would create a context on GPU 0 on every rank.
    if (options_.device.is_cuda()) cuda::set_device(options_.device.index);
#ifdef _OPENMP
    // One OpenMP pool for the process: a second team on this thread would fight the
    // consumer's kernels for the same cores.
    omp_set_num_threads(1);
#endif
    while (true) {
      int64_t b;
      {
        // Claim a slot before loading, so at most prefetch * workers batches exist beyond
        // the one the consumer holds (claimed but not yet taken).
        std::unique_lock<std::mutex> lock(mutex_);
        slot_free_.wait(lock, [&] { return stop_ || failed_ || claimed_ - next_ < capacity_; });
        if (stop_ || failed_ || claimed_ >= num_batches_) return;
        b = claimed_++;
      }
      Item item;
      try {
        item.batch = load(b);
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
        // After a failure no later batch is claimed: the consumer receives every batch
        // before it, then the error (the batches claimed earlier still arrive).
        if (failed) failed_ = true;
        ready_.emplace(b, std::move(item));
      }
      batch_ready_.notify_one();            // the one consumer
      if (failed) slot_free_.notify_all();  // the waiting workers stop
    }
  }

  DataLoader* owner_;  // null once the loader has moved on (or is gone)
  std::shared_ptr<const Dataset> dataset_;
  const DataLoaderOptions options_;
  const int64_t epoch_;
  const std::vector<int64_t> order_;
  int64_t next_;  // the next batch the consumer will receive (written by it under mutex_)
  const int64_t num_batches_;
  const int64_t capacity_;  // batches loaded ahead; 0 = load on the consumer's thread
  Batch current_;

  std::mutex mutex_;
  std::condition_variable batch_ready_, slot_free_;
  std::map<int64_t, Item> ready_;  // loaded batches by number, not yet taken
  int64_t claimed_;                // the next batch a worker will claim
  bool stop_ = false, failed_ = false;
  std::vector<std::thread> workers_;  // declared last: started after everything they read exists
};

// ---------------------------------------------------------------- Iterator

DataLoader::Iterator::Iterator(std::unique_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { advance(); }
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

Batch& DataLoader::Iterator::operator*() const {
  MT_CHECK(epoch_ != nullptr, "DataLoader", "dereferencing an iterator past the end of the epoch");
  return epoch_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  MT_CHECK(epoch_ != nullptr, "DataLoader", "incrementing an iterator past the end of the epoch");
  advance();
  return *this;
}

void DataLoader::Iterator::advance() {
  // The time the training loop waits for its next batch (the worker's own time shows up in
  // its thread's row).
  profiler::Range range("DataLoader.next");
  bool more;
  try {
    more = epoch_->fetch();
  } catch (...) {
    epoch_.reset();  // join the worker before the exception leaves the loop
    throw;
  }
  DataLoader* owner = epoch_->owner();
  if (more) {
    if (owner) ++owner->batch_;
    return;
  }
  if (owner && owner->active_ == epoch_.get()) {  // ran to the end: the next begin() starts a fresh epoch
    ++owner->epoch_;
    owner->batch_ = 0;
    owner->in_epoch_ = false;
  }
  epoch_.reset();
}

// ---------------------------------------------------------------- DataLoader

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  MT_CHECK(dataset_ != nullptr, "DataLoader", "dataset is null");
  MT_CHECK(options_.batch_size >= 1, "DataLoader", "batch_size must be at least 1, got ", options_.batch_size);
  MT_CHECK(options_.prefetch >= 0, "DataLoader", "prefetch must be non-negative, got ", options_.prefetch);
  MT_CHECK(options_.workers >= 0, "DataLoader", "workers must be non-negative, got ", options_.workers);
  MT_CHECK(options_.device.is_cpu() || (options_.device.is_cuda() && options_.device.index < cuda_device_count()),
           "DataLoader", "device ", options_.device.str(), " is not available (", cuda_device_count(),
           " CUDA devices found)");
  MT_CHECK(!(options_.sampler && options_.shuffle), "DataLoader",
           "shuffle must be false when a sampler is given (the sampler decides the order)");
}

DataLoader::DataLoader(DataLoader&& o) noexcept
    : dataset_(std::move(o.dataset_)),
      options_(std::move(o.options_)),
      epoch_(o.epoch_),
      batch_(o.batch_),
      in_epoch_(o.in_epoch_),
      active_(std::exchange(o.active_, nullptr)) {
  if (active_) active_->set_owner(this);
}

DataLoader& DataLoader::operator=(DataLoader&& o) noexcept {
  if (this == &o) return *this;
  stop_active();
  dataset_ = std::move(o.dataset_);
  options_ = std::move(o.options_);
  epoch_ = o.epoch_;
  batch_ = o.batch_;
  in_epoch_ = o.in_epoch_;
  active_ = std::exchange(o.active_, nullptr);
  if (active_) active_->set_owner(this);
  return *this;
}

DataLoader::~DataLoader() { stop_active(); }

void DataLoader::stop_active() {
  if (!active_) return;
  active_->stop();
  active_->set_owner(nullptr);
  active_ = nullptr;
}

int64_t DataLoader::size() const {
  const int64_t n = options_.sampler ? options_.sampler->size() : dataset_->size(), bs = options_.batch_size;
  return options_.drop_last ? n / bs : (n + bs - 1) / bs;
}

DataLoader::Iterator DataLoader::begin() {
  stop_active();
  if (in_epoch_) {  // the previous iteration stopped early: this is a new epoch
    ++epoch_;
    batch_ = 0;
  }
  const int64_t num_batches = size();
  batch_ = std::min(batch_, num_batches);
  in_epoch_ = true;
  auto epoch = std::make_unique<Epoch>(this, batch_, num_batches);
  active_ = epoch.get();
  return Iterator(std::move(epoch));
}

void DataLoader::set_state(const DataLoaderState& s) {
  MT_CHECK(s.epoch >= 0 && s.batch >= 0, "DataLoader::set_state", "epoch and batch must be non-negative, got epoch ",
           s.epoch, ", batch ", s.batch);
  stop_active();
  options_.seed = s.seed;
  epoch_ = s.epoch;
  batch_ = s.batch;
  in_epoch_ = false;
}

}  // namespace mantissa::data
