// Shape, stride and broadcasting arithmetic shared by every op.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mantissa {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[2, 3]"
// The product of the sizes. Throws mantissa::Error naming `op` when the product, or the
// largest contiguous stride (zero sizes counted as 1), would overflow int64.
int64_t shape_numel(const Shape& s, const char* op = "shape");
// shape_numel for a shape a user or a file gave: also rejects negative sizes.
int64_t checked_numel(const Shape& s, const char* op);
// Row-major strides; throws naming `op` on int64 overflow (as shape_numel).
Shape contiguous_strides(const Shape& sizes, const char* op = "shape");
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The broadcast of two shapes (NumPy rules); throws naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sorted, wrapped, de-duplicated reduction dims; empty input means all dims.
std::vector<int64_t> reduction_dims(const Shape& dims, int64_t ndim, const char* op);
// Strides that view a tensor of (sizes, strides) as broadcast to `target` (0 for broadcast dims).
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);

// Whether a layout's elements fill shape_numel(sizes) consecutive slots from its first element
// in some order of its dims (a transpose or permute of a contiguous tensor: positive strides,
// no gaps, no broadcast; size-1 dims ignored).
bool is_permuted_dense(const Shape& sizes, const Shape& strides);

}  // namespace mantissa
