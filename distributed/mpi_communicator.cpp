#include "distributed/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <functional>
#include <limits>
#include <thread>

#include "autograd/grad_mode.h"
#include "autograd/tensor_methods.h"
#include "core/error.h"

namespace mantissa::dist {

struct MpiCommunicator::State {
  MPI_Comm comm = MPI_COMM_NULL;
  double timeout_s = 300;
  bool broken = false;
  int rank = 0;
};

namespace {

void check_mpi(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  MT_FAIL(op, call, " failed: ", std::string(msg, size_t(len)));
}

MPI_Datatype mpi_dtype(DType t) {
  switch (t) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Float16:
    case DType::BFloat16:
      return MPI_UINT16_T;  // moved as bits; never summed as such
    case DType::Int64:
      return MPI_INT64_T;
    case DType::Int32:
      return MPI_INT32_T;
    case DType::UInt8:
    case DType::Bool:
      return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

void check_cpu_contiguous(const Tensor& t, const char* op) {
  MT_CHECK(t.defined(), op, "undefined tensor");
  MT_CHECK(t.numel() <= std::numeric_limits<int>::max(), op,
           "tensors of more than 2^31 - 1 elements are not supported, got ", t.shape_str());
  MT_CHECK(t.device().is_cpu(), op, "the MPI communicator takes CPU tensors, got one on ", t.device().str(),
           " (use the NCCL communicator for CUDA tensors)");
  MT_CHECK(t.is_contiguous(), op, "expected a contiguous tensor, got shape ", t.shape_str(),
           " with non-contiguous strides");
}

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<MpiCommunicator::State> state, std::string what, std::function<void()> finish = {})
      : state_(std::move(state)), what_(std::move(what)), finish_(std::move(finish)) {}
  MPI_Request* request() { return &req_; }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), what_.c_str(), "MPI_Test");
    if (flag) complete();
    return done_;
  }

  void wait() override {
    if (done_) return;
    MT_CHECK(!state_->broken, what_, "the communicator is broken by an earlier timeout");
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline = start + std::chrono::duration<double>(state_->timeout_s);
    // Spin briefly (the common case: the peers are right behind), then back off so an
    // oversubscribed core goes to the peer we are waiting for.
    for (int polls = 0; !test(); ++polls) {
      if (polls < 1000) {
        std::this_thread::yield();
        continue;
      }
      if (clock::now() > deadline) {
        state_->broken = true;
        MT_FAIL(what_, "rank ", state_->rank, " waited ", state_->timeout_s,
                " s for the other ranks without completing: a rank died, hangs, or issued different collectives "
                "(timeout: dist::InitOptions::timeout_s or MANTISSA_DIST_TIMEOUT)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  void complete() {
    done_ = true;
    if (finish_) finish_();
  }
  std::shared_ptr<MpiCommunicator::State> state_;
  std::string what_;
  std::function<void()> finish_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

std::string describe(const char* op, const Tensor& t) {
  return detail::concat("dist::", op, " (", dtype_name(t.dtype()), " ", t.shape_str(), ")");
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    default:
      return "sum";
  }
}

MpiCommunicator::MpiCommunicator(double timeout_s) : state_(std::make_shared<State>()) {
  MT_CHECK(timeout_s > 0, "dist::MpiCommunicator", "timeout must be positive, got ", timeout_s);
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm), "dist::MpiCommunicator", "MPI_Comm_dup");
  // Errors come back as codes (turned into mantissa::Error) instead of aborting the job.
  MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(state_->comm, &rank_);
  MPI_Comm_size(state_->comm, &world_size_);
  state_->timeout_s = timeout_s;
  state_->rank = rank_;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && state_->comm != MPI_COMM_NULL && !state_->broken) MPI_Comm_free(&state_->comm);
}

double MpiCommunicator::timeout_s() const { return state_->timeout_s; }
bool MpiCommunicator::broken() const { return state_->broken; }

void MpiCommunicator::barrier() {
  MpiWork work(state_, "dist::barrier");
  check_mpi(MPI_Ibarrier(state_->comm, work.request()), "dist::barrier", "MPI_Ibarrier");
  work.wait();
}

std::unique_ptr<Work> MpiCommunicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_cpu_contiguous(t, "dist::all_reduce");
  MT_CHECK(t.dtype() != DType::Bool, "dist::all_reduce", "bool tensors cannot be reduced");
  if (is_reduced_float(t.dtype())) {
    // No 16-bit float sum in MPI: reduce an fp32 copy, round into t once at the end.
    Tensor wide;
    {
      NoGradGuard no_grad;
      wide = t.to(DType::Float32).contiguous();
    }
    Tensor target = t;
    auto work = std::make_unique<MpiWork>(state_, describe("all_reduce", t), [wide, target]() mutable {
      NoGradGuard no_grad;
      target.copy_(wide);
    });
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, wide.raw_data(), int(wide.numel()), MPI_FLOAT, mpi_op(op), state_->comm,
                             work->request()),
              "dist::all_reduce", "MPI_Iallreduce");
    return work;
  }
  auto work = std::make_unique<MpiWork>(state_, describe("all_reduce", t));
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), int(t.numel()), mpi_dtype(t.dtype()), mpi_op(op), state_->comm,
                           work->request()),
            "dist::all_reduce", "MPI_Iallreduce");
  return work;
}

std::unique_ptr<Work> MpiCommunicator::broadcast_async(const Tensor& t, int root) {
  check_cpu_contiguous(t, "dist::broadcast");
  MT_CHECK(root >= 0 && root < world_size_, "dist::broadcast", "root ", root, " is not a rank of a world of ",
           world_size_);
  auto work = std::make_unique<MpiWork>(state_, describe("broadcast", t));
  check_mpi(MPI_Ibcast(t.raw_data(), int(t.numel()), mpi_dtype(t.dtype()), root, state_->comm, work->request()),
            "dist::broadcast", "MPI_Ibcast");
  return work;
}

std::unique_ptr<Work> MpiCommunicator::all_gather_async(const Tensor& in, const Tensor& out) {
  check_cpu_contiguous(in, "dist::all_gather");
  check_cpu_contiguous(out, "dist::all_gather");
  MT_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * world_size_, "dist::all_gather",
           "output must hold ", world_size_, " x ", in.numel(), " elements of ", dtype_name(in.dtype()), ", got ",
           dtype_name(out.dtype()), " ", out.shape_str());
  auto work = std::make_unique<MpiWork>(state_, describe("all_gather", in));
  const MPI_Datatype dt = mpi_dtype(in.dtype());
  check_mpi(MPI_Iallgather(in.raw_data(), int(in.numel()), dt, out.raw_data(), int(in.numel()), dt, state_->comm,
                           work->request()),
            "dist::all_gather", "MPI_Iallgather");
  return work;
}

Tensor Communicator::all_gather(const Tensor& in) {
  Shape shape = in.sizes();
  shape.insert(shape.begin(), world_size());
  Tensor out = make_tensor(shape, in.dtype(), in.device());
  all_gather(in.contiguous(), out);
  return out;
}

}  // namespace mantissa::dist
