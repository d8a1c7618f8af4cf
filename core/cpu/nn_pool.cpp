// 2-D pooling on the CPU, one input plane per task (planes spread over threads).
// Window bounds and divisors come from core/nn_math.h, shared with CUDA.
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/cpu/nn_kernels.h"
#include "core/nn_math.h"

namespace mantissa::cpu {

namespace {

// Calls f(plane) for every [H, W] plane of the N * C planes.
template <typename F>
void for_each_plane(const Pool2dGeometry& g, int64_t work_per_plane, F&& f) {
  parallel_for(0, g.N * g.C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work_per_plane, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) f(p);
               });
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
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const math::DilatedRange rh = math::max_window(oh, g.H, g.KH, g.SH, g.PH, g.DH);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const math::DilatedRange rw = math::max_window(ow, g.W, g.KW, g.SW, g.PW, g.DW);
          // As PyTorch: start at the first real element; NaN propagates.
          int64_t best = rh.begin * g.W + rw.begin;
          A bv = -std::numeric_limits<A>::infinity();
          for (int64_t h = rh.begin; h < rh.end; h += g.DH)
            for (int64_t w = rw.begin; w < rw.end; w += g.DW) {
              const A v = cast_to<A>(xp[h * g.W + w]);
              if (math::max_pool_takes(v, bv)) {
                bv = v;
                best = h * g.W + w;
              }
            }
          yp[oh * g.OW + ow] = cast_to<T>(bv);
          ip[oh * g.OW + ow] = best;
        }
      }
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
