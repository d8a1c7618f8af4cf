// The process group: MPI initialisation, the world communicators, finalisation at exit.
#include "distributed/dist.h"

#include <mpi.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "distributed/mpi_communicator.h"
#include "distributed/nccl_communicator.h"

namespace mantissa::dist {

namespace {

struct World {
  std::unique_ptr<MpiCommunicator> mpi;
  std::map<int, std::unique_ptr<NcclCommunicator>> nccl;  // by CUDA device index
  int local_rank = 0;
  bool we_initialized_mpi = false;
};
World* g_world = nullptr;

World& world() {
  MT_CHECK(g_world != nullptr, "dist", "not initialized: call mantissa::dist::init() first (and start with mpirun)");
  return *g_world;
}

double timeout_from(const InitOptions& o) {
  if (o.timeout_s > 0) return o.timeout_s;
  if (const char* env = std::getenv("MANTISSA_DIST_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    MT_CHECK(end != env && *end == '\0' && v > 0, "dist::init",
             "MANTISSA_DIST_TIMEOUT must be a positive number of seconds, got '", env, "'");
    return v;
  }
  return 300;
}

// A launcher's RANK / WORLD_SIZE (torchrun-style) must describe the same job as MPI's.
void check_env(const char* name, int mpi_value) {
  const char* env = std::getenv(name);
  if (!env || !*env) return;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  MT_CHECK(*end == '\0', "dist::init", name, "='", env, "' is not an integer");
  MT_CHECK(v == mpi_value, "dist::init", "mismatched ", name, ": the environment says ", env, " but MPI says ",
           mpi_value, " (start every process with the same mpirun -np, or unset ", name, ")");
}

void finalize_at_exit() { finalize(); }

}  // namespace

void init(const InitOptions& options) {
  if (g_world) return;
  const double timeout = timeout_from(options);
  int initialized = 0;
  MPI_Initialized(&initialized);
  auto w = std::make_unique<World>();
  if (!initialized) {
    int provided = 0;
    // Only the training thread calls MPI (the DataLoader worker never does).
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    w->we_initialized_mpi = true;
  }
  w->mpi = std::make_unique<MpiCommunicator>(timeout);
  check_env("WORLD_SIZE", w->mpi->world_size());
  check_env("RANK", w->mpi->rank());
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->mpi->rank(), MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &w->local_rank);
  MPI_Comm_free(&local);
  g_world = w.release();
  std::atexit(finalize_at_exit);
}

bool is_initialized() { return g_world != nullptr; }

void finalize() {
  if (!g_world) return;
  World* w = g_world;
  g_world = nullptr;
  w->nccl.clear();
  const bool broken = w->mpi->broken();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (broken && !finalized) {
    // A collective timed out: the peers may be blocked in it forever. Take the job down.
    std::cerr << "mantissa::dist: a collective timed out on rank " << w->mpi->rank() << "; aborting the job\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const bool ours = w->we_initialized_mpi;
  w->mpi.reset();
  delete w;
  if (ours && !finalized) MPI_Finalize();
}

int rank() { return world().mpi->rank(); }
int world_size() { return world().mpi->world_size(); }
int local_rank() { return world().local_rank; }
void barrier() { world().mpi->barrier(); }

Communicator& communicator(Device device) {
  World& w = world();
  if (device.is_cpu()) return *w.mpi;
  MT_CHECK(device.is_cuda(), "dist::communicator", "no communicator for device ", device.str());
  MT_CHECK(cuda::nccl::kAvailable, "dist::communicator", "tensors on ", device.str(),
           " need NCCL, and mantissa was built without it (CUDA backend with NCCL)");
  auto& slot = w.nccl[device.index];
  if (!slot) slot = std::make_unique<NcclCommunicator>(*w.mpi, device.index, w.mpi->timeout_s());
  return *slot;
}

void all_reduce(const Tensor& t, ReduceOp op) { communicator(t.device()).all_reduce(t, op); }
void broadcast(const Tensor& t, int root) { communicator(t.device()).broadcast(t, root); }
Tensor all_gather(const Tensor& t) { return communicator(t.device()).all_gather(t); }

}  // namespace mantissa::dist
