#include "distributed/checkpoint.h"

#include "core/error.h"
#include "distributed/dist.h"

namespace mantissa::dist {

void save_checkpoint(const std::string& path, const optim::Checkpoint& parts, const optim::CheckpointInfo& info) {
  std::string error;
  if (rank() == 0) {
    try {
      optim::save_checkpoint(path, parts, info);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  // Rank 0's outcome for everyone: the message length, then its bytes.
  Tensor len = full({1}, double(error.size()), {.dtype = DType::Int64});
  broadcast(len, 0);
  const int64_t n = len.item<int64_t>();
  if (n == 0) return;
  Tensor msg = zeros({n}, {.dtype = DType::UInt8});
  if (rank() == 0) std::copy(error.begin(), error.end(), msg.data_ptr<char>());
  broadcast(msg, 0);
  MT_FAIL("dist::save_checkpoint", "rank 0 could not write '", path,
          "': ", std::string(msg.data_ptr<char>(), size_t(n)));
}

}  // namespace mantissa::dist
