// The communicator interface of distributed/: collectives over the processes of one job, on
// tensors. Two engines implement it: Open MPI for CPU tensors (distributed/mpi_communicator.h)
// and NCCL for CUDA tensors (distributed/nccl_communicator.h); distributed/dist.h picks by device.
//
//   auto work = comm.all_reduce_async(bucket, mt::dist::ReduceOp::Sum);   // in place
//   ...                                                                  // compute meanwhile
//   work->wait();                                                        // bucket holds the sum
//
// Every rank must issue the same collectives in the same order, with tensors of the same
// shape and dtype. Waits give up after the communicator's timeout with mantissa::Error
// (a rank that died or stopped participating), never hang forever.
#pragma once
#include <memory>
#include <string>

#include "core/tensor.h"

namespace mantissa::dist {

enum class ReduceOp { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);

// A collective in flight. wait() finishes it (results visible in the output tensor);
// test() drives it without blocking and says whether it finished.
class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl"
  virtual bool supports(Device device) const = 0;

  virtual void barrier() = 0;
  // In place on a contiguous tensor. Every floating dtype: where the engine cannot sum
  // fp16/bf16 itself, they travel and accumulate in fp32 and are rounded once at the end.
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  // Rank `root`'s values into t on every rank.
  virtual std::unique_ptr<Work> broadcast_async(const Tensor& t, int root) = 0;
  // out: [world_size, in.shape...] (or any contiguous tensor of world_size * in.numel()
  // elements), rank r's input at row r.
  virtual std::unique_ptr<Work> all_gather_async(const Tensor& in, const Tensor& out) = 0;

  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) { all_reduce_async(t, op)->wait(); }
  void broadcast(const Tensor& t, int root = 0) { broadcast_async(t, root)->wait(); }
  void all_gather(const Tensor& in, const Tensor& out) { all_gather_async(in, out)->wait(); }
  // A new [world_size, in.shape...] tensor of every rank's `in`.
  Tensor all_gather(const Tensor& in);
};

// A Work that is already complete (stream-ordered engines, empty tensors).
class DoneWork final : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace mantissa::dist
