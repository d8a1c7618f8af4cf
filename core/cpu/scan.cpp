// CPU inclusive scans (cumsum, cumprod and their backward) along the middle dim of a contiguous
// [outer, n, inner] block. Each line accumulates in order, as PyTorch's CPU kernel does: fp32 in
// fp64, fp16 / bf16 in fp32 (one rounding per output), fp64 in fp64, int64 as wrapping uint64.
// A line is a chain of dependent adds, one per element, so a lone row runs at the add's latency
// (about 0.6 ns per element): rows (inner == 1) go kRows at a time through a widened buffer with
// their chains interleaved, and columns (inner > 1) a block of adjacent columns at a time,
// vectorized across them.
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace mantissa::cpu {

namespace {

constexpr int64_t kRows = 8;    // row chains interleaved per group
constexpr int64_t kCols = 256;  // adjacent columns per task when the scan runs along a non-last dim

template <typename T>
using scan_acc_t =
    std::conditional_t<std::is_integral_v<T>, uint64_t, std::conditional_t<std::is_same_v<T, float>, double, acc_t<T>>>;

template <typename T, bool kProduct>
struct ScanStep {
  using Acc = scan_acc_t<T>;
  static constexpr Acc identity() { return Acc(kProduct ? 1 : 0); }
  static Acc load(T v) { return Acc(cast_to<acc_t<T>>(v)); }
  static Acc combine(Acc a, Acc b) { return kProduct ? a * b : a + b; }
  static T out(Acc acc) {
    if constexpr (std::is_integral_v<T>)
      return T(acc);
    else
      return cast_to<T>(acc_t<T>(acc));
  }
};

// x, y: kR rows of n elements (row r at x + r * n); position i = s, or n - 1 - s when reverse.
//   y[r][i] = x[r][0] (+) .. (+) x[r][i]   (or x[r][i] (+) .. (+) x[r][n - 1])
// A chunk of every row is widened into a buffer (vector loads), scanned there with the rows'
// chains interleaved, and narrowed back row by row (vector stores). Scanned in place, the rows'
// 4 KiB strides (n = 1024 floats) put every row's line in one L1 set.
template <int64_t kR, typename T, bool kProduct>
void scan_rows(const T* x, T* y, int64_t n, bool reverse) {
  using S = ScanStep<T, kProduct>;
  using Acc = typename S::Acc;
  constexpr int64_t kChunk = 64;
  alignas(64) Acc acc[kR], buf[kR][kChunk];
  for (int64_t r = 0; r < kR; ++r) acc[r] = S::identity();
  for (int64_t s0 = 0; s0 < n; s0 += kChunk) {
    const int64_t len = std::min(kChunk, n - s0), p0 = reverse ? n - s0 - len : s0;
    for (int64_t r = 0; r < kR; ++r) {
      const T* xr = x + r * n + p0;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) buf[r][j] = S::load(xr[j]);
    }
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = reverse ? len - 1 - j : j;
#pragma GCC unroll 8
      for (int64_t r = 0; r < kR; ++r) buf[r][k] = acc[r] = S::combine(acc[r], buf[r][k]);
    }
    for (int64_t r = 0; r < kR; ++r) {
      T* yr = y + r * n + p0;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) yr[j] = S::out(buf[r][j]);
    }
  }
}

// x, y: [n, inner] starting at a block of nc <= kCols adjacent columns.
//   y[i][c] = x[0][c] (+) .. (+) x[i][c]   (or from the end)
template <typename T, bool kProduct>
void scan_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t nc, bool reverse) {
  using S = ScanStep<T, kProduct>;
  typename S::Acc acc[kCols];
  for (int64_t c = 0; c < nc; ++c) acc[c] = S::identity();
  for (int64_t s = 0; s < n; ++s) {
    const int64_t i = reverse ? n - 1 - s : s;
    const T* xr = x + i * inner;
    T* yr = y + i * inner;
#pragma omp simd
    for (int64_t c = 0; c < nc; ++c) {
      acc[c] = S::combine(acc[c], S::load(xr[c]));
      yr[c] = S::out(acc[c]);
    }
  }
}

template <typename T, bool kProduct>
void scan_typed(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  if (inner == 1) {
    const int64_t groups = (outer + kRows - 1) / kRows;
    parallel_for(0, groups, std::max<int64_t>(1, kParallelGrain / (kRows * n)), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        const int64_t r0 = g * kRows, rows = std::min(kRows, outer - r0);
        if (rows == kRows) {
          scan_rows<kRows, T, kProduct>(x + r0 * n, y + r0 * n, n, reverse);
          continue;
        }
        for (int64_t r = r0; r < r0 + rows; ++r) scan_rows<1, T, kProduct>(x + r * n, y + r * n, n, reverse);
      }
    });
    return;
  }
  const int64_t blocks = (inner + kCols - 1) / kCols;
  const int64_t per_task = n * std::min(inner, kCols);
  parallel_for(0, outer * blocks, std::max<int64_t>(1, kParallelGrain / per_task), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, c0 = (t - o * blocks) * kCols;
      const int64_t at = o * n * inner + c0;
      scan_columns<T, kProduct>(x + at, y + at, n, inner, std::min(kCols, inner - c0), reverse);
    }
  });
}

// cumprod's gradient over a block of nc <= kCols adjacent columns of [n, inner] (a row: inner
// = nc = 1), in double, as PyTorch defines it (core/backend.h): a forward pass finds each
// column's first zero z, keeps the outputs y_i before it (in gx), E_z = y_{z-1} and
// A = g_z + g_{z+1} x_{z+1} + g_{z+2} x_{z+1} x_{z+2} + ..; a backward pass writes
// (sum_{i <= k < z} g_k y_k) / x_i before z, E_z A at z, 0 after it.
template <typename T>
void cumprod_backward_row(const T* x, const T* g, T* gx, int64_t n) {
  auto load = [](T v) { return double(cast_to<acc_t<T>>(v)); };
  double y = 1, a = 0;  // y stops at y_{z-1} (E_z) once the first zero is met
  int64_t z = n, i = 0;
  for (; i < n; ++i) {
    const double xi = load(x[i]);
    if (xi == 0) break;
    y *= xi;
    gx[i] = cast_to<T>(y);
  }
  if (i < n) {
    z = i;
    a = load(g[z]);
    double p = 1;
    for (i = z + 1; i < n; ++i) {
      p *= load(x[i]);
      a += load(g[i]) * p;
      gx[i] = cast_to<T>(0.0);
    }
    gx[z] = cast_to<T>(y * a);
  }
  double s = 0;
  for (i = z - 1; i >= 0; --i) {
    s += load(g[i]) * load(gx[i]);
    gx[i] = cast_to<T>(s / load(x[i]));
  }
}

template <typename T>
void cumprod_backward_columns(const T* x, const T* g, T* gx, int64_t n, int64_t inner, int64_t nc) {
  if (inner == 1) return cumprod_backward_row(x, g, gx, n);  // the same, with the state in registers
  double y[kCols], e[kCols], a[kCols], p[kCols];
  int64_t z[kCols];
  for (int64_t c = 0; c < nc; ++c) y[c] = 1, e[c] = 0, a[c] = 0, p[c] = 1, z[c] = n;
  auto at = [inner](int64_t i, int64_t c) { return i * inner + c; };
  auto load = [](T v) { return double(cast_to<acc_t<T>>(v)); };
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < nc; ++c) {
      const double xi = load(x[at(i, c)]), gi = load(g[at(i, c)]);
      if (z[c] < n) {  // after the first zero: A's terms
        p[c] *= xi;
        a[c] += gi * p[c];
      } else if (xi == 0) {
        z[c] = i;
        e[c] = y[c];
        a[c] = gi;
      } else {
        y[c] *= xi;
        gx[at(i, c)] = cast_to<T>(y[c]);  // the output y_i, as the forward rounded it
      }
    }
  for (int64_t c = 0; c < nc; ++c) y[c] = 0;  // now the reverse sums of g_k y_k
  for (int64_t i = n - 1; i >= 0; --i)
    for (int64_t c = 0; c < nc; ++c) {
      double v = 0;
      if (i == z[c]) {
        v = e[c] * a[c];
      } else if (i < z[c]) {
        y[c] += load(g[at(i, c)]) * load(gx[at(i, c)]);
        v = y[c] / load(x[at(i, c)]);
      }
      gx[at(i, c)] = cast_to<T>(v);
    }
}

}  // namespace

void cumprod_backward(const Tensor& x, const Tensor& g, const Tensor& gx) {
  const int64_t outer = x.size(0), n = x.size(1), inner = x.size(2);
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), "cumprod", [&]<typename T>() {
    const T* px = x.data_ptr<T>();
    const T* pg = g.data_ptr<T>();
    T* pgx = gx.data_ptr<T>();
    const int64_t blocks = (inner + kCols - 1) / kCols;
    const int64_t per_task = 2 * n * std::min(inner, kCols);
    parallel_for(0, outer * blocks, std::max<int64_t>(1, kParallelGrain / per_task), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / blocks, c0 = (t - o * blocks) * kCols;
        const int64_t at = o * n * inner + c0;
        cumprod_backward_columns<T>(px + at, pg + at, pgx + at, n, inner, std::min(kCols, inner - c0));
      }
    });
  });
}

void scan(const Tensor& in, const Tensor& out, bool product, bool reverse) {
  const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
  if (in.numel() == 0) return;
  dispatch_all(in.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, int64_t>) {
      MT_FAIL("scan", "expected a floating-point or int64 tensor, got ", dtype_name(in.dtype()));
    } else {
      const T* x = static_cast<const T*>(in.raw_data());
      T* y = static_cast<T*>(out.raw_data());
      if (product)
        scan_typed<T, true>(x, y, outer, n, inner, reverse);
      else
        scan_typed<T, false>(x, y, outer, n, inner, reverse);
    }
  });
}

}  // namespace mantissa::cpu
