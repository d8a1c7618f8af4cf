// Non-differentiable building blocks used by the op definitions: they check devices,
// allocate outputs and call the dispatch table. Ops with autograd live in autograd/ops*.
#pragma once
#include <vector>

#include "core/backend.h"

namespace mantissa::launch {

// Throws naming `op` unless every defined tensor is on the same device.
void check_same_device(const char* op, std::initializer_list<Tensor> ts);
// A contiguous tensor with the same values (the input itself when already contiguous).
Tensor contiguous(const Tensor& x);
// A contiguous tensor converted to `dtype` (the input itself when nothing changes).
Tensor cast(const Tensor& x, DType dtype);
// A contiguous copy on `device`; unless non_blocking, an upload from pinned memory is waited
// for (Tensor::to).
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);
// x with `dtype` on `device`: x itself when it already is, else a contiguous converted copy.
Tensor convert(const Tensor& x, DType dtype, Device device);
Tensor unary(UnaryOp op, const Tensor& x, double a = 0, double b = 0);
Tensor unary_to(UnaryOp op, const Tensor& x, DType out_dtype, double a = 0, double b = 0);
// Converts a and b to `compute`, broadcasts, and returns out of `out_dtype`.
// s0, s1: the op's scalars, for a functor that takes them (math::make_functor).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, DType compute, DType out_dtype, double s0 = 0,
              double s1 = 0);
// Reduces `dims` (sorted, wrapped) of x; out dtype `out_dtype`. The kernel reads the column
// view below on every device (the CPU and CUDA reduce kernels take it), the rows otherwise;
// several runs of dims ({0, 2, 3} of [N, C, H, W]) of a sum of full-width values or of a
// max / min go a run at a time, the last first, each rows or columns (no transposing copy).
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype);
// x with `dims` moved to the end and made contiguous: a [outer, n] block for row kernels.
Tensor move_dims_last(const Tensor& x, const std::vector<int64_t>& dims, Shape& kept_sizes);
// What the var_mean kernel reads for x over dims (sorted): the [outer, n] rows of move_dims_last
// or, on the CPU where a run of reduced dims is followed by unit-stride kept dims, the
// [outer, cols, n] view with strides {so, 1, ld} (no copy; the kernels reduce the columns).
Tensor reduction_rows(const Tensor& x, const std::vector<int64_t>& dims);
// Shape of a reduction result.
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace mantissa::launch
