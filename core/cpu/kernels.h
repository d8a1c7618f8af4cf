// The CPU row of the dispatch table (contracts in core/backend.h, declarations generated from
// its kernel list).
#pragma once
#include "core/backend.h"

namespace mantissa::cpu {
MT_BACKEND_KERNELS(MT_BACKEND_DECLARATION)
}  // namespace mantissa::cpu
