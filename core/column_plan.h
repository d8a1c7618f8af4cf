// Launch planning of the GPU column reduction (cuda/reduce.cu), in plain C++ so the CPU tests
// can check it without a GPU.
//
// The input is launch::reduce's column view [outer, cols, n] (strides {so, 1, ld}: a bias
// gradient is outer 1, cols N, n M), the output one value per (outer, column). A block of
// kColumnWidth x kColumnDepth threads owns kColumnWidth adjacent columns (adjacent threads
// read adjacent addresses) of one outer index and one chunk of n, each of its kColumnDepth
// thread rows walking every kColumnDepth-th element of the chunk. When few (outer, column)
// blocks cannot fill the GPU, n is cut into several chunks and a second launch combines
// their partial states ([outer, chunks, cols]) with chunks = 1.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/dtype_dispatch.h"  // MT_HOST_DEVICE

namespace mantissa::column_reduce {

constexpr int kColumnWidth = 32;    // threadIdx.x: columns
constexpr int kColumnDepth = 8;     // threadIdx.y: rows of the chunk
constexpr int64_t kMinChunk = 256;  // at least 32 elements per thread row before n is split
constexpr int64_t kMaxGridYZ = 65535;

struct ColumnPlan {
  int64_t chunks = 1, chunk = 0;  // n = chunks pieces of `chunk` (the last may be shorter)
  int64_t grid_x = 0;             // column blocks: ceil(cols / kColumnWidth)
  int64_t grid_y = 1;             // = chunks
  int64_t grid_z = 1;             // outer indices per launch wave (the kernel strides by it)
};

// Elements [begin, end) of n that chunk y covers.
MT_HOST_DEVICE void column_chunk_range(const ColumnPlan& p, int64_t y, int64_t n, int64_t& begin, int64_t& end) {
  begin = y * p.chunk;
  end = begin + p.chunk < n ? begin + p.chunk : n;
}

// `blocks_wanted`: enough blocks to fill the device (4 per SM). n >= 1, cols >= 1, outer >= 1.
inline ColumnPlan plan_columns(int64_t outer, int64_t cols, int64_t n, int64_t blocks_wanted) {
  ColumnPlan p;
  p.grid_x = (cols + kColumnWidth - 1) / kColumnWidth;
  p.grid_z = std::min(outer, kMaxGridYZ);
  const int64_t have = p.grid_x * p.grid_z;
  const int64_t max_chunks = std::max<int64_t>(1, n / kMinChunk);
  p.chunks = std::clamp<int64_t>((blocks_wanted + have - 1) / have, 1, std::min(max_chunks, kMaxGridYZ));
  p.chunk = (n + p.chunks - 1) / p.chunks;
  p.chunks = (n + p.chunk - 1) / p.chunk;  // no empty chunk
  p.grid_y = p.chunks;
  return p;
}

}  // namespace mantissa::column_reduce
