// The CPU row of the dispatch table (contracts in core/backend.h, declarations generated from
// its kernel list).
#pragma once
#include "core/backend.h"

namespace mantissa::cpu {
MT_BACKEND_KERNELS(MT_BACKEND_DECLARATION)

// Whether these kernels were compiled with AVX-512 (MANTISSA_NATIVE on such a CPU). The tests are
// compiled for the baseline CPU, so their own __AVX512F__ says nothing about the library's;
// assertions that hold for the AVX-512 vector forms only ask this.
bool kernels_use_avx512();
}  // namespace mantissa::cpu
