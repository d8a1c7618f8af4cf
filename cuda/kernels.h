// The CUDA row of the dispatch table (contracts in core/backend.h). Plain C++: the
// launchers behind these declarations live in the .cu files of cuda/.
#pragma once
#include "core/backend.h"

namespace mantissa::cuda {
// Any direction: host->device, device->host, device->device (same or another GPU).
void copy(const Tensor& src, const Tensor& dst);
// Waits for the current stream of `device` (counted, core/host_sync.h).
void sync_stream(int device);
// src and dst on the same GPU; converts dtype, broadcasts src, any strides.
void copy_same_device(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, const Scalar& value);
void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void reduce(ReduceOp op, const Tensor& in, const Tensor& out);
void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction);
void softmax(const Tensor& in, const Tensor& out, bool log);
void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);
void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out);
void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void accumulate_grad(const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf);
// cuda/amp_step.cu
void fused_optimizer_step(const FusedStepArgs& args);
void update_scale(const Tensor& scale, const Tensor& counters, const Tensor& found_inf, const math::ScaleUpdate& rule);
void dropout_mask(const Tensor& out, double p, uint64_t seed);
}  // namespace mantissa::cuda
