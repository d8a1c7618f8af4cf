// CPU index_select, gather and scatter_add. Index tensors are int64 and validated by
// the op before launch, so these loops never see an out-of-range index.
#include <cstring>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/index_math.h"

namespace mantissa::cpu {

namespace {
// Outer slices per thread: small tensors stay on one thread (a fork per tiny gather made
// gradcheck-sized workloads 100x slower on a loaded machine).
int64_t outer_grain(int64_t per_outer) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_outer, 1));
}
}  // namespace

// Shapes and formulas: core/index_math.h.
void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  const math::IndexGeometry g = math::index_select_geometry(in, dim, index);
  const int64_t outer = g.outer, k = g.k, inner = g.inner;
  const size_t es = element_size(in.dtype());
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  // The source rows come in the index's order (an embedding's token ids: random rows of a table
  // larger than L2), which no hardware prefetcher predicts; each row's first loads waited on the
  // cache. Rows of 256 bytes or more fetch the row kAhead on (its first 4 KiB) ahead: one
  // thread, GB/s, fp32 1M 58 -> 70, 4M 48 -> 55; bf16 1M 64 -> 71 (best of 6 rounds, Zen 5).
  constexpr int64_t kAhead = 4;
  const int64_t row_bytes = inner * int64_t(es), fetched = row_bytes >= 256 ? std::min<int64_t>(row_bytes, 4096) : 0;
  auto source_row = [&](int64_t r) { return src + size_t(g.data_offset(r / k, idx[r % k], 0)) * es; };
  parallel_for(0, outer * k, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   if (fetched && r + kAhead < e) {
                     const char* next = source_row(r + kAhead);
                     for (int64_t l = 0; l < fetched; l += 64) __builtin_prefetch(next + l);
                   }
                   std::memcpy(dst + size_t(r * inner) * es, source_row(r), size_t(row_bytes));
                 }
               });
}

void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  const math::IndexGeometry g = math::gather_geometry(in, dim, index);
  const int64_t outer = g.outer, k = g.k, inner = g.inner;
  dispatch_all(in.dtype(), [&]<typename T>() {
    const T* x = static_cast<const T*>(in.raw_data());
    const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
    T* y = static_cast<T*>(out.raw_data());
    parallel_for(0, outer, outer_grain(k * inner), [&](int64_t b, int64_t e) {
      if (inner == 1) {  // along the last dim: row o's picks, y[o][j] = x[o][idx[o][j]]
        for (int64_t o = b; o < e; ++o) {
          const T* xr = x + g.data_offset(o, 0, 0);
          const int64_t* ir = idx + o * k;
          T* yr = y + o * k;
          for (int64_t j = 0; j < k; ++j) yr[j] = xr[ir[j]];
        }
        return;
      }
      for (int64_t o = b; o < e; ++o)
        for (int64_t j = 0; j < k; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            int64_t pos = (o * k + j) * inner + i;
            y[pos] = x[g.data_offset(o, idx[pos], i)];
          }
    });
  });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const math::IndexGeometry g = math::gather_geometry(out, dim, index);
  const int64_t outer = g.outer, k = g.k, inner = g.inner;
  dispatch_all(out.dtype(), [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
    T* y = static_cast<T*>(out.raw_data());
    const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
    const T* s = static_cast<const T*>(src.raw_data());
    // Threads own disjoint outer slices, so no two write the same element.
    parallel_for(0, outer, outer_grain(k * inner), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (int64_t j = 0; j < k; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            int64_t pos = (o * k + j) * inner + i;
            T& dst = y[g.data_offset(o, idx[pos], i)];
            dst = cast_to<T>(cast_to<Acc>(dst) + cast_to<Acc>(s[pos]));
          }
    });
  });
}

}  // namespace mantissa::cpu
