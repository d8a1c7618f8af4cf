// 2-D pooling on the CPU, one input plane per task (planes spread over threads).
// Window bounds and divisors come from core/nn_math.h, shared with CUDA.
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/cpu/plane_loop.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"

namespace mantissa::cpu {

namespace {

// 2x2 windows at stride 2 with no padding or dilation: every window lies inside the input.
bool is_plain_2x2(const Pool2dGeometry& g) {
  return g.KH == 2 && g.KW == 2 && g.SH == 2 && g.SW == 2 && g.PH == 0 && g.PW == 0 && g.DH == 1 && g.DW == 1 &&
         2 * g.OH <= g.H && 2 * g.OW <= g.W;
}

// Outputs [0, n) of one output row of the 2x2 / stride 2 pool, in float: r0 and r1 are the
// two input rows, `base` the plane index of r0[0]. The running maximum of the general loop
// (math::max_pool_takes, in window order) as selects, which vectorize; as branches they
// mispredicted on real data and cost a third of a CNN training step.
template <typename In, typename Out>
inline void max_pool_2x2_row(const In* r0, const In* r1, int64_t n, int64_t base, int64_t W, Out* y, int64_t* at) {
#pragma omp simd
  for (int64_t ow = 0; ow < n; ++ow) {
    const int64_t a = base + 2 * ow;
    float m = load_float(r0, 2 * ow);
    int64_t best = a;
    const float b = load_float(r0, 2 * ow + 1), c = load_float(r1, 2 * ow), d = load_float(r1, 2 * ow + 1);
    bool t = math::max_pool_takes(b, m);
    m = t ? b : m;
    best = t ? a + 1 : best;
    t = math::max_pool_takes(c, m);
    m = t ? c : m;
    best = t ? a + W : best;
    t = math::max_pool_takes(d, m);
    m = t ? d : m;
    best = t ? a + W + 1 : best;
    store_float(y, ow, m);
    at[ow] = best;
  }
}

// One plane of the 2x2 / stride 2 pool in chunks of a fixed 8 outputs, so that no scalar
// remainder loop (branchy, and most of a row of 14 or 7) runs: the last chunk of a row is
// copied to zero-padded buffers and its extra lanes dropped.
template <typename T>
void max_pool_2x2_plane(const T* xp, T* yp, int64_t* ip, const Pool2dGeometry& g) {
  constexpr int64_t kChunk = 8;
  // Locals, not g's fields: the stores below could alias g, which kept the loop scalar.
  const int64_t W = g.W, OW = g.OW, OH = g.OH;
  const int64_t full = OW / kChunk * kChunk, rem = OW - full;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const T* r0 = xp + 2 * oh * W;
    const T* r1 = r0 + W;
    const int64_t base = 2 * oh * W;
    T* y = yp + oh * OW;
    int64_t* at = ip + oh * OW;
    for (int64_t c = 0; c < full; c += kChunk)
      max_pool_2x2_row(r0 + 2 * c, r1 + 2 * c, kChunk, base + 2 * c, W, y + c, at + c);
    if (rem == 0) continue;
    float t0[2 * kChunk] = {}, t1[2 * kChunk] = {}, ty[kChunk];
    int64_t tat[kChunk];
    for (int64_t i = 0; i < 2 * rem; ++i) {
      t0[i] = load_float(r0, 2 * full + i);
      t1[i] = load_float(r1, 2 * full + i);
    }
    max_pool_2x2_row(t0, t1, kChunk, base + 2 * full, W, ty, tat);
    for (int64_t i = 0; i < rem; ++i) {
      store_float(y, full + i, ty[i]);
      at[full + i] = tat[i];
    }
  }
}

}  // namespace

void max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "max_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    int64_t* I = indices.data_ptr<int64_t>();
    for_each_plane(g, g.OH * g.OW * g.KH * g.KW, [&](int64_t p) {
      const T* xp = X + p * g.H * g.W;
      T* yp = Y + p * g.OH * g.OW;
      int64_t* ip = I + p * g.OH * g.OW;
      if constexpr (std::is_same_v<A, float>) {
        if (is_plain_2x2(g)) return max_pool_2x2_plane(xp, yp, ip, g);
      }
      const math::MaxPoolWindow window = max_pool_window(g);
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          A bv;
          window.scan(
              oh, ow, [xp](int64_t at) { return cast_to<A>(xp[at]); }, bv, ip[oh * g.OW + ow]);
          yp[oh * g.OW + ow] = cast_to<T>(bv);
        }
    });
  });
}

// gy, indices: [N, C, OH, OW]; gx: [N, C, H, W] (overwritten). Zero but at the recorded argmax
// positions, which sum gy over every window that picked them, in (oh, ow) order as on CUDA.
void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const Pool2dGeometry& g) {
  // Windows that cannot overlap (2x2 at stride 2) give each position at most one term.
  const bool disjoint = g.SH >= (g.KH - 1) * g.DH + 1 && g.SW >= (g.KW - 1) * g.DW + 1;
  dispatch_floating(gy.dtype(), "max_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* GY = gy.data_ptr<T>();
    const int64_t* I = indices.data_ptr<int64_t>();
    T* GX = gx.data_ptr<T>();
    const int64_t in_plane = g.H * g.W, out_plane = g.OH * g.OW;
    for_each_plane(g, in_plane + out_plane, [&](int64_t p) {
      const T* gp = GY + p * out_plane;
      const int64_t* ip = I + p * out_plane;
      T* xp = GX + p * in_plane;
      if (std::is_same_v<T, A> || disjoint) {
        std::memset(static_cast<void*>(xp), 0, size_t(in_plane) * sizeof(T));  // +0.0 in every float type
        for (int64_t o = 0; o < out_plane; ++o) xp[ip[o]] = cast_to<T>(cast_to<A>(xp[ip[o]]) + cast_to<A>(gp[o]));
        return;
      }
      // Overlapping windows in a 16-bit type: sum in float, round once.
      thread_local std::vector<A> acc;
      acc.assign(size_t(in_plane), A(0));
      for (int64_t o = 0; o < out_plane; ++o) acc[size_t(ip[o])] += cast_to<A>(gp[o]);
      for (int64_t i = 0; i < in_plane; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

void avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    for_each_plane(g, g.OH * g.OW * g.KH * g.KW, [&](int64_t p) {
      const T* xp = X + p * g.H * g.W;
      T* yp = Y + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          auto win = math::avg_window(oh, ow, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.count_include_pad,
                                      g.divisor_override);
          A s = 0;
          for (int64_t h = win.h0; h < win.h1; ++h)
            for (int64_t w = win.w0; w < win.w1; ++w) s += cast_to<A>(xp[h * g.W + w]);
          yp[oh * g.OW + ow] = cast_to<T>(win.divisor ? s / A(win.divisor) : A(0));
        }
    });
  });
}

void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  dispatch_floating(gy.dtype(), "avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* GY = gy.data_ptr<T>();
    T* GX = gx.data_ptr<T>();
    for_each_plane(g, g.OH * g.OW * g.KH * g.KW, [&](int64_t p) {
      std::vector<A> acc(size_t(g.H * g.W), A(0));
      const T* gp = GY + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          auto win = math::avg_window(oh, ow, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.count_include_pad,
                                      g.divisor_override);
          if (!win.divisor) continue;
          const A v = cast_to<A>(gp[oh * g.OW + ow]) / A(win.divisor);
          for (int64_t h = win.h0; h < win.h1; ++h)
            for (int64_t w = win.w0; w < win.w1; ++w) acc[size_t(h * g.W + w)] += v;
        }
      T* xp = GX + p * g.H * g.W;
      for (int64_t i = 0; i < g.H * g.W; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

void adaptive_avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  dispatch_floating(x.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    for_each_plane(g, g.H * g.W, [&](int64_t p) {
      const T* xp = X + p * g.H * g.W;
      T* yp = Y + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = math::adaptive_start(oh, g.H, g.OH), h1 = math::adaptive_end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = math::adaptive_start(ow, g.W, g.OW), w1 = math::adaptive_end(ow, g.W, g.OW);
          A s = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) s += cast_to<A>(xp[h * g.W + w]);
          yp[oh * g.OW + ow] = cast_to<T>(s / A((h1 - h0) * (w1 - w0)));
        }
      }
    });
  });
}

void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  dispatch_floating(gy.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    using A = acc_t<T>;
    const T* GY = gy.data_ptr<T>();
    T* GX = gx.data_ptr<T>();
    for_each_plane(g, g.H * g.W, [&](int64_t p) {
      std::vector<A> acc(size_t(g.H * g.W), A(0));
      const T* gp = GY + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = math::adaptive_start(oh, g.H, g.OH), h1 = math::adaptive_end(oh, g.H, g.OH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = math::adaptive_start(ow, g.W, g.OW), w1 = math::adaptive_end(ow, g.W, g.OW);
          const A v = cast_to<A>(gp[oh * g.OW + ow]) / A((h1 - h0) * (w1 - w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) acc[size_t(h * g.W + w)] += v;
        }
      }
      T* xp = GX + p * g.H * g.W;
      for (int64_t i = 0; i < g.H * g.W; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

}  // namespace mantissa::cpu
