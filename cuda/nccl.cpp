// NCCL wrappers for dist/'s GPU communicator (see cuda/nccl.h).
#ifdef MANTISSA_WITH_NCCL
#include "cuda/nccl.h"

#include <nccl.h>

#include <cstring>

#include "cuda/device.h"

namespace mantissa::cuda::nccl {

namespace {

#define MT_NCCL_CHECK(op, expr)                                                                  \
  do {                                                                                           \
    ncclResult_t mt_nccl_res_ = (expr);                                                          \
    if (mt_nccl_res_ != ncclSuccess) MT_FAIL(op, #expr, ": ", ncclGetErrorString(mt_nccl_res_)); \
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

std::unique_ptr<Comm> Comm::create(const std::string& id, int rank, int world_size, int device) {
  MT_CHECK(id.size() == kUniqueIdBytes, "nccl::Comm::create", "the unique id must be ", kUniqueIdBytes, " bytes, got ",
           id.size());
  check_device_index(device, "nccl::Comm::create");
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.data(), sizeof(uid.internal));
  std::unique_ptr<Comm> c(new Comm());
  c->device_ = device;
  DeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  MT_NCCL_CHECK("nccl::Comm::create", ncclCommInitRank(&comm, world_size, uid, rank));
  c->comm_ = comm;
  return c;
}

Comm::~Comm() {
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

void Comm::all_reduce(const Tensor& t, Op op) {
  check_tensor(t, device_, "nccl::all_reduce");
  DeviceGuard guard(device_);
  MT_NCCL_CHECK("nccl::all_reduce",
                ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype(), "nccl::all_reduce"),
                              nccl_op(op), static_cast<ncclComm_t>(comm_), current_stream(device_)));
}

void Comm::broadcast(const Tensor& t, int root) {
  check_tensor(t, device_, "nccl::broadcast");
  DeviceGuard guard(device_);
  MT_NCCL_CHECK("nccl::broadcast",
                ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype(), "nccl::broadcast"),
                              root, static_cast<ncclComm_t>(comm_), current_stream(device_)));
}

void Comm::all_gather(const Tensor& in, const Tensor& out) {
  check_tensor(in, device_, "nccl::all_gather");
  check_tensor(out, device_, "nccl::all_gather");
  MT_CHECK(in.dtype() == out.dtype(), "nccl::all_gather", "input dtype ", dtype_name(in.dtype()),
           " differs from output dtype ", dtype_name(out.dtype()));
  DeviceGuard guard(device_);
  MT_NCCL_CHECK("nccl::all_gather", ncclAllGather(in.raw_data(), out.raw_data(), size_t(in.numel()),
                                                  nccl_dtype(in.dtype(), "nccl::all_gather"),
                                                  static_cast<ncclComm_t>(comm_), current_stream(device_)));
}

}  // namespace mantissa::cuda::nccl
#endif  // MANTISSA_WITH_NCCL
