// Fused LSTM and GRU cells on the CPU (contracts in core/nn_kernels.h, math in
// core/rnn_cell_math.h): one pass over the gates per time step, rows in parallel.
#include "core/cpu/loops.h"
#include "core/nn_kernels.h"
#include "core/rnn_cell_math.h"

namespace mantissa::cpu {

namespace {

// Calls body(n) for each row n of [N, H] in parallel, H units per row.
template <typename Body>
void for_rows(int64_t N, int64_t H, Body&& body) {
  parallel_for(0, N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(4 * H, 1)), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) body(n);
  });
}

}  // namespace

// gates_x, gates_h, act [N, 4H]; c, h_out, c_out [N, H].
void lstm_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c, const Tensor& h_out, const Tensor& c_out,
               const Tensor& act) {
  const int64_t N = c.size(0), H = c.size(1);
  dispatch_floating(c.dtype(), "lstm_cell", [&]<typename T>() {
    using A = acc_t<T>;
    const T *gx = gates_x.data_ptr<T>(), *gh = gates_h.data_ptr<T>(), *cp = c.data_ptr<T>();
    T *ho = h_out.data_ptr<T>(), *co = c_out.data_ptr<T>(), *ap = act.data_ptr<T>();
    for_rows(N, H, [&](int64_t n) {
      const int64_t g0 = n * 4 * H, s0 = n * H;
      for (int64_t j = 0; j < H; ++j) {
        A pre[4];
        for (int k = 0; k < 4; ++k) pre[k] = cast_to<A>(gx[g0 + k * H + j]) + cast_to<A>(gh[g0 + k * H + j]);
        const auto v = math::lstm_cell_forward(pre, cast_to<A>(cp[s0 + j]));
        for (int k = 0; k < 4; ++k) ap[g0 + k * H + j] = cast_to<T>(v.a[k]);
        co[s0 + j] = cast_to<T>(v.c_new);
        ho[s0 + j] = cast_to<T>(v.h_new);
      }
    });
  });
}

// gh, gc, c, c_out, gc_prev [N, H]; act, ggates [N, 4H].
void lstm_cell_backward(const Tensor& gh, const Tensor& gc, const Tensor& c, const Tensor& c_out, const Tensor& act,
                        const Tensor& ggates, const Tensor& gc_prev) {
  const int64_t N = c.size(0), H = c.size(1);
  dispatch_floating(c.dtype(), "lstm_cell", [&]<typename T>() {
    using A = acc_t<T>;
    const T *ghp = gh.data_ptr<T>(), *gcp = gc.data_ptr<T>(), *cp = c.data_ptr<T>(), *cop = c_out.data_ptr<T>();
    const T* ap = act.data_ptr<T>();
    T *gg = ggates.data_ptr<T>(), *gcprev = gc_prev.data_ptr<T>();
    for_rows(N, H, [&](int64_t n) {
      const int64_t g0 = n * 4 * H, s0 = n * H;
      for (int64_t j = 0; j < H; ++j) {
        A a[4], gpre[4];
        for (int k = 0; k < 4; ++k) a[k] = cast_to<A>(ap[g0 + k * H + j]);
        const A gprev = math::lstm_cell_backward(cast_to<A>(ghp[s0 + j]), cast_to<A>(gcp[s0 + j]), a,
                                                 cast_to<A>(cp[s0 + j]), cast_to<A>(cop[s0 + j]), gpre);
        for (int k = 0; k < 4; ++k) gg[g0 + k * H + j] = cast_to<T>(gpre[k]);
        gcprev[s0 + j] = cast_to<T>(gprev);
      }
    });
  });
}

// gates_x, gates_h [N, 3H]; h, h_out [N, H]; ws [N, 4H].
void gru_cell(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h, const Tensor& h_out, const Tensor& ws) {
  const int64_t N = h.size(0), H = h.size(1);
  dispatch_floating(h.dtype(), "gru_cell", [&]<typename T>() {
    using A = acc_t<T>;
    const T *gx = gates_x.data_ptr<T>(), *gh = gates_h.data_ptr<T>(), *hp = h.data_ptr<T>();
    T *ho = h_out.data_ptr<T>(), *wp = ws.data_ptr<T>();
    for_rows(N, H, [&](int64_t n) {
      const int64_t g0 = n * 3 * H, w0 = n * 4 * H, s0 = n * H;
      for (int64_t j = 0; j < H; ++j) {
        A x[3], hh[3], w[4];
        for (int k = 0; k < 3; ++k) {
          x[k] = cast_to<A>(gx[g0 + k * H + j]);
          hh[k] = cast_to<A>(gh[g0 + k * H + j]);
        }
        ho[s0 + j] = cast_to<T>(math::gru_cell_forward(x, hh, cast_to<A>(hp[s0 + j]), w));
        for (int k = 0; k < 4; ++k) wp[w0 + k * H + j] = cast_to<T>(w[k]);
      }
    });
  });
}

// gh, h, gh_prev [N, H]; ws [N, 4H]; ggates_x, ggates_h [N, 3H].
void gru_cell_backward(const Tensor& gh, const Tensor& h, const Tensor& ws, const Tensor& ggates_x,
                       const Tensor& ggates_h, const Tensor& gh_prev) {
  const int64_t N = h.size(0), H = h.size(1);
  dispatch_floating(h.dtype(), "gru_cell", [&]<typename T>() {
    using A = acc_t<T>;
    const T *gp = gh.data_ptr<T>(), *hp = h.data_ptr<T>(), *wp = ws.data_ptr<T>();
    T *gxo = ggates_x.data_ptr<T>(), *gho = ggates_h.data_ptr<T>(), *gprev = gh_prev.data_ptr<T>();
    for_rows(N, H, [&](int64_t n) {
      const int64_t g0 = n * 3 * H, w0 = n * 4 * H, s0 = n * H;
      for (int64_t j = 0; j < H; ++j) {
        A w[4], gx[3], ghh[3];
        for (int k = 0; k < 4; ++k) w[k] = cast_to<A>(wp[w0 + k * H + j]);
        gprev[s0 + j] = cast_to<T>(math::gru_cell_backward(cast_to<A>(gp[s0 + j]), w, cast_to<A>(hp[s0 + j]), gx, ghh));
        for (int k = 0; k < 3; ++k) {
          gxo[g0 + k * H + j] = cast_to<T>(gx[k]);
          gho[g0 + k * H + j] = cast_to<T>(ghh[k]);
        }
      }
    });
  });
}

}  // namespace mantissa::cpu
