// The index geometry of index_select, gather and scatter_add, written once for the CPU kernels
// (core/cpu/index.cpp) and the CUDA ones (cuda/index.cu). Every tensor is contiguous and split
// around `dim`:
//   index_select: in [outer, n, inner], index [k], out [outer, k, inner];
//                 out[o, j, i] = in[o, index[j], i]
//   gather:       in [outer, n, data_inner], index and out [outer, k, inner];
//                 out[o, j, i] = in[o, index[o, j, i], i]
//   scatter_add:  out [outer, n, data_inner], index and src [outer, k, inner];
//                 out[o, index[o, j, i], i] += src[o, j, i]
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"  // MT_HOST_DEVICE
#include "core/tensor.h"

namespace mantissa::math {

struct IndexGeometry {
  int64_t outer = 1, n = 1, k = 1, inner = 1, data_inner = 1;

  // The data element that index value v picks for (o, ., i).
  MT_HOST_DEVICE int64_t data_offset(int64_t o, int64_t v, int64_t i) const { return (o * n + v) * data_inner + i; }
  // The same for the flat position p of an [outer, k, inner] tensor, and p's j.
  MT_HOST_DEVICE int64_t data_offset_at(int64_t p, int64_t v) const {
    return data_offset(p / (inner * k), v, p % inner);
  }
  MT_HOST_DEVICE int64_t j_at(int64_t p) const { return p / inner % k; }
};

// The product of t's sizes over dims [begin, end).
inline int64_t size_product(const Tensor& t, int64_t begin, int64_t end) {
  int64_t p = 1;
  for (int64_t d = begin; d < end; ++d) p *= t.size(d);
  return p;
}

inline IndexGeometry index_select_geometry(const Tensor& in, int64_t dim, const Tensor& index) {
  const int64_t inner = size_product(in, dim + 1, in.dim());
  return {.outer = size_product(in, 0, dim),
          .n = in.dim() ? in.size(dim) : 1,
          .k = index.numel(),
          .inner = inner,
          .data_inner = inner};
}

// gather (data: its input) and scatter_add (data: its output).
inline IndexGeometry gather_geometry(const Tensor& data, int64_t dim, const Tensor& index) {
  return {.outer = size_product(index, 0, dim),
          .n = data.size(dim),
          .k = index.size(dim),
          .inner = size_product(index, dim + 1, index.dim()),
          .data_inner = size_product(data, dim + 1, data.dim())};
}

}  // namespace mantissa::math
