// The GPU column reduction's launch plan (core/column_plan.h), the host half of cuda/reduce.cu's
// reduce_columns_kernel, against a brute-force walk of the kernel's index arithmetic: every
// (outer, column, element) is combined exactly once, by pass 1 alone or by pass 1 into
// [outer, chunks, cols] partial states that pass 2 combines; grid dimensions stay in CUDA's
// limits. The walk follows the kernel line by line (block, thread, grid-stride over outer).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "core/column_plan.h"

namespace cr = mantissa::column_reduce;

namespace {

void check_limits(const cr::ColumnPlan& p, int64_t outer, int64_t cols, int64_t n) {
  EXPECT_GE(p.chunks, 1);
  EXPECT_GE(p.chunk, 1);
  EXPECT_EQ(p.grid_y, p.chunks);
  EXPECT_GE(p.chunks * p.chunk, n);              // the chunks cover n
  EXPECT_LT((p.chunks - 1) * p.chunk, n);        // and none is empty
  EXPECT_GE(p.grid_x * cr::kColumnWidth, cols);  // the column blocks cover the columns
  EXPECT_LT((p.grid_x - 1) * cr::kColumnWidth, cols);
  EXPECT_LE(p.grid_x, int64_t(INT32_MAX));
  EXPECT_LE(p.grid_y, cr::kMaxGridYZ);
  EXPECT_LE(p.grid_z, cr::kMaxGridYZ);
  EXPECT_GE(p.grid_z, 1);
  EXPECT_LE(p.grid_z, outer);
}

// The kernel's walk: returns, per output slot written by pass 1, the (o, c, i) it combined.
// Slot = (o * grid_y + chunk) * cols + c, as reduce_columns_kernel's dst index.
std::map<int64_t, std::vector<std::tuple<int64_t, int64_t, int64_t>>> walk(const cr::ColumnPlan& p, int64_t outer,
                                                                           int64_t cols, int64_t n) {
  std::map<int64_t, std::vector<std::tuple<int64_t, int64_t, int64_t>>> slots;
  for (int64_t bx = 0; bx < p.grid_x; ++bx)
    for (int64_t by = 0; by < p.grid_y; ++by)
      for (int64_t bz = 0; bz < p.grid_z; ++bz)
        for (int64_t o = bz; o < outer; o += p.grid_z)
          for (int64_t tx = 0; tx < cr::kColumnWidth; ++tx) {
            const int64_t c = bx * cr::kColumnWidth + tx;
            if (c >= cols) continue;
            int64_t begin = 0, end = 0;
            cr::column_chunk_range(p, by, n, begin, end);
            auto& slot = slots[(o * p.grid_y + by) * cols + c];
            for (int64_t ty = 0; ty < cr::kColumnDepth; ++ty)
              for (int64_t i = begin + ty; i < end; i += cr::kColumnDepth) slot.emplace_back(o, c, i);
          }
  return slots;
}

// Both passes: every (o, c) output gets each of its n elements exactly once.
void check_coverage(int64_t outer, int64_t cols, int64_t n, int64_t wanted) {
  SCOPED_TRACE(testing::Message() << "outer " << outer << " cols " << cols << " n " << n << " wanted " << wanted);
  const cr::ColumnPlan p = cr::plan_columns(outer, cols, n, wanted);
  check_limits(p, outer, cols, n);
  const auto pass1 = walk(p, outer, cols, n);
  std::vector<std::vector<int>> seen(size_t(outer * cols), std::vector<int>(size_t(n), 0));
  if (p.chunks == 1) {
    ASSERT_EQ(int64_t(pass1.size()), outer * cols);
    for (const auto& [slot, items] : pass1)
      for (const auto& [o, c, i] : items) {
        ASSERT_EQ(slot, o * cols + c);  // the output index
        ++seen[size_t(slot)][size_t(i)];
      }
  } else {
    // Pass 2 reads partial (o, chunk j, c) for j < chunks and writes o * cols + c.
    const cr::ColumnPlan p2 = cr::plan_columns(outer, cols, p.chunks, 0);
    check_limits(p2, outer, cols, p.chunks);
    ASSERT_EQ(p2.chunks, 1);
    const auto pass2 = walk(p2, outer, cols, p.chunks);
    ASSERT_EQ(int64_t(pass2.size()), outer * cols);
    for (const auto& [slot, items] : pass2)
      for (const auto& [o, c, j] : items) {
        ASSERT_EQ(slot, o * cols + c);
        auto it = pass1.find((o * p.chunks + j) * cols + c);
        ASSERT_NE(it, pass1.end());
        for (const auto& [o1, c1, i] : it->second) {
          ASSERT_EQ(o1, o);
          ASSERT_EQ(c1, c);
          ++seen[size_t(slot)][size_t(i)];
        }
      }
  }
  for (const auto& row : seen)
    for (int k : row) ASSERT_EQ(k, 1);
}

}  // namespace

TEST(ColumnPlan, EveryElementOnceSmallShapes) {
  for (int64_t outer : {1, 2, 3})
    for (int64_t cols : {2, 31, 32, 33, 70})
      for (int64_t n : {2, 7, 255, 256, 257, 1000, 3000})
        for (int64_t wanted : {0, 1, 16, 528}) check_coverage(outer, cols, n, wanted);
}

TEST(ColumnPlan, EveryElementOnceRandomShapes) {
  std::mt19937_64 rng(5);
  for (int k = 0; k < 60; ++k) {
    const int64_t outer = 1 + int64_t(rng() % 5), cols = 2 + int64_t(rng() % 90), n = 2 + int64_t(rng() % 5000);
    check_coverage(outer, cols, n, int64_t(rng() % 1200));
  }
}

// A bias gradient of a large batch: few columns, long n -> n is split to fill the device.
TEST(ColumnPlan, LongColumnsAreSplitToFillTheDevice) {
  const cr::ColumnPlan p = cr::plan_columns(1, 768, 16384, 4 * 132);
  check_limits(p, 1, 768, 16384);
  EXPECT_EQ(p.grid_x, 24);
  EXPECT_GT(p.chunks, 1);
  EXPECT_GE(p.grid_x * p.chunks, 4 * 132);
  EXPECT_GE(p.chunk, cr::kMinChunk);
  // Enough blocks already: one chunk.
  EXPECT_EQ(cr::plan_columns(64, 4096, 512, 4 * 132).chunks, 1);
}

// Limits at sizes that cannot be walked: outer beyond the grid's z limit, n beyond 2^31.
TEST(ColumnPlan, GridLimitsAtHugeSizes) {
  for (auto [outer, cols, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {100000, 2, 3}, {1, 2, int64_t(1) << 34}, {70000, 1 << 20, 4}, {1, int64_t(1) << 31, 2}, {3, 2, 1 << 30}})
    for (int64_t wanted : {0, 528, 1 << 20}) {
      SCOPED_TRACE(testing::Message() << outer << " " << cols << " " << n << " " << wanted);
      check_limits(cr::plan_columns(outer, cols, n, wanted), outer, cols, n);
    }
}
