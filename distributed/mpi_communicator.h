// The Open MPI communicator: collectives on CPU tensors with MPI's non-blocking
// collectives (MPI_Iallreduce, ...). fp16/bf16 all-reduces travel as fp32 (MPI has no
// 16-bit float sum), so they accumulate in fp32 and are rounded once.
//
// Progress: Open MPI advances a non-blocking collective only inside MPI calls, so test()
// (DistributedDataParallel calls it from its gradient hooks) is what moves a bucket along
// while backward computes. wait() polls with a deadline instead of blocking in MPI_Wait,
// so a rank that died or stopped participating turns into mantissa::Error, not a hang.
#pragma once
#include <memory>

#include "distributed/communicator.h"

namespace mantissa::dist {

class MpiCommunicator final : public Communicator {
 public:
  // All processes of MPI_COMM_WORLD (MPI must be initialized; dist::init does it). The
  // world communicator is duplicated, so our collectives never match a user's own MPI calls.
  explicit MpiCommunicator(double timeout_s);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "mpi"; }
  bool supports(Device device) const override { return device.is_cpu(); }
  double timeout_s() const;
  // True once a wait timed out: the group is unusable and the process should exit.
  bool broken() const;

  void barrier() override;
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override;
  std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) override;
  std::unique_ptr<Work> all_gather_async(const Tensor& in, const Tensor& out) override;

  struct State;

 private:
  std::shared_ptr<State> state_;
  int rank_ = 0, world_size_ = 1;
};

}  // namespace mantissa::dist
