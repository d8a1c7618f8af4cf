// Fused LSTM and GRU cells on the GPU (contracts in core/nn_kernels.h, math in
// core/rnn_cell_math.h, shared with the CPU kernels): one thread per hidden unit of a row, a
// grid-stride loop over the N * H units; no host synchronisation.
#include "core/rnn_cell_math.h"
#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

// gx, gh, act [N, 4H]; c, h_out, c_out [N, H]; i runs over the N * H units.
template <typename T>
__global__ void lstm_cell_kernel(const T* gx, const T* gh, const T* c, T* h_out, T* c_out, T* act, int64_t N,
                                 int64_t H) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, N * H) {
    const int64_t n = i / H, j = i - n * H, g0 = n * 4 * H + j;
    A pre[4];
    for (int k = 0; k < 4; ++k) pre[k] = cast_to<A>(gx[g0 + k * H]) + cast_to<A>(gh[g0 + k * H]);
    const auto v = math::lstm_cell_forward(pre, cast_to<A>(c[i]));
    for (int k = 0; k < 4; ++k) act[g0 + k * H] = cast_to<T>(v.a[k]);
    c_out[i] = cast_to<T>(v.c_new);
    h_out[i] = cast_to<T>(v.h_new);
  }
}

// gh, gc, c, c_out, gc_prev [N, H]; act, ggates [N, 4H].
template <typename T>
__global__ void lstm_cell_backward_kernel(const T* gh, const T* gc, const T* c, const T* c_out, const T* act, T* ggates,
                                          T* gc_prev, int64_t N, int64_t H) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, N * H) {
    const int64_t n = i / H, j = i - n * H, g0 = n * 4 * H + j;
    A a[4], gpre[4];
    for (int k = 0; k < 4; ++k) a[k] = cast_to<A>(act[g0 + k * H]);
    const A gprev =
        math::lstm_cell_backward(cast_to<A>(gh[i]), cast_to<A>(gc[i]), a, cast_to<A>(c[i]), cast_to<A>(c_out[i]), gpre);
    for (int k = 0; k < 4; ++k) ggates[g0 + k * H] = cast_to<T>(gpre[k]);
    gc_prev[i] = cast_to<T>(gprev);
  }
}

// gx, gh [N, 3H]; h, h_out [N, H]; ws [N, 4H].
template <typename T>
__global__ void gru_cell_kernel(const T* gx, const T* gh, const T* h, T* h_out, T* ws, int64_t N, int64_t H) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, N * H) {
    const int64_t n = i / H, j = i - n * H, g0 = n * 3 * H + j, w0 = n * 4 * H + j;
    A x[3], hh[3], w[4];
    for (int k = 0; k < 3; ++k) {
      x[k] = cast_to<A>(gx[g0 + k * H]);
      hh[k] = cast_to<A>(gh[g0 + k * H]);
    }
    h_out[i] = cast_to<T>(math::gru_cell_forward(x, hh, cast_to<A>(h[i]), w));
    for (int k = 0; k < 4; ++k) ws[w0 + k * H] = cast_to<T>(w[k]);
  }
}

// g, h, gh_prev [N, H]; ws [N, 4H]; ggx, ggh [N, 3H].
template <typename T>
__global__ void gru_cell_backward_kernel(const T* g, const T* h, const T* ws, T* ggx, T* ggh, T* gh_prev, int64_t N,
                                         int64_t H) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, N * H) {
    const int64_t n = i / H, j = i - n * H, g0 = n * 3 * H + j, w0 = n * 4 * H + j;
    A w[4], gx[3], ghh[3];
    for (int k = 0; k < 4; ++k) w[k] = cast_to<A>(ws[w0 + k * H]);
    gh_prev[i] = cast_to<T>(math::gru_cell_backward(cast_to<A>(g[i]), w, cast_to<A>(h[i]), gx, ghh));
    for (int k = 0; k < 3; ++k) {
      ggx[g0 + k * H] = cast_to<T>(gx[k]);
      ggh[g0 + k * H] = cast_to<T>(ghh[k]);
    }
  }
}

// Launches `launch(grid, stream)` for the N * H units of state `s` [N, H] on its device.
template <typename F>
void launch_units(const Tensor& s, F&& launch) {
  const int64_t units = s.numel();
  if (units == 0) return;
  const int dev = s.device().index;
  DeviceGuard guard(dev);
  launch(grid_for(units, dev), current_stream(dev));
}

}  // namespace

void lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c, const Tensor& h_out, const Tensor& c_out,
               const Tensor& act) {
  const int64_t N = c.size(0), H = c.size(1);
  dispatch_floating(c.dtype(), "lstm_cell", [&]<typename T>() {
    launch_units(c, [&](unsigned grid, cudaStream_t stream) {
      lstm_cell_kernel<T><<<grid, kBlock, 0, stream>>>(dptr<const T>(gates_x), dptr<const T>(gates_h), dptr<const T>(c),
                                                       dptr<T>(h_out), dptr<T>(c_out), dptr<T>(act), N, H);
    });
  });
}

void lstm_cell_backward(const Tensor& gh, const Tensor& gc, const Tensor& c, const Tensor& c_out, const Tensor& act,
                        const Tensor& ggates, const Tensor& gc_prev) {
  const int64_t N = c.size(0), H = c.size(1);
  dispatch_floating(c.dtype(), "lstm_cell", [&]<typename T>() {
    launch_units(c, [&](unsigned grid, cudaStream_t stream) {
      lstm_cell_backward_kernel<T><<<grid, kBlock, 0, stream>>>(dptr<const T>(gh), dptr<const T>(gc), dptr<const T>(c),
                                                                dptr<const T>(c_out), dptr<const T>(act),
                                                                dptr<T>(ggates), dptr<T>(gc_prev), N, H);
    });
  });
}

void gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h, const Tensor& h_out, const Tensor& ws) {
  const int64_t N = h.size(0), H = h.size(1);
  dispatch_floating(h.dtype(), "gru_cell", [&]<typename T>() {
    launch_units(h, [&](unsigned grid, cudaStream_t stream) {
      gru_cell_kernel<T><<<grid, kBlock, 0, stream>>>(dptr<const T>(gates_x), dptr<const T>(gates_h), dptr<const T>(h),
                                                      dptr<T>(h_out), dptr<T>(ws), N, H);
    });
  });
}

void gru_cell_backward(const Tensor& gh, const Tensor& h, const Tensor& ws, const Tensor& ggates_x,
                       const Tensor& ggates_h, const Tensor& gh_prev) {
  const int64_t N = h.size(0), H = h.size(1);
  dispatch_floating(h.dtype(), "gru_cell", [&]<typename T>() {
    launch_units(h, [&](unsigned grid, cudaStream_t stream) {
      gru_cell_backward_kernel<T><<<grid, kBlock, 0, stream>>>(dptr<const T>(gh), dptr<const T>(h), dptr<const T>(ws),
                                                               dptr<T>(ggates_x), dptr<T>(ggates_h), dptr<T>(gh_prev),
                                                               N, H);
    });
  });
}

}  // namespace mantissa::cuda
