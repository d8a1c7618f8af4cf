// The oneDNN path of the CPU's heavy kernels (matmul, conv2d forward and backward).
//
// Each entry returns true when it computed the result, false when the caller must run its
// Eigen path: oneDNN was not found at build time, MANTISSA_CPU_ISA=eigen, the dtype is not one
// oneDNN runs faster here (see use_onednn), or oneDNN has no implementation for the shape.
// Reduced floats accumulate in fp32 and are rounded once, bias included (the epilogue adds it
// to the fp32 accumulator), as on the Eigen path.
#pragma once
#include <string>

#include "core/nn_kernels.h"
#include "core/tensor.h"

namespace mantissa::cpu::onednn {

enum class OpKind { Matmul, Conv };

// Whether `op` in dtype `t` goes to oneDNN. MANTISSA_CPU_ISA (read once) decides:
//   eigen   never (the Eigen path, as when oneDNN is not built in);
//   onednn  every dtype oneDNN implements on this CPU (fp32; bf16 from AVX-512 on);
//   auto    (unset) fp32, and bf16 where the CPU has bf16 dot products (AVX512-BF16 or AMX:
//           oneDNN picks at run time); elsewhere bf16 stays on Eigen's widen-compute-round.
// DNNL_MAX_CPU_ISA caps what oneDNN may use (and so what "auto" sees).
bool use_onednn(OpKind op, DType t);

// "oneDNN 2.6.3 (isa avx512_core_bf16), MANTISSA_CPU_ISA=auto" or why it is off.
std::string describe();

// The calling thread's primitive-cache lookups (one cache per kernel and thread, keyed by
// shape): entries made (a primitive created, or found unsupported) and hits. Tests use them to
// check that a call really went through oneDNN; both stay 0 without oneDNN.
struct CacheCounts {
  int64_t made = 0, hits = 0;
};
CacheCounts thread_cache_counts();

// a: [B, M, K], b: [B, K, N] (backend matmul contract: unit stride in one of the last two
// dims, batch stride 0 for a broadcast operand); bias: [N] or undefined; out: contiguous
// [B, M, N] = a @ b + bias.
bool matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);

// The conv2d entries of the nn kernel table (core/nn_kernels.h contracts).
bool conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g);
bool conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dGeometry& g);

// Whether oneDNN computes conv2d's weight gradient for geometry g in dtype t with a direct
// vector kernel rather than a GEMM per (sample, group) or its reference loops (oneDNN 2.x's
// depthwise weight gradient beyond 3 x 3: 50 ms where a direct kernel takes 4).
bool has_direct_weight_grad(DType t, const Conv2dGeometry& g);

}  // namespace mantissa::cpu::onednn
