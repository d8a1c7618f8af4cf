// NCCL collectives on CUDA tensors, in plain C++ (no CUDA headers): dist/ builds its GPU
// communicator on these. Without NCCL (MANTISSA_WITH_NCCL undefined) every function is an
// inline fallback that throws, so callers need no #ifdefs.
//
//   std::string id = rank == 0 ? mt::cuda::nccl::unique_id() : "";   // then broadcast id (MPI)
//   auto comm = mt::cuda::nccl::Comm::create(id, rank, world, /*device=*/rank % ngpus);
//   comm->all_reduce(grad, mt::cuda::nccl::Op::Sum);                 // in place, stream-ordered
//
// Every call is queued on the device's current stream (cuda/device.h), like a kernel: it
// is ordered after the work that produced the tensor and before the work that reads it.
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
  // Collective: every rank of the group calls it with the same id.
  static std::unique_ptr<Comm> create(const std::string& id, int rank, int world_size, int device);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int device() const { return device_; }
  // Contiguous tensors on this communicator's device; fp16/bf16 are summed natively.
  void all_reduce(const Tensor& t, Op op);
  void broadcast(const Tensor& t, int root);
  // out holds world_size copies of in's shape, rank-major.
  void all_gather(const Tensor& in, const Tensor& out);

 private:
  Comm() = default;
  void* comm_ = nullptr;  // ncclComm_t
  int device_ = 0;
};
#else
inline constexpr bool kAvailable = false;
inline std::string unique_id() { MT_FAIL("nccl", "mantissa was built without NCCL (needs the CUDA backend and NCCL)"); }
class Comm {
 public:
  static std::unique_ptr<Comm> create(const std::string&, int, int, int) {
    MT_FAIL("nccl", "mantissa was built without NCCL (needs the CUDA backend and NCCL)");
  }
  int device() const { return 0; }
  void all_reduce(const Tensor&, Op) {}
  void broadcast(const Tensor&, int) {}
  void all_gather(const Tensor&, const Tensor&) {}
};
#endif

}  // namespace mantissa::cuda::nccl
