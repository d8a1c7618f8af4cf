// CPU reductions over the last axis of a contiguous [outer, n] view, or over the columns of
// launch::reduction_rows' [outer, cols, n] view with unit-stride columns (no transposing copy). Softmax is in
// core/cpu/softmax.cpp. Reduced floats accumulate in fp32, fp64 in fp64.
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace mantissa::cpu {

namespace {

// Sum of p[0, n) as Acc, in blocks so that fp32 rounding error grows with log(n) rather than n
// (the blocks are vectorized partial sums added in double). A plain pointer, not a load
// callback: through a callback GCC vectorized the loads as gathers (1.2 G elements/s).
template <typename Acc, typename T>
Acc row_sum(const T* p, int64_t n) {
  if constexpr (std::is_integral_v<Acc>) {  // integers: exact (wrapping) sum, no double
    Acc total = 0;
    for (int64_t i = 0; i < n; ++i) total += Acc(p[i]);
    return total;
  }
  constexpr int64_t kBlock = 1024;
  double total = 0;
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t e = std::min(n, s + kBlock);
    Acc part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t i = s; i < e; ++i) part += load_acc<Acc>(p, i);
    total += double(part);
  }
  return Acc(total);
}

// Sum of (p[i] - m)^2 over [0, n), blocked as row_sum.
template <typename Acc, typename T>
Acc row_squared_deviation(const T* p, int64_t n, Acc m) {
  constexpr int64_t kBlock = 1024;
  double total = 0;
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t e = std::min(n, s + kBlock);
    Acc part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t i = s; i < e; ++i) {
      const Acc d = load_acc<Acc>(p, i) - m;
      part += d * d;
    }
    total += double(part);
  }
  return Acc(total);
}

// The index of the max (min) of p[0, n), n >= 1: the first NaN if there is one, else the first
// occurrence of the extreme. A vectorized pass finds the extreme and whether a NaN is there; a
// short scalar scan then finds its first position (only when the index is wanted).
template <typename Acc, bool kMax, typename T>
int64_t row_extreme(const T* p, int64_t n, bool want_index, Acc& value) {
  Acc best = load_acc<Acc>(p, 0);
  int nan = 0;
  if constexpr (kMax) {
#pragma omp simd reduction(max : best) reduction(| : nan)
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      nan |= v != v;
      best = v > best ? v : best;
    }
  } else {
#pragma omp simd reduction(min : best) reduction(| : nan)
    for (int64_t i = 0; i < n; ++i) {
      const Acc v = load_acc<Acc>(p, i);
      nan |= v != v;
      best = v < best ? v : best;
    }
  }
  int64_t at = 0;
  if (nan) {
    while (load_acc<Acc>(p, at) == load_acc<Acc>(p, at)) ++at;
    value = load_acc<Acc>(p, at);
  } else {
    value = best;
    if (want_index)
      while (load_acc<Acc>(p, at) != best) ++at;
  }
  return at;
}

// in: [cols, n] with unit-stride columns (stride {1, ld}), cols <= 256; y[c] = sum_i in[c, i]:
// whole rows of the block added at a time (vectorized across the columns), in chunks of rows
// whose partial sums are added in double, as row_sum.
template <typename T, typename Acc>
void column_sum(const T* x, int64_t cols, int64_t n, int64_t ld, T* y) {
  constexpr int64_t kCols = 256, kRows = 256;
  const int64_t nc = std::min(kCols, cols);
  double total[kCols] = {};
  Acc part[kCols];
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    std::fill(part, part + nc, Acc(0));
    for (int64_t r = r0; r < std::min(n, r0 + kRows); ++r) {
      const T* row = x + r * ld;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) part[c] += load_acc<Acc>(row, c);
    }
    for (int64_t c = 0; c < nc; ++c) total[c] += double(part[c]);
  }
  for (int64_t c = 0; c < nc; ++c) store_acc(y, c, Acc(total[c]));
}

// in: [cols, n] with unit-stride columns (stride {1, ld}), cols <= 256; y[c] = the max (min)
// over i of in[c, i], or its first index (kIndex, int64 y), NaN winning as in the row scan. The
// running best of the block is updated a whole row at a time (vectorized: bitwise conditions,
// int32 row numbers while they fit, which keeps the lanes of values and indices equal).
template <typename T, typename Acc, bool kMax, bool kIndex, typename Index>
void column_extreme(const T* x, int64_t cols, int64_t n, int64_t ld, void* out) {
  constexpr int64_t kCols = 256;
  const int64_t nc = std::min(kCols, cols);
  Acc best[kCols];
  Index at[kCols] = {};
  for (int64_t c = 0; c < nc; ++c) best[c] = load_acc<Acc>(x, c);
  for (int64_t r = 1; r < n; ++r) {
    const T* row = x + r * ld;
    const Index ri = Index(r);
#pragma omp simd
    for (int64_t c = 0; c < nc; ++c) {
      const Acc v = load_acc<Acc>(row, c), b = best[c];
      const bool take = (b == b) & ((v != v) | (kMax ? v > b : v < b));
      best[c] = take ? v : b;
      if constexpr (kIndex) at[c] = take ? ri : at[c];
    }
  }
  for (int64_t c = 0; c < nc; ++c) {
    if constexpr (kIndex)
      static_cast<int64_t*>(out)[c] = int64_t(at[c]);
    else
      static_cast<T*>(out)[c] = cast_to<T>(best[c]);
  }
}

template <typename T, typename Acc, bool kMax>
void column_extreme(const T* x, int64_t cols, int64_t n, int64_t ld, bool want_index, void* out) {
  if (!want_index)
    column_extreme<T, Acc, kMax, false, int32_t>(x, cols, n, ld, out);
  else if (n <= INT32_MAX)
    column_extreme<T, Acc, kMax, true, int32_t>(x, cols, n, ld, out);
  else
    column_extreme<T, Acc, kMax, true, int64_t>(x, cols, n, ld, out);
}

// in: [cols, n] with unit-stride columns; y[c] = the product over i of in[c, i], in order.
template <typename T, typename Acc>
void column_prod(const T* x, int64_t cols, int64_t n, int64_t ld, T* y) {
  constexpr int64_t kCols = 256;
  for (int64_t c0 = 0; c0 < cols; c0 += kCols) {
    const int64_t nc = std::min(kCols, cols - c0);
    Acc acc[kCols];
    std::fill(acc, acc + nc, Acc(1));
    for (int64_t r = 0; r < n; ++r) {
      const T* row = x + r * ld + c0;
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) acc[c] *= cast_to<Acc>(row[c]);
    }
    for (int64_t c = 0; c < nc; ++c) y[c0 + c] = cast_to<T>(acc[c]);
  }
}

// The columns of launch::reduction_rows' [outer, cols, n] view (strides {so, 1, ld}): each of
// the outer slices is a [cols, n] column reduction; threads take (slice, block of columns).
template <typename Fn>
void for_column_blocks(const Tensor& in, Fn fn) {
  constexpr int64_t kCols = 256;
  const int64_t outer = in.size(0), cols = in.size(1), n = in.size(2);
  const int64_t blocks = (cols + kCols - 1) / kCols;
  parallel_for(0, outer * blocks, std::max<int64_t>(1, kParallelGrain / (kCols * n)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / blocks, c0 = (i % blocks) * kCols;
      // slice o, columns [c0, c0 + nc): input offset, output offset, count
      fn(o * in.stride(0) + c0, o * cols + c0, std::min(kCols, cols - c0));
    }
  });
}

void reduce_columns(ReduceOp op, const Tensor& in, const Tensor& out) {
  const int64_t n = in.size(2), ld = in.stride(2);
  dispatch_all(in.dtype(), [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, bool>, int64_t, acc_t<T>>;
    const T* x = static_cast<const T*>(in.raw_data());
    switch (op) {
      case ReduceOp::Sum:
        if constexpr (std::is_floating_point_v<Acc>) {
          for_column_blocks(in, [&](int64_t xo, int64_t yo, int64_t nc) {
            column_sum<T, Acc>(x + xo, nc, n, ld, static_cast<T*>(out.raw_data()) + yo);
          });
        } else {  // integers: an exact (wrapping) int64 sum, as the row form
          for_column_blocks(in, [&](int64_t xo, int64_t yo, int64_t nc) {
            int64_t* y = static_cast<int64_t*>(out.raw_data()) + yo;
            for (int64_t c = 0; c < nc; ++c) {
              uint64_t acc = 0;
              for (int64_t r = 0; r < n; ++r) acc += uint64_t(int64_t(x[xo + r * ld + c]));
              y[c] = int64_t(acc);
            }
          });
        }
        return;
      case ReduceOp::Prod:
        for_column_blocks(in, [&](int64_t xo, int64_t yo, int64_t nc) {
          column_prod<T, Acc>(x + xo, nc, n, ld, static_cast<T*>(out.raw_data()) + yo);
        });
        return;
      case ReduceOp::Max:
      case ReduceOp::Min:
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        const bool want_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
        const bool want_index = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
        const size_t elem = want_index ? sizeof(int64_t) : sizeof(T);
        for_column_blocks(in, [&](int64_t xo, int64_t yo, int64_t nc) {
          void* y = static_cast<char*>(out.raw_data()) + size_t(yo) * elem;
          if (want_max)
            column_extreme<T, Acc, true>(x + xo, nc, n, ld, want_index, y);
          else
            column_extreme<T, Acc, false>(x + xo, nc, n, ld, want_index, y);
        });
        return;
      }
    }
  });
}

// var_mean over the columns of the [outer, cols, n] view: per block of columns the mean (a
// column sum), then the sum of squared deviations from it, as the row form's two passes.
void var_mean_columns(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  const int64_t n = in.size(2), ld = in.stride(2);
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    using Acc = acc_t<T>;
    const T* x = static_cast<const T*>(in.raw_data());
    for_column_blocks(in, [&](int64_t xo, int64_t yo, int64_t nc) {
      constexpr int64_t kCols = 256, kRows = 256;
      double total[kCols] = {}, sq[kCols] = {};
      Acc part[kCols], m[kCols];
      const T* p = x + xo;
      for (int64_t pass = 0; pass < 2; ++pass) {
        for (int64_t r0 = 0; r0 < n; r0 += kRows) {
          std::fill(part, part + nc, Acc(0));
          for (int64_t r = r0; r < std::min(n, r0 + kRows); ++r) {
            const T* row = p + r * ld;
            if (pass == 0) {
#pragma omp simd
              for (int64_t c = 0; c < nc; ++c) part[c] += load_acc<Acc>(row, c);
            } else {
#pragma omp simd
              for (int64_t c = 0; c < nc; ++c) {
                const Acc d = load_acc<Acc>(row, c) - m[c];
                part[c] += d * d;
              }
            }
          }
          for (int64_t c = 0; c < nc; ++c) (pass == 0 ? total : sq)[c] += double(part[c]);
        }
        if (pass == 0)
          for (int64_t c = 0; c < nc; ++c) m[c] = Acc(total[c]) / Acc(n);
      }
      const int64_t dof = n - correction;
      for (int64_t c = 0; c < nc; ++c) {
        static_cast<T*>(mean.raw_data())[yo + c] = cast_to<T>(m[c]);
        static_cast<T*>(var.raw_data())[yo + c] =
            cast_to<T>(dof > 0 ? Acc(sq[c]) / Acc(dof) : std::numeric_limits<Acc>::quiet_NaN());
      }
    });
  });
}

}  // namespace

void reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
  if (in.dim() == 3 && in.stride(1) == 1) {  // columns (launch::reduction_rows' column view)
    reduce_columns(op, in, out);
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
            parts[c] = double(row_sum<SumAcc>(x + s, e - s));
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
                         y[r] = cast_to<Out>(row_sum<SumAcc>(p, n));
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
                         Acc value;
                         const int64_t at = want_max ? row_extreme<Acc, true>(row(r), n, want_index, value)
                                                     : row_extreme<Acc, false>(row(r), n, want_index, value);
                         if (want_index)
                           static_cast<int64_t*>(out.raw_data())[r] = at;
                         else
                           static_cast<T*>(out.raw_data())[r] = cast_to<T>(value);
                       }
                     });
        return;
      }
    }
  });
}

void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  if (in.dim() == 3 && in.stride(1) == 1) {  // columns (launch::reduction_rows' column view)
    var_mean_columns(in, var, mean, correction);
    return;
  }
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
        const Acc m = row_sum<Acc>(p, n) / Acc(n);
        const Acc ss = row_squared_deviation<Acc>(p, n, m);
        int64_t dof = n - correction;
        pm[r] = cast_to<T>(m);
        pv[r] = cast_to<T>(dof > 0 ? ss / Acc(dof) : std::numeric_limits<Acc>::quiet_NaN());
      }
    });
  });
}

}  // namespace mantissa::cpu
