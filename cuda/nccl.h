// NCCL collectives on CUDA tensors, in plain C++ (no CUDA headers): distributed/ builds its GPU
// communicator on these. Without NCCL (MANTISSA_WITH_NCCL undefined) every function is an
// inline fallback that throws, so callers need no #ifdefs.
//
//   std::string id = rank == 0 ? mt::cuda::nccl::unique_id() : "";   // then broadcast id (MPI)
//   auto comm = mt::cuda::nccl::Comm::create(id, rank, world, /*device=*/rank % ngpus);
//   comm->all_reduce(grad, mt::cuda::nccl::Op::Sum);                 // in place, stream-ordered
//
// Every call is queued on the device's current stream (cuda/device.h), like a kernel: it
// is ordered after the work that produced the tensor and before the work that reads it.
//
// Never hangs forever in a call of its own: the communicator is non-blocking (NCCL's
// blocking = 0), every collective records an event, and every call (and poll()/wait_all())
// checks NCCL's asynchronous error and the age of the oldest unfinished collective against
// the timeout; past it, or on an error, the communicator is aborted (ncclCommAbort) and
// mantissa::Error names the rank and the collective. A host synchronisation elsewhere (a
// .item() behind a hung collective) still blocks inside CUDA: the deadline is enforced by the
// communicator's own calls only.
#pragma once
#include <memory>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace mantissa::cuda::nccl {

enum class Op { Sum, Max, Min };

// Bytes of an ncclUniqueId (the bootstrap token rank 0 creates and every rank receives).
constexpr size_t kUniqueIdBytes = 128;

#ifdef MANTISSA_WITH_NCCL
inline constexpr bool kAvailable = true;
std::string unique_id();

class Comm {
 public:
  // Collective: every rank of the group calls it with the same id; gives up after timeout_s.
  static std::unique_ptr<Comm> create(const std::string& id, int rank, int world_size, int device,
                                      double timeout_s = 300);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int device() const { return device_; }
  int rank() const { return rank_; }
  double timeout_s() const { return timeout_s_; }
  // Contiguous tensors on this communicator's device; fp16/bf16 are summed natively (in 16
  // bits: dist::NcclCommunicator widens them to fp32 first).
  void all_reduce(const Tensor& t, Op op);
  void broadcast(const Tensor& t, int root);
  // out holds world_size copies of in's shape, rank-major.
  void all_gather(const Tensor& in, const Tensor& out);
  // True when every collective queued so far has completed; never blocks. Throws (after
  // aborting) on an NCCL error or a collective older than the timeout.
  bool poll();
  // Polls until every collective queued so far has completed (a host wait for them).
  void wait_all();

 private:
  struct Pending;
  Comm() = default;
  [[noreturn]] void fail(const char* what, const std::string& why);
  void wait_ready(const char* what);  // the non-blocking call's own progress
  void queued(const char* what);      // records the collective's completion event
  void* comm_ = nullptr;              // ncclComm_t
  int device_ = 0, rank_ = 0;
  double timeout_s_ = 300;
  bool broken_ = false;
  std::unique_ptr<Pending> pending_;  // the unfinished collectives (cuda/nccl.cpp)
};
#else
inline constexpr bool kAvailable = false;
inline std::string unique_id() { MT_FAIL("nccl", "mantissa was built without NCCL (needs the CUDA backend and NCCL)"); }
class Comm {
 public:
  static std::unique_ptr<Comm> create(const std::string&, int, int, int, double = 300) {
    MT_FAIL("nccl", "mantissa was built without NCCL (needs the CUDA backend and NCCL)");
  }
  int device() const { return 0; }
  int rank() const { return 0; }
  double timeout_s() const { return 0; }
  bool poll() { return true; }
  void wait_all() {}
  void all_reduce(const Tensor&, Op) {}
  void broadcast(const Tensor&, int) {}
  void all_gather(const Tensor&, const Tensor&) {}
};
#endif

}  // namespace mantissa::cuda::nccl
