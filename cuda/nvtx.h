// A tiny RAII NVTX range for code inside cuda/ (as in llm.c). Header-only NVTX 3: with no
// profiler attached, each call is a check of an injection pointer.
#pragma once
#include <nvtx3/nvToolsExt.h>

namespace mantissa::cuda {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace mantissa::cuda

#define MT_NVTX_CONCAT_(a, b) a##b
#define MT_NVTX_CONCAT(a, b) MT_NVTX_CONCAT_(a, b)
// MT_NVTX_RANGE("matmul"): a range covering the rest of the enclosing scope.
#define MT_NVTX_RANGE(name) ::mantissa::cuda::NvtxRange MT_NVTX_CONCAT(mt_nvtx_range_, __LINE__)(name)
