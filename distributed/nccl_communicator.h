// The NCCL communicator: collectives on CUDA tensors, queued on the device's current
// stream (so the returned Work needs no host wait: the kernels that read the result are
// ordered after it). fp16/bf16 sums are widened to fp32 for the all-reduce and rounded once
// into the tensor (the Communicator contract); Max/Min stay in 16 bits (exact).
//
// Never hangs forever in its own calls: a non-blocking NCCL communicator whose calls, Work
// test()/wait() and barrier() check NCCL's asynchronous error and the age of the oldest
// unfinished collective against the MPI path's timeout (dist::InitOptions::timeout_s or
// MANTISSA_DIST_TIMEOUT); past it the communicator is aborted (ncclCommAbort) and a
// mantissa::Error names the rank and the collective (cuda/nccl.h).
#pragma once
#include <memory>

#include "cuda/nccl.h"
#include "distributed/communicator.h"

namespace mantissa::dist {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks: rank 0 creates NCCL's unique id and broadcasts it.
  NcclCommunicator(Communicator& bootstrap, int device, double timeout_s);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "nccl"; }
  bool supports(Device device) const override { return device.is_cuda() && device.index == comm_->device(); }

  void barrier() override;
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override;
  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override;
  std::unique_ptr<Work> all_gather_async(const Tensor& in, const Tensor& out) override;

 private:
  std::unique_ptr<cuda::nccl::Comm> comm_;
  int rank_ = 0, world_size_ = 1;
};

}  // namespace mantissa::dist
