#include "distributed/nccl_communicator.h"

#include <cstring>

#include "autograd/tensor_methods.h"
#include "core/backend.h"

namespace mantissa::dist {

namespace {
// Stream-ordered: nothing to wait for on the host, but every test()/wait() checks the
// communicator's errors and deadline.
class NcclWork final : public Work {
 public:
  explicit NcclWork(cuda::nccl::Comm& comm) : comm_(comm) {}
  bool test() override { return comm_.poll(); }
  void wait() override { (void)comm_.poll(); }

 private:
  cuda::nccl::Comm& comm_;
};

cuda::nccl::Op nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return cuda::nccl::Op::Max;
    case ReduceOp::Min:
      return cuda::nccl::Op::Min;
    default:
      return cuda::nccl::Op::Sum;
  }
}
}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, double timeout_s)
    : rank_(bootstrap.rank()), world_size_(bootstrap.world_size()) {
  // The 128-byte id travels as uint8 through the bootstrap (MPI) communicator.
  Tensor id = zeros({int64_t(cuda::nccl::kUniqueIdBytes)}, {.dtype = DType::UInt8});
  if (rank_ == 0) {
    const std::string bytes = cuda::nccl::unique_id();
    std::memcpy(id.raw_data(), bytes.data(), bytes.size());
  }
  bootstrap.broadcast(id, 0);
  comm_ = cuda::nccl::Comm::create(std::string(static_cast<const char*>(id.raw_data()), cuda::nccl::kUniqueIdBytes),
                                   rank_, world_size_, device, timeout_s);
}

void NcclCommunicator::barrier() {
  // A one-element all-reduce, then wait for it: every rank reached this point.
  Tensor token = zeros({1}, {.dtype = DType::Float32, .device = Device::cuda(comm_->device())});
  comm_->all_reduce(token, cuda::nccl::Op::Sum);
  comm_->wait_all();  // polled against the deadline, not a blocking synchronisation
}

std::unique_ptr<Work> NcclCommunicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  if (op == ReduceOp::Sum && is_reduced_float(t.dtype()) && t.numel() > 0) {
    // NCCL would add in 16 bits: sum an fp32 copy and round once into t (all stream-ordered).
    Tensor wide = t.to(DType::Float32);
    comm_->all_reduce(wide, cuda::nccl::Op::Sum);
    backend_for(t.device()).copy(wide, t);
  } else {
    comm_->all_reduce(t, nccl_op(op));
  }
  return std::make_unique<NcclWork>(*comm_);
}

std::unique_ptr<Work> NcclCommunicator::broadcast_async(const Tensor& t, int root) {
  MT_CHECK(root >= 0 && root < world_size_, "dist::broadcast", "root ", root, " is not a rank of a world of ",
           world_size_);
  comm_->broadcast(t, root);
  return std::make_unique<NcclWork>(*comm_);
}

std::unique_ptr<Work> NcclCommunicator::all_gather_async(const Tensor& in, const Tensor& out) {
  MT_CHECK(out.numel() == in.numel() * world_size_, "dist::all_gather", "output must hold ", world_size_, " x ",
           in.numel(), " elements, got ", out.shape_str());
  comm_->all_gather(in, out);
  return std::make_unique<NcclWork>(*comm_);
}

}  // namespace mantissa::dist
