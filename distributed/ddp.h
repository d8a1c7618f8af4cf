// nn::DistributedDataParallel: data parallelism over the ranks of dist::init().
//
//   mt::dist::init();
//   Net net;                                               // same architecture on every rank
//   mt::nn::DistributedDataParallel ddp(net);              // rank 0's parameters and buffers everywhere
//   mt::optim::AdamW opt(net.parameters(), {.lr = 1e-3});
//   for (auto& [x, y] : loader) {                          // each rank its own shard (DistributedSampler)
//     opt.zero_grad();
//     mt::Tensor loss;
//     { mt::amp::Autocast ac(mt::kHalf); loss = F::cross_entropy(ddp(x), y); }
//     scaler.backward(loss);   // gradients all-reduced in buckets while backward runs
//     scaler.step(opt);        // every rank skips together when any rank overflowed
//     scaler.update();
//   }
//
// Buckets. Parameters are grouped, in reverse registration order (the order backward
// produces their gradients), into buckets of about bucket_cap_mb. A hook runs after each
// gradient is accumulated into .grad; when a bucket's last gradient arrives the bucket is
// copied into one flat buffer and its all-reduce starts (non-blocking), so communication
// overlaps the rest of backward. Buckets start in a fixed order on every rank (collectives
// must match); at the end of backward the remaining ones start, every bucket is waited
// for, divided by the world size and written back into .grad. A parameter that got no
// gradient on a rank contributes zeros.
//
// Mixed precision. Under GradScaler::backward the found-inf flag of every rank is
// max-reduced after the buckets, so a step that overflows on one rank is skipped by all
// and the loss scales stay identical. With comm_dtype fp16/bf16, gradients travel in 16
// bits' precision and are summed in fp32: over NCCL the rounded values are all-reduced as
// fp32 (NCCL would add 16-bit buffers in 16 bits; the wire then carries 4 bytes per value);
// over MPI (no 16-bit sum) every rank all-gathers the 16-bit buckets and adds them in fp32 in
// rank order.
//
// no_sync(): while the guard lives, backward only accumulates locally (gradient
// accumulation); the first backward after it reduces the accumulated gradients.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "distributed/communicator.h"
#include "nn/module.h"

namespace mantissa::nn {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25;             // bucket size in MiB of gradient (as communicated)
  std::optional<DType> comm_dtype = {};  // Float16 / BFloat16: compress gradients in transit
  bool broadcast_buffers = true;         // rank 0's buffers (e.g. batch-norm statistics) before each forward
};

// Communication counters since construction (read them for logging).
struct DistributedDataParallelStats {
  int64_t reductions = 0;   // backward passes whose gradients were reduced
  int64_t buckets = 0;      // bucket collectives started
  double bytes = 0;         // bytes sent into collectives (this rank's buffers)
  double wait_seconds = 0;  // time backward's end spent waiting for collectives to finish
  double pack_seconds = 0;  // time spent copying gradients into and out of buckets
};

class DistributedDataParallel : public Module {
 public:
  // Collective: every rank constructs it with the same model. Checks that the parameters
  // and buffers agree in number, shape and dtype across ranks (mantissa::Error naming the
  // first difference), then broadcasts rank 0's values.
  explicit DistributedDataParallel(Module& module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;
  // The gradient hooks point at this object: it stays where it was built.
  DistributedDataParallel(DistributedDataParallel&&) = delete;
  DistributedDataParallel& operator=(DistributedDataParallel&&) = delete;

  Tensor forward(const Tensor& x) override;
  Module& module() { return *module_; }

  // While alive, backward passes skip the all-reduce (gradients accumulate locally).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp), prev_(ddp.sync_) { ddp.sync_ = false; }
    ~NoSync() {
      if (ddp_) ddp_->sync_ = prev_;
    }
    NoSync(NoSync&& o) noexcept : ddp_(o.ddp_), prev_(o.prev_) { o.ddp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  const DistributedDataParallelStats& stats() const { return stats_; }
  // Parameters per bucket, in launch order (for tests and logging).
  std::vector<size_t> bucket_sizes() const;

  struct Bucket;

 private:
  void check_same_model_everywhere();
  void broadcast_from_rank0(const std::vector<Tensor>& tensors);
  void build_buckets();
  void on_grad_ready(size_t param_index);
  void launch_ready_buckets();
  void launch(Bucket& bucket);
  void finish_backward();

  Module* module_;
  DistributedDataParallelOptions options_;
  std::vector<Tensor> params_;  // trainable parameters, registration order
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::pair<size_t, size_t>> slot_of_;  // param index -> (bucket, position)
  std::shared_ptr<bool> alive_;                     // hooks outlive us inside the parameters
  bool sync_ = true;
  bool in_backward_ = false;
  size_t next_launch_ = 0;
  DistributedDataParallelStats stats_;
};

}  // namespace mantissa::nn
