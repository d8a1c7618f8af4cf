// The NCCL communicator: collectives on CUDA tensors, queued on the device's current
// stream (so the returned Work is already "complete" from the host's point of view: the
// kernels that read the result are ordered after it). fp16/bf16 are summed by NCCL.
#pragma once
#include <memory>

#include "cuda/nccl.h"
#include "dist/communicator.h"

namespace mantissa::dist {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks: rank 0 creates NCCL's unique id and broadcasts it.
  NcclCommunicator(Communicator& bootstrap, int device);

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
