// CPU reductions over the last axis of a contiguous [outer, n] view (sums also over the
// columns of a view with unit-stride columns). Softmax is in core/cpu/softmax.cpp.
// Reduced floats accumulate in fp32, fp64 in fp64.
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace mantissa::cpu {

namespace {

// Sum of n values read through `load`, in blocks so that fp32 rounding error grows with
// log(n) rather than n (the blocks are vectorized partial sums added in double).
template <typename Acc, typename Load>
Acc blocked_sum(int64_t n, Load load) {
  if constexpr (std::is_integral_v<Acc>) {  // integers: exact (wrapping) sum, no double
    Acc total = 0;
    for (int64_t i = 0; i < n; ++i) total += load(i);
    return total;
  }
  constexpr int64_t kBlock = 1024;
  double total = 0;
  for (int64_t s = 0; s < n; s += kBlock) {
    int64_t e = std::min(n, s + kBlock);
    Acc part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t i = s; i < e; ++i) part += load(i);
    total += double(part);
  }
  return Acc(total);
}

// in: [outer, n] with unit-stride columns (stride {1, ld}); y[c] = sum_i in[c, i]. Threads
// take blocks of columns and add whole rows of a block at a time (vectorized across the
// columns), in chunks of rows whose fp32 partial sums are added in double, as blocked_sum.
template <typename T, typename Acc>
void column_sum(const T* x, int64_t outer, int64_t n, int64_t ld, T* y) {
  constexpr int64_t kCols = 256, kRows = 256;
  parallel_for(0, (outer + kCols - 1) / kCols, std::max<int64_t>(1, kParallelGrain / (kCols * n)),
               [&](int64_t b, int64_t e) {
                 for (int64_t blk = b; blk < e; ++blk) {
                   const int64_t c0 = blk * kCols, nc = std::min(kCols, outer - c0);
                   double total[kCols] = {};
                   Acc part[kCols];
                   for (int64_t r0 = 0; r0 < n; r0 += kRows) {
                     std::fill(part, part + nc, Acc(0));
                     for (int64_t r = r0; r < std::min(n, r0 + kRows); ++r) {
                       const T* row = x + r * ld + c0;
#pragma omp simd
                       for (int64_t c = 0; c < nc; ++c) part[c] += load_acc<Acc>(row, c);
                     }
                     for (int64_t c = 0; c < nc; ++c) total[c] += double(part[c]);
                   }
                   for (int64_t c = 0; c < nc; ++c) store_acc(y + c0, c, Acc(total[c]));
                 }
               });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
  if (in.dim() == 2 && in.stride(1) != 1 && in.stride(0) == 1) {  // columns (launch::reduce's column view)
    MT_CHECK(op == ReduceOp::Sum && is_floating(in.dtype()), "reduce", "a strided [outer, n] input is summed only");
    dispatch_floating(in.dtype(), "sum", [&]<typename T>() {
      column_sum<T, acc_t<T>>(in.data_ptr<T>(), in.size(0), in.size(1), in.stride(1), out.data_ptr<T>());
    });
    return;
  }
  const int64_t n = in.dim() ? in.size(-1) : 1;
  const int64_t outer = n ? in.numel() / n : out.numel();
  dispatch_all(in.dtype(), [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
    const T* x = static_cast<const T*>(in.raw_data());
    auto row = [&](int64_t r) { return x + r * n; };
    switch (op) {
      case ReduceOp::Sum: {
        using Out =
            std::conditional_t<std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> || std::is_same_v<T, int32_t>,
                               int64_t, T>;  // torch.sum of ints gives int64
        // Integers accumulate in uint64 (torch sums them in int64, wrapping; uint64 wraps
        // without undefined behaviour), floats as before.
        using SumAcc = std::conditional_t<std::is_integral_v<Out>, uint64_t, Acc>;
        Out* y = static_cast<Out*>(out.raw_data());
        if (std::is_floating_point_v<SumAcc> && outer == 1 && n > kParallelGrain) {  // one long row: split it
          std::vector<double> parts(64, 0.0);
          int64_t nchunks = std::min<int64_t>(64, (n + kParallelGrain - 1) / kParallelGrain);
          int64_t chunk = (n + nchunks - 1) / nchunks;
#pragma omp parallel for
          for (int64_t c = 0; c < nchunks; ++c) {
            int64_t s = c * chunk, e = std::min(n, s + chunk);
            parts[c] = double(blocked_sum<SumAcc>(e - s, [&](int64_t i) { return load_acc<SumAcc>(x, s + i); }));
          }
          double total = 0;
          for (double p : parts) total += p;
          y[0] = cast_to<Out>(SumAcc(total));
          return;
        }
        parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t r = b; r < e; ++r) {
                         const T* p = row(r);
                         y[r] = cast_to<Out>(blocked_sum<SumAcc>(n, [&](int64_t i) { return load_acc<SumAcc>(p, i); }));
                       }
                     });
        return;
      }
      case ReduceOp::Prod: {
        T* y = static_cast<T*>(out.raw_data());
        for (int64_t r = 0; r < outer; ++r) {
          Acc acc = 1;
          for (int64_t i = 0; i < n; ++i) acc *= cast_to<Acc>(row(r)[i]);
          y[r] = cast_to<T>(acc);
        }
        return;
      }
      case ReduceOp::Max:
      case ReduceOp::Min:
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
        const bool want_index = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
        parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t r = b; r < e; ++r) {
                         const T* p = row(r);
                         int64_t best = 0;
                         Acc bv = cast_to<Acc>(p[0]);
                         for (int64_t i = 1; i < n && bv == bv; ++i) {  // NaN wins and stops the scan
                           Acc v = cast_to<Acc>(p[i]);
                           if (v != v || (want_max ? v > bv : v < bv)) {
                             bv = v;
                             best = i;
                           }
                         }
                         if (want_index)
                           static_cast<int64_t*>(out.raw_data())[r] = best;
                         else
                           static_cast<T*>(out.raw_data())[r] = p[best];
                       }
                     });
        return;
      }
    }
  });
}

void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  const int64_t n = in.dim() ? in.size(-1) : 1;
  const int64_t outer = n ? in.numel() / n : var.numel();
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using Acc = acc_t<T>;
    const T* x = static_cast<const T*>(in.raw_data());
    T* pv = static_cast<T*>(var.raw_data());
    T* pm = static_cast<T*>(mean.raw_data());
    parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* p = x + r * n;
        Acc m = blocked_sum<Acc>(n, [&](int64_t i) { return cast_to<Acc>(p[i]); }) / Acc(n);
        Acc ss = blocked_sum<Acc>(n, [&](int64_t i) {
          Acc d = cast_to<Acc>(p[i]) - m;
          return d * d;
        });
        int64_t dof = n - correction;
        pm[r] = cast_to<T>(m);
        pv[r] = cast_to<T>(dof > 0 ? ss / Acc(dof) : std::numeric_limits<Acc>::quiet_NaN());
      }
    });
  });
}

}  // namespace mantissa::cpu
