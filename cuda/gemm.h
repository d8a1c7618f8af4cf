// Batched GEMM on raw device buffers for cuda/'s own compositions (attention through score
// matrices), with an output type that may differ from the inputs' (bf16 inputs, fp32
// scores). The row-major to column-major mapping is core/gemm_args.h's (tested on the CPU).
#pragma once
#include <library_types.h>

#include "core/dtype.h"
#include "core/gemm_args.h"

namespace mantissa::cuda {

// CUDA_R_32F / 16F / 16BF for Float32 / Float16 / BFloat16 (others throw, naming op).
cudaDataType_t gemm_type(DType t, const char* op);

// g on the buffers a, b, c (their offsets in elements of each buffer's type); fp32
// accumulation (CUBLAS_COMPUTE_32F; TF32 for fp32 inputs only after set_allow_tf32(true)), on
// the current stream of `device`. Dimensions must fit in int (core/attention_plan.h checks).
void gemm_batched(int device, const RowMajorGemm& g, const void* a, cudaDataType_t a_type, const void* b,
                  cudaDataType_t b_type, void* c, cudaDataType_t c_type);

}  // namespace mantissa::cuda
