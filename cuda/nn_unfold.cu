// im2col / col2im (unfold / fold), and the per-channel bias add and bias gradient of conv2d.
// One thread per output element; col2im gathers (no atomics), summing each pixel's taps in
// the CPU's order (kh, then kw), so it is deterministic. Index math from core/nn_math.h.
#include "core/nn_math.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

// x: [N, C, H, W]; cols: [N, C*KH*KW, OH*OW].
// cols[n, (c*KH + kh)*KW + kw, oh*OW + ow] = x[n, c, ih, iw], 0 where (ih, iw) is padding.
template <typename T>
__global__ void im2col_kernel(const T* x, T* cols, Conv2dGeometry g, int64_t total) {
  MT_GRID_LOOP(i, total) {
    int64_t r = i;
    const int64_t ow = r % g.OW;
    r /= g.OW;
    const int64_t oh = r % g.OH;
    r /= g.OH;
    const int64_t kw = r % g.KW;
    r /= g.KW;
    const int64_t kh = r % g.KH;
    const int64_t nc = r / g.KH;  // n * C + c
    const int64_t ih = math::window_input_index(oh, kh, g.SH, g.PH, g.DH);
    const int64_t iw = math::window_input_index(ow, kw, g.SW, g.PW, g.DW);
    cols[i] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? x[(nc * g.H + ih) * g.W + iw] : cast_to<T>(0.0f);
  }
}

// cols: [N, C*KH*KW, OH*OW]; x: [N, C, H, W] (overwritten).
// x[n, c, h, w] = sum over the taps (kh, kw) whose output position (oh, ow) reads (h, w).
template <typename T>
__global__ void col2im_kernel(const T* cols, T* x, Conv2dGeometry g, int64_t total) {
  using A = acc_t<T>;
  const int64_t L = g.OH * g.OW;
  MT_GRID_LOOP(i, total) {
    const int64_t w = i % g.W, h = (i / g.W) % g.H, nc = i / (g.W * g.H);
    A s = 0;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t th = h + g.PH - kh * g.DH;  // = oh * SH when the tap hits h
      if (th < 0 || th % g.SH != 0 || th / g.SH >= g.OH) continue;
      const int64_t oh = th / g.SH;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t tw = w + g.PW - kw * g.DW;
        if (tw < 0 || tw % g.SW != 0 || tw / g.SW >= g.OW) continue;
        s += cast_to<A>(cols[((nc * g.KH + kh) * g.KW + kw) * L + oh * g.OW + tw / g.SW]);
      }
    }
    x[i] = cast_to<T>(s);
  }
}

// y: [N, C, S], bias: [C]. y[n, c, s] += bias[c], added in the accumulation type.
template <typename T>
__global__ void add_channel_bias_kernel(T* y, const T* bias, int64_t C, int64_t S, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) { y[i] = cast_to<T>(cast_to<A>(y[i]) + cast_to<A>(bias[(i / S) % C])); }
}

// x: [N, C, S]; out: [C]. out[c] = sum over n, s of x[n, c, s]; a block per channel.
template <typename T>
__global__ void channel_sum_kernel(const T* x, T* out, int64_t N, int64_t C, int64_t S) {
  using A = acc_t<T>;
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const A s = nn::channel_block_sum<A>(c, N, C, S, [&](int64_t o) { return cast_to<A>(x[o]); });
    if (threadIdx.x == 0) out[c] = cast_to<T>(s);
  }
}

}  // namespace

void im2col(const Tensor& x, const Tensor& cols, const Conv2dGeometry& g) {
  const int64_t total = cols.numel();
  if (total == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "unfold", [&]<typename T>() {
    im2col_kernel<T>
        <<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(dptr<const T>(x), dptr<T>(cols), g, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void col2im(const Tensor& cols, const Tensor& x, const Conv2dGeometry& g) {
  const int64_t total = x.numel();
  if (total == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "fold", [&]<typename T>() {
    col2im_kernel<T>
        <<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(dptr<const T>(cols), dptr<T>(x), g, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void add_channel_bias(const Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) {
  const int64_t total = N * C * S;
  if (total == 0) return;
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(y.dtype(), "conv2d", [&]<typename T>() {
    add_channel_bias_kernel<T>
        <<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(dptr<T>(y), dptr<const T>(bias), C, S, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void channel_sum(const Tensor& x, int64_t N, int64_t C, int64_t S, const Tensor& out) {
  if (C == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "conv2d", [&]<typename T>() {
    channel_sum_kernel<T>
        <<<nn::channel_grid(C, dev), 512, 0, current_stream(dev)>>>(dptr<const T>(x), dptr<T>(out), N, C, S);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
