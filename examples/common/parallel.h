// Data parallelism for the examples (--distributed, under `mpirun -np N`), compiled in when
// mantissa::dist was built (Open MPI found; the example defines MANTISSA_EXAMPLE_DIST). Without
// --distributed everything is a no-op.
#pragma once
#include <mantissa.h>

#include <cstdio>
#include <memory>
#include <string>

#ifdef MANTISSA_EXAMPLE_DIST
#include "distributed/checkpoint.h"
#include "distributed/dist.h"
#endif

namespace examples {

class Parallel {
 public:
  explicit Parallel(bool on) : on_(on) {
    if (!on) return;
#ifdef MANTISSA_EXAMPLE_DIST
    mantissa::dist::init();
    rank = mantissa::dist::rank();
    world = mantissa::dist::world_size();
#else
    MT_FAIL("--distributed", "this build has no distributed/ (install libopenmpi-dev and openmpi-bin, then rebuild)");
#endif
  }
  int rank = 0, world = 1;

  // This rank's shard of the training set, reshuffled each epoch (null: the loader shuffles).
  std::shared_ptr<const mantissa::data::Sampler> sampler(int64_t n, uint64_t seed) const {
    if (!on_) return nullptr;
    return std::make_shared<mantissa::data::DistributedSampler>(
        n, rank, world, mantissa::data::DistributedSamplerOptions{.seed = seed});
  }

  // The model to call forward on: `net` itself, or net wrapped in DistributedDataParallel.
  mantissa::nn::Module& wrap(mantissa::nn::Module& net) {
#ifdef MANTISSA_EXAMPLE_DIST
    if (on_) {
      ddp_ = std::make_unique<mantissa::nn::DistributedDataParallel>(net);
      return *ddp_;
    }
#endif
    return net;
  }

  void save(const std::string& path, const mantissa::optim::Checkpoint& parts,
            const mantissa::optim::CheckpointInfo& info) {
#ifdef MANTISSA_EXAMPLE_DIST
    if (on_) return mantissa::dist::save_checkpoint(path, parts, info);  // rank 0 writes
#endif
    mantissa::optim::save_checkpoint(path, parts, info);
  }

  // " world=2 comm_wait=..s" for the final line (empty when not distributed).
  std::string summary() const {
#ifdef MANTISSA_EXAMPLE_DIST
    if (ddp_) {
      const auto& s = ddp_->stats();
      char buf[160];
      std::snprintf(buf, sizeof buf, " world=%d comm_wait=%.2fs comm_pack=%.2fs comm_MB=%.1f", world, s.wait_seconds,
                    s.pack_seconds, s.bytes / 1e6);
      return buf;
    }
#endif
    return "";
  }

 private:
  bool on_;
#ifdef MANTISSA_EXAMPLE_DIST
  std::unique_ptr<mantissa::nn::DistributedDataParallel> ddp_;
#endif
};

}  // namespace examples
