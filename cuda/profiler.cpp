// The NVTX hooks behind core/profiler.h (declared in core/profiler.cpp, which installs
// them). Header-only NVTX 3: with no profiler attached, each call checks an injection
// pointer and returns.
#include "cuda/nvtx.h"

namespace mantissa {

void cuda_nvtx_push(const char* name) { nvtxRangePushA(name); }
void cuda_nvtx_pop() { nvtxRangePop(); }

}  // namespace mantissa
