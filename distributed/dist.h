// Data-parallel training across processes: the process group, collectives on tensors,
// DistributedDataParallel and rank-0 checkpoints. Link mantissa::dist (built when Open MPI
// is found) and start the program with mpirun:
//
//   mpirun -np 2 ./train
//
//   mt::dist::init();                                  // MPI_Init; reads mpirun's environment
//   mt::nn::DistributedDataParallel ddp(net);          // broadcasts rank 0's weights
//   mt::data::DistributedSampler shard(n, mt::dist::rank(), mt::dist::world_size(), {.seed = 1});
//   ... scaler.backward(loss) all-reduces the gradients in buckets while backward runs ...
//   mt::dist::save_checkpoint("run.safetensors", parts); // rank 0 writes, the others wait
//
// CPU tensors go through Open MPI, CUDA tensors through NCCL (created on first use, the
// unique id broadcast through MPI; each process uses GPU local_rank % device count).
#pragma once
#include "distributed/communicator.h"
#include "distributed/ddp.h"

namespace mantissa::dist {

struct InitOptions {
  // Seconds a collective may wait for the other ranks before throwing mantissa::Error.
  // 0: the environment variable MANTISSA_DIST_TIMEOUT, else 300.
  double timeout_s = 0;
};

// Joins the job started by mpirun (a plain start is a world of one). Calls MPI_Init unless
// the program already did. If RANK / WORLD_SIZE are set (torchrun-style launchers), they
// must agree with MPI's, else mantissa::Error names both. Finalizes at exit; after a
// timeout it aborts the whole job instead (the other ranks may be stuck).
void init(const InitOptions& options = {});
bool is_initialized();
// Collective: every rank calls it. Safe to call twice; init() registers it to run at exit.
void finalize();

int rank();
int world_size();
int local_rank();  // rank among the processes of this host (chooses the GPU)
void barrier();

// The communicator for tensors on `device`: MPI for the CPU, NCCL for CUDA.
Communicator& communicator(Device device = Device::cpu());

// Collectives on the world, picked by the tensor's device (contiguous tensors, in place).
void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
void broadcast(const Tensor& t, int root = 0);
Tensor all_gather(const Tensor& t);  // [world_size, t.shape...]

}  // namespace mantissa::dist
