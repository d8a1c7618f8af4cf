// Fused LSTM and GRU cells on the CPU (contracts in core/nn_kernels.h, math in
// core/rnn_cell_math.h): one pass over the gates per time step, rows in parallel.
#include "core/cpu/loops.h"
#include "core/cpu/vec_math.h"
#include "core/nn_kernels.h"
#include "core/rnn_cell_math.h"

namespace mantissa::cpu {

namespace {

#if defined(__AVX512F__)
// (GCC 12 reports the "undefined" operands inside its own AVX-512 intrinsics as uninitialized:
// a false warning, silenced here only.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// 16 floats to p: fp32, or bf16 rounded to nearest even.
template <typename T>
inline void store16(T* p, __m512 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm512_storeu_ps(p, v);
  } else {
#if defined(__AVX512BF16__)
    store_bf16x16(v, reinterpret_cast<uint16_t*>(p));
#else
    alignas(64) float t[16];
    _mm512_store_ps(t, v);
    for (int i = 0; i < 16; ++i) store_float(p, i, t[i]);
#endif
  }
}

// The LSTM cell's math (core/rnn_cell_math.h) for 16 units of a row, with vec_math's sigmoid and
// tanh (within a few ulp of the scalar ones): one call of libm's tanhf and three exps per unit
// had made the cell a third of an LSTM layer's step ([32, 256] units: 433 us per time step).
// The GRU cell's forward likewise (its backward has no transcendental function).
// gx, gh, ap: the unit's gate i at k * H; c, h_out, c_out: the unit itself.
template <typename T>
inline void lstm_units16(const T* gx, const T* gh, const T* cp, T* ho, T* co, T* ap, int64_t H) {
  __m512 a[4];
  for (int k = 0; k < 4; ++k) {
    const __m512 pre = _mm512_add_ps(load16(gx + k * H), load16(gh + k * H));
    a[k] = k == 2 ? vector_form(math::Tanh{}, pre) : vector_form(math::Sigmoid{}, pre);
    store16(ap + k * H, a[k]);
  }
  const __m512 c_new = _mm512_add_ps(_mm512_mul_ps(a[1], load16(cp)), _mm512_mul_ps(a[0], a[2]));
  store16(co, c_new);
  store16(ho, _mm512_mul_ps(a[3], vector_form(math::Tanh{}, c_new)));
}

// math::lstm_cell_backward for 16 units (the activations as stored, tanh(c_new) vectorized).
template <typename T>
inline void lstm_units16_backward(const T* ghp, const T* gcp, const T* ap, const T* cp, const T* cop, T* gg, T* gcprev,
                                  int64_t H) {
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 a[4];
  for (int k = 0; k < 4; ++k) a[k] = load16(ap + k * H);
  const __m512 gh = load16(ghp), tc = vector_form(math::Tanh{}, load16(cop));
  const __m512 gcn =
      _mm512_add_ps(load16(gcp), _mm512_mul_ps(_mm512_mul_ps(gh, a[3]), _mm512_sub_ps(one, _mm512_mul_ps(tc, tc))));
  auto dsig = [&](__m512 v) { return _mm512_mul_ps(v, _mm512_sub_ps(one, v)); };  // sigmoid' from its value
  store16(gg, _mm512_mul_ps(_mm512_mul_ps(gcn, a[2]), dsig(a[0])));
  store16(gg + H, _mm512_mul_ps(_mm512_mul_ps(gcn, load16(cp)), dsig(a[1])));
  store16(gg + 2 * H, _mm512_mul_ps(_mm512_mul_ps(gcn, a[0]), _mm512_sub_ps(one, _mm512_mul_ps(a[2], a[2]))));
  store16(gg + 3 * H, _mm512_mul_ps(_mm512_mul_ps(gh, tc), dsig(a[3])));
  store16(gcprev, _mm512_mul_ps(gcn, a[1]));
}

// math::gru_cell_forward for 16 units (gates r, z, n at k * H; ws r, z, n, hh_n at k * H).
template <typename T>
inline void gru_units16(const T* gx, const T* gh, const T* hp, T* ho, T* wp, int64_t H) {
  const __m512 r = vector_form(math::Sigmoid{}, _mm512_add_ps(load16(gx), load16(gh)));
  const __m512 z = vector_form(math::Sigmoid{}, _mm512_add_ps(load16(gx + H), load16(gh + H)));
  const __m512 hn = load16(gh + 2 * H);
  const __m512 n = vector_form(math::Tanh{}, _mm512_add_ps(load16(gx + 2 * H), _mm512_mul_ps(r, hn)));
  store16(wp, r);
  store16(wp + H, z);
  store16(wp + 2 * H, n);
  store16(wp + 3 * H, hn);
  store16(ho, _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), z), n), _mm512_mul_ps(z, load16(hp))));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

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
      int64_t j = 0;
#if defined(__AVX512F__)
      if constexpr (kLoad16Type<T>)
        for (; j + 16 <= H; j += 16)
          lstm_units16(gx + g0 + j, gh + g0 + j, cp + s0 + j, ho + s0 + j, co + s0 + j, ap + g0 + j, H);
#endif
      for (; j < H; ++j) {
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
      int64_t j = 0;
#if defined(__AVX512F__)
      if constexpr (kLoad16Type<T>)
        for (; j + 16 <= H; j += 16)
          lstm_units16_backward(ghp + s0 + j, gcp + s0 + j, ap + g0 + j, cp + s0 + j, cop + s0 + j, gg + g0 + j,
                                gcprev + s0 + j, H);
#endif
      for (; j < H; ++j) {
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
      int64_t j = 0;
#if defined(__AVX512F__)
      if constexpr (kLoad16Type<T>)
        for (; j + 16 <= H; j += 16) gru_units16(gx + g0 + j, gh + g0 + j, hp + s0 + j, ho + s0 + j, wp + w0 + j, H);
#endif
      for (; j < H; ++j) {
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
