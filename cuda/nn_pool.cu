// 2-D pooling on the GPU: one thread per output element. The backward passes gather (each
// input pixel sums the outputs whose window covers it, in the CPU's (oh, ow) order) rather
// than scatter with atomics, so they are deterministic. Window bounds, divisors and the max
// comparison come from core/nn_math.h, shared with core/cpu/nn_pool.cpp.
#include "core/nn_math.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

// x: [N, C, H, W]; y, indices: [N, C, OH, OW].
// y = max over the dilated window (padding never wins, NaN propagates); indices = h * W + w of it.
template <typename T>
__global__ void max_pool2d_kernel(const T* x, T* y, int64_t* indices, Pool2dGeometry g, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
    const T* xp = x + plane * g.H * g.W;
    A bv;
    max_pool_window(g).scan(
        oh, ow, [xp](int64_t at) { return cast_to<A>(xp[at]); }, bv, indices[i]);
    y[i] = cast_to<T>(bv);
  }
}

// gy, indices: [N, C, OH, OW]; gx: [N, C, H, W] (overwritten). Each pixel sums gy over the
// windows whose recorded argmax is this pixel, in (oh, ow) order as the CPU's scatter.
template <typename T>
__global__ void max_pool2d_backward_kernel(const T* gy, const int64_t* indices, T* gx, Pool2dGeometry g,
                                           int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
    const int64_t at = h * g.W + w, out_plane = plane * g.OH * g.OW;
    // The dilated window spans (K - 1) * D + 1 pixels.
    const int64_t oh0 = math::window_first_output(h, (g.KH - 1) * g.DH + 1, g.SH, g.PH),
                  oh1 = math::window_last_output(h, g.SH, g.PH, g.OH);
    const int64_t ow0 = math::window_first_output(w, (g.KW - 1) * g.DW + 1, g.SW, g.PW),
                  ow1 = math::window_last_output(w, g.SW, g.PW, g.OW);
    A s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = out_plane + oh * g.OW + ow;
        if (indices[o] == at) s += cast_to<A>(gy[o]);
      }
    gx[i] = cast_to<T>(s);
  }
}

// x: [N, C, H, W]; y: [N, C, OH, OW]. y = window sum / divisor (math::avg_window's rules).
template <typename T>
__global__ void avg_pool2d_kernel(const T* x, T* y, Pool2dGeometry g, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
    const T* xp = x + plane * g.H * g.W;
    const math::AvgWindow win =
        math::avg_window(oh, ow, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.count_include_pad, g.divisor_override);
    A s = 0;
    for (int64_t h = win.h0; h < win.h1; ++h)
      for (int64_t w = win.w0; w < win.w1; ++w) s += cast_to<A>(xp[h * g.W + w]);
    y[i] = cast_to<T>(win.divisor ? s / A(win.divisor) : A(0));
  }
}

// gy: [N, C, OH, OW]; gx: [N, C, H, W] (overwritten). gx = A^T gy: each pixel sums
// gy / divisor over the windows that contain it.
template <typename T>
__global__ void avg_pool2d_backward_kernel(const T* gy, T* gx, Pool2dGeometry g, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
    const T* gp = gy + plane * g.OH * g.OW;
    const int64_t oh0 = math::window_first_output(h, g.KH, g.SH, g.PH),
                  oh1 = math::window_last_output(h, g.SH, g.PH, g.OH);
    const int64_t ow0 = math::window_first_output(w, g.KW, g.SW, g.PW),
                  ow1 = math::window_last_output(w, g.SW, g.PW, g.OW);
    A s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const math::AvgWindow win = math::avg_window(oh, ow, g.H, g.W, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW,
                                                     g.count_include_pad, g.divisor_override);
        if (win.divisor && h >= win.h0 && h < win.h1 && w >= win.w0 && w < win.w1)
          s += cast_to<A>(gp[oh * g.OW + ow]) / A(win.divisor);
      }
    gx[i] = cast_to<T>(s);
  }
}

// x: [N, C, H, W]; y: [N, C, OH, OW]. y = mean over rows [floor(oh*H/OH), ceil((oh+1)*H/OH)), likewise columns.
template <typename T>
__global__ void adaptive_avg_pool2d_kernel(const T* x, T* y, Pool2dGeometry g, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t ow = i % g.OW, oh = (i / g.OW) % g.OH, plane = i / (g.OW * g.OH);
    const T* xp = x + plane * g.H * g.W;
    const int64_t h0 = math::adaptive_start(oh, g.H, g.OH), h1 = math::adaptive_end(oh, g.H, g.OH);
    const int64_t w0 = math::adaptive_start(ow, g.W, g.OW), w1 = math::adaptive_end(ow, g.W, g.OW);
    A s = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) s += cast_to<A>(xp[h * g.W + w]);
    y[i] = cast_to<T>(s / A((h1 - h0) * (w1 - w0)));
  }
}

// gy: [N, C, OH, OW]; gx: [N, C, H, W] (overwritten). Each pixel sums gy / window size over
// the adaptive windows that contain it.
template <typename T>
__global__ void adaptive_avg_pool2d_backward_kernel(const T* gy, T* gx, Pool2dGeometry g, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, plane = i / (g.W * g.H);
    const T* gp = gy + plane * g.OH * g.OW;
    const int64_t oh0 = math::adaptive_first_output(h, g.H, g.OH), oh1 = math::adaptive_last_output(h, g.H, g.OH);
    const int64_t ow0 = math::adaptive_first_output(w, g.W, g.OW), ow1 = math::adaptive_last_output(w, g.W, g.OW);
    A s = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const int64_t h0 = math::adaptive_start(oh, g.H, g.OH), h1 = math::adaptive_end(oh, g.H, g.OH);
      if (h < h0 || h >= h1) continue;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t w0 = math::adaptive_start(ow, g.W, g.OW), w1 = math::adaptive_end(ow, g.W, g.OW);
        if (w < w0 || w >= w1) continue;
        s += cast_to<A>(gp[oh * g.OW + ow]) / A((h1 - h0) * (w1 - w0));
      }
    }
    gx[i] = cast_to<T>(s);
  }
}

// Calls launch(grid, stream, in, out, n) with in/out typed by the floating dtype of `in`,
// n = out.numel() threads' worth of work.
template <typename F>
void run_pool(const char* op, const Tensor& in, const Tensor& out, F&& launch) {
  const int64_t total = out.numel();
  if (total == 0) return;
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(in.dtype(), op, [&]<typename T>() {
    launch(grid_for(total, dev), current_stream(dev), dptr<const T>(in), dptr<T>(out), total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g) {
  const int64_t total = y.numel();
  if (total == 0) return;
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "max_pool2d", [&]<typename T>() {
    max_pool2d_kernel<T><<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(dptr<const T>(x), dptr<T>(y),
                                                                                   dptr<int64_t>(indices), g, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const Pool2dGeometry& g) {
  const int64_t total = gx.numel();
  if (total == 0) return;
  const int dev = gx.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(gy.dtype(), "max_pool2d", [&]<typename T>() {
    max_pool2d_backward_kernel<T><<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(
        dptr<const T>(gy), dptr<const int64_t>(indices), dptr<T>(gx), g, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  run_pool("avg_pool2d", x, y, [&]<typename T>(unsigned grid, cudaStream_t s, const T* in, T* out, int64_t n) {
    avg_pool2d_kernel<T><<<grid, kBlock, 0, s>>>(in, out, g, n);
  });
}

void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  run_pool("avg_pool2d", gy, gx, [&]<typename T>(unsigned grid, cudaStream_t s, const T* in, T* out, int64_t n) {
    avg_pool2d_backward_kernel<T><<<grid, kBlock, 0, s>>>(in, out, g, n);
  });
}

void adaptive_avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  run_pool("adaptive_avg_pool2d", x, y, [&]<typename T>(unsigned grid, cudaStream_t s, const T* in, T* out, int64_t n) {
    adaptive_avg_pool2d_kernel<T><<<grid, kBlock, 0, s>>>(in, out, g, n);
  });
}

void adaptive_avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  run_pool("adaptive_avg_pool2d", gy, gx,
           [&]<typename T>(unsigned grid, cudaStream_t s, const T* in, T* out, int64_t n) {
             adaptive_avg_pool2d_backward_kernel<T><<<grid, kBlock, 0, s>>>(in, out, g, n);
           });
}

}  // namespace mantissa::cuda
