// NCCL wrappers for distributed/'s GPU communicator (see cuda/nccl.h).
#ifdef MANTISSA_WITH_NCCL
#include "cuda/nccl.h"

#include <nccl.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "cuda/device.h"

namespace mantissa::cuda::nccl {

namespace {

#define MT_NCCL_CHECK(op, expr)                                        \
  do {                                                                 \
    ncclResult_t mt_nccl_res_ = (expr);                                \
    if (mt_nccl_res_ != ncclSuccess && mt_nccl_res_ != ncclInProgress) \
      MT_FAIL(op, #expr, ": ", ncclGetErrorString(mt_nccl_res_));      \
  } while (0)

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes);

ncclDataType_t nccl_dtype(DType t, const char* op) {
  switch (t) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
    case DType::Int64:
      return ncclInt64;
    case DType::Int32:
      return ncclInt32;
    case DType::UInt8:
      return ncclUint8;
    default:
      MT_FAIL(op, "dtype ", dtype_name(t), " is not supported by NCCL");
  }
}

ncclRedOp_t nccl_op(Op op) {
  switch (op) {
    case Op::Max:
      return ncclMax;
    case Op::Min:
      return ncclMin;
    default:
      return ncclSum;
  }
}

using Clock = std::chrono::steady_clock;

void check_tensor(const Tensor& t, int device, const char* op) {
  MT_CHECK(t.defined() && t.device().is_cuda() && t.device().index == device && t.is_contiguous(), op,
           "expected a contiguous tensor on cuda:", device, ", got ", t.defined() ? t.device().str() : "undefined",
           t.defined() ? " " + t.shape_str() : "");
}

}  // namespace

std::string unique_id() {
  ncclUniqueId id;
  MT_NCCL_CHECK("nccl::unique_id", ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

// One queued collective: its completion event and when it was queued.
struct Comm::Pending {
  struct Item {
    cudaEvent_t done;
    Clock::time_point queued;
    const char* what;
  };
  std::deque<Item> items;
};

std::unique_ptr<Comm> Comm::create(const std::string& id, int rank, int world_size, int device, double timeout_s) {
  MT_CHECK(id.size() == kUniqueIdBytes, "nccl::Comm::create", "the unique id must be ", kUniqueIdBytes, " bytes, got ",
           id.size());
  MT_CHECK(timeout_s > 0, "nccl::Comm::create", "timeout must be positive, got ", timeout_s);
  check_device_index(device, "nccl::Comm::create");
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.data(), sizeof(uid.internal));
  std::unique_ptr<Comm> c(new Comm());
  c->device_ = device;
  c->rank_ = rank;
  c->timeout_s_ = timeout_s;
  c->pending_ = std::make_unique<Pending>();
  DeviceGuard guard(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once (ncclInProgress); progress is polled below
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, world_size, uid, rank, &config);
  c->comm_ = comm;
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) c->fail("init", ncclGetErrorString(r));
    MT_FAIL("dist", "rank ", rank, ": NCCL init failed: ", ncclGetErrorString(r));
  }
  c->wait_ready("init");
  return c;
}

Comm::~Comm() {
  if (comm_ == nullptr) return;
  auto* comm = static_cast<ncclComm_t>(comm_);
  // Flush what is queued, bounded by the timeout; abort rather than hang in a destructor.
  const ncclResult_t fin = ncclCommFinalize(comm);
  bool clean = fin == ncclSuccess || fin == ncclInProgress;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    ncclResult_t st = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &st) != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
      clean = false;
      break;
    }
    if (st == ncclSuccess) break;
    if (Clock::now() > deadline) {
      clean = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (clean)
    (void)ncclCommDestroy(comm);
  else
    (void)ncclCommAbort(comm);
  for (const Pending::Item& it : pending_->items) (void)cudaEventDestroy(it.done);
}

void Comm::fail(const char* what, const std::string& why) {
  if (comm_ != nullptr) (void)ncclCommAbort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
  broken_ = true;
  for (const Pending::Item& it : pending_->items) (void)cudaEventDestroy(it.done);
  pending_->items.clear();
  (void)cudaGetLastError();
  MT_FAIL("dist", "rank ", rank_, ": NCCL ", what, " on cuda:", device_, " ", why,
          "; the communicator was aborted (timeout: dist::InitOptions::timeout_s or MANTISSA_DIST_TIMEOUT)");
}

void Comm::wait_ready(const char* what) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    ncclResult_t st = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &st);
    if (q != ncclSuccess) fail(what, std::string("failed: ") + ncclGetErrorString(q));
    if (st == ncclSuccess) return;
    if (st != ncclInProgress) fail(what, std::string("failed: ") + ncclGetErrorString(st));
    if (Clock::now() > deadline) fail(what, "did not start within " + std::to_string(timeout_s_) + " s");
    std::this_thread::yield();
  }
}

void Comm::queued(const char* what) {
  wait_ready(what);
  cudaEvent_t ev = nullptr;
  MT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  MT_CUDA_CHECK(cudaEventRecord(ev, current_stream(device_)));
  pending_->items.push_back({ev, Clock::now(), what});
  (void)poll();  // retire finished ones; fail on an old one
}

bool Comm::poll() {
  MT_CHECK(!broken_, "dist", "rank ", rank_, ": the NCCL communicator was aborted by an earlier error or timeout");
  ncclResult_t st = ncclSuccess;
  const ncclResult_t q = ncclCommGetAsyncError(static_cast<ncclComm_t>(comm_), &st);
  if (q != ncclSuccess) fail("collective", std::string("failed: ") + ncclGetErrorString(q));
  if (st != ncclSuccess && st != ncclInProgress) fail("collective", std::string("failed: ") + ncclGetErrorString(st));
  auto& items = pending_->items;
  while (!items.empty()) {
    const Pending::Item& it = items.front();
    const cudaError_t e = cudaEventQuery(it.done);
    if (e == cudaSuccess) {
      (void)cudaEventDestroy(it.done);
      items.pop_front();
      continue;
    }
    if (e != cudaErrorNotReady) fail(it.what, std::string("failed on the device: ") + cudaGetErrorString(e));
    (void)cudaGetLastError();
    const double age = std::chrono::duration<double>(Clock::now() - it.queued).count();
    if (age > timeout_s_)
      fail(it.what, "did not complete within " + std::to_string(timeout_s_) +
                        " s (a rank died, stopped participating or issued a different collective)");
    return false;
  }
  return true;
}

void Comm::wait_all() {
  while (!poll()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void Comm::all_reduce(const Tensor& t, Op op) {
  check_tensor(t, device_, "nccl::all_reduce");
  MT_CHECK(!broken_, "dist", "rank ", rank_, ": the NCCL communicator was aborted by an earlier error or timeout");
  DeviceGuard guard(device_);
  MT_NCCL_CHECK("nccl::all_reduce",
                ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype(), "nccl::all_reduce"),
                              nccl_op(op), static_cast<ncclComm_t>(comm_), current_stream(device_)));
  queued("all_reduce");
}

void Comm::broadcast(const Tensor& t, int root) {
  check_tensor(t, device_, "nccl::broadcast");
  MT_CHECK(!broken_, "dist", "rank ", rank_, ": the NCCL communicator was aborted by an earlier error or timeout");
  DeviceGuard guard(device_);
  MT_NCCL_CHECK("nccl::broadcast",
                ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype(), "nccl::broadcast"),
                              root, static_cast<ncclComm_t>(comm_), current_stream(device_)));
  queued("broadcast");
}

void Comm::all_gather(const Tensor& in, const Tensor& out) {
  check_tensor(in, device_, "nccl::all_gather");
  check_tensor(out, device_, "nccl::all_gather");
  MT_CHECK(in.dtype() == out.dtype(), "nccl::all_gather", "input dtype ", dtype_name(in.dtype()),
           " differs from output dtype ", dtype_name(out.dtype()));
  MT_CHECK(!broken_, "dist", "rank ", rank_, ": the NCCL communicator was aborted by an earlier error or timeout");
  DeviceGuard guard(device_);
  MT_NCCL_CHECK("nccl::all_gather", ncclAllGather(in.raw_data(), out.raw_data(), size_t(in.numel()),
                                                  nccl_dtype(in.dtype(), "nccl::all_gather"),
                                                  static_cast<ncclComm_t>(comm_), current_stream(device_)));
  queued("all_gather");
}

}  // namespace mantissa::cuda::nccl
#endif  // MANTISSA_WITH_NCCL
