// 2-D convolution on the CPU: im2col + GEMM (Eigen), per sample and group.
//
//   forward      y[n, g]  [Cout/G, L]     = W[g] [Cout/G, K] @ col(x[n, g]) [K, L]
//   grad input   dcol     [K, L]          = W[g]^T @ gy[n, g];  gx[n, g] = col2im(dcol)
//   grad weight  gW[g]    [Cout/G, K]    += gy[n, g] @ col(x[n, g])^T
//   (K = C/G * KH * KW, L = OH * OW)
//
// With at least as many samples as threads, samples are spread over threads and each
// GEMM runs on one (Eigen keeps to one thread inside a parallel region); with fewer,
// samples run one at a time and Eigen threads the GEMM. Columns of one sample-group
// stay in a per-thread buffer (a few hundred KB), never a whole-batch im2col.
// fp16/bf16 are widened to fp32 while building columns, computed in fp32 and rounded once.
// (GCC 12 reports false -Wmaybe-uninitialized inside Eigen's AVX-512 kernels: silenced here.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "core/cpu/conv_grouped.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/onednn.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"

namespace mantissa::cpu {

namespace {

template <typename A>
using RowMat = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename A>
using MatMap = Eigen::Map<RowMat<A>>;
template <typename A>
using ConstMatMap = Eigen::Map<const RowMat<A>>;
template <typename A>
using ConstVecMap = Eigen::Map<const Eigen::Matrix<A, Eigen::Dynamic, 1>>;
template <typename A>
using VecMap = Eigen::Map<Eigen::Matrix<A, Eigen::Dynamic, 1>>;

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// The output positions o in [0, OUT) whose input index o * S + off lies in [0, IN).
void valid_range(int64_t off, int64_t S, int64_t IN, int64_t OUT, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + S - 1) / S;
  hi = IN - off <= 0 ? 0 : (IN - off + S - 1) / S;
  lo = std::min(lo, OUT);
  hi = std::clamp(hi, lo, OUT);
}

// col [Cg*KH*KW, OH*OW] (type A) from the Cg input planes at xg (type T).
template <typename T, typename A>
void im2col_planes(const T* xg, int64_t Cg, const Conv2dGeometry& g, A* col) {
  const int64_t L = g.OH * g.OW;
  for (int64_t c = 0; c < Cg; ++c) {
    const T* plane = xg + c * g.H * g.W;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        A* row = col + ((c * g.KH + kh) * g.KW + kw) * L;
        const int64_t woff = math::window_input_index(0, kw, g.SW, g.PW, g.DW);  // input column of ow = 0
        int64_t lo, hi;
        valid_range(woff, g.SW, g.W, g.OW, lo, hi);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          A* r = row + oh * g.OW;
          const int64_t ih = math::window_input_index(oh, kh, g.SH, g.PH, g.DH);
          if (ih < 0 || ih >= g.H) {
            std::fill(r, r + g.OW, A(0));
            continue;
          }
          const T* src = plane + ih * g.W + woff;
          std::fill(r, r + lo, A(0));
          if (g.SW == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = cast_to<A>(src[ow]);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = cast_to<A>(src[ow * g.SW]);
          }
          std::fill(r + hi, r + g.OW, A(0));
        }
      }
    }
  }
}

// xg (Cg planes, type A, accumulated into) += the adjoint of im2col applied to col.
template <typename A>
void col2im_planes(const A* col, int64_t Cg, const Conv2dGeometry& g, A* xg) {
  const int64_t L = g.OH * g.OW;
  for (int64_t c = 0; c < Cg; ++c) {
    A* plane = xg + c * g.H * g.W;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const A* row = col + ((c * g.KH + kh) * g.KW + kw) * L;
        const int64_t woff = math::window_input_index(0, kw, g.SW, g.PW, g.DW);  // input column of ow = 0
        int64_t lo, hi;
        valid_range(woff, g.SW, g.W, g.OW, lo, hi);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t ih = math::window_input_index(oh, kh, g.SH, g.PH, g.DH);
          if (ih < 0 || ih >= g.H) continue;
          const A* r = row + oh * g.OW;
          A* dst = plane + ih * g.W + woff;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.SW] += r[ow];
        }
      }
    }
  }
}

// 1x1, stride 1, no padding: the input planes are already the column matrix.
bool is_pointwise(const Conv2dGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PH == 0 && g.PW == 0;
}

// The data of `t` in the compute type A: the tensor itself, or a widened copy in `buf`.
template <typename T, typename A>
const A* compute_data(const Tensor& t, std::vector<A>& buf) {
  if constexpr (std::is_same_v<T, A>) {
    return t.data_ptr<A>();
  } else {
    const T* p = t.data_ptr<T>();
    buf.resize(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) buf[size_t(i)] = cast_to<A>(p[i]);
    return buf.data();
  }
}

// Per-thread scratch for one sample-group.
template <typename A>
struct Scratch {
  std::vector<A> col, tmp, planes;
};

// Calls body(n, scratch, thread) for each sample, spread over threads when there are enough
// samples and enough work (multiply-adds per sample) to pay for a parallel region.
template <typename A, typename F>
void for_each_sample(int64_t N, int64_t work_per_sample, F&& body) {
  const int nt = max_threads();
  if (nt > 1 && N >= nt && N * work_per_sample >= (int64_t(1) << 20)) {
#pragma omp parallel
    {
      Scratch<A> s;
#ifdef _OPENMP
      const int tid = omp_get_thread_num();
#else
      const int tid = 0;
#endif
// Static: each thread gets a fixed block of samples, so the per-thread weight-gradient
// sums (added in thread order) are the same on every run: deterministic training.
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) body(n, s, tid);
    }
  } else {
    Scratch<A> s;
    for (int64_t n = 0; n < N; ++n) body(n, s, 0);
  }
}

template <typename T>
void conv2d_forward_t(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g) {
  using A = acc_t<T>;
  constexpr bool kSame = std::is_same_v<T, A>;
  const int64_t G = g.groups, Cig = g.C / G, Cog = g.Cout / G;
  const int64_t K = Cig * g.KH * g.KW, L = g.OH * g.OW, HW = g.H * g.W;
  std::vector<A> wbuf, bbuf;
  const A* Wd = compute_data<T, A>(w, wbuf);
  const A* Bd = bias.defined() ? compute_data<T, A>(bias, bbuf) : nullptr;
  const T* X = x.data_ptr<T>();
  T* Y = y.data_ptr<T>();
  const bool direct = kSame && is_pointwise(g);
  for_each_sample<A>(g.N, g.Cout * K * L, [&](int64_t n, Scratch<A>& s, int) {
    for (int64_t gi = 0; gi < G; ++gi) {
      const T* xg = X + (n * g.C + gi * Cig) * HW;
      const A* cols;
      if (direct) {
        cols = reinterpret_cast<const A*>(xg);
      } else {
        s.col.resize(size_t(K * L));
        im2col_planes<T, A>(xg, Cig, g, s.col.data());
        cols = s.col.data();
      }
      T* yg = Y + (n * g.Cout + gi * Cog) * L;
      A* out;
      if constexpr (kSame) {
        out = yg;
      } else {
        s.tmp.resize(size_t(Cog * L));
        out = s.tmp.data();
      }
      MatMap<A> Ym(out, Cog, L);
      Ym.noalias() = ConstMatMap<A>(Wd + gi * Cog * K, Cog, K) * ConstMatMap<A>(cols, K, L);
      if (Bd) Ym.colwise() += ConstVecMap<A>(Bd + gi * Cog, Cog);
      if constexpr (!kSame)
        for (int64_t i = 0; i < Cog * L; ++i) yg[i] = cast_to<T>(out[i]);
    }
  });
}

template <typename T>
void conv2d_backward_t(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                       const Tensor& gb, const Conv2dGeometry& g) {
  using A = acc_t<T>;
  constexpr bool kSame = std::is_same_v<T, A>;
  const int64_t G = g.groups, Cig = g.C / G, Cog = g.Cout / G;
  const int64_t K = Cig * g.KH * g.KW, L = g.OH * g.OW, HW = g.H * g.W;
  const bool want_x = gx.defined(), want_w = gw.defined(), want_b = gb.defined();
  std::vector<A> wbuf;
  const A* Wd = want_x ? compute_data<T, A>(w, wbuf) : nullptr;
  const T* X = x.data_ptr<T>();
  const T* GY = gy.data_ptr<T>();
  T* GX = want_x ? gx.data_ptr<T>() : nullptr;
  const bool direct = kSame && is_pointwise(g);
  // Weight and bias gradients: one accumulator per thread, summed at the end.
  const int nt = max_threads();
  std::vector<std::vector<A>> acc_w(want_w ? size_t(nt) : 0), acc_b(want_b ? size_t(nt) : 0);
  for (auto& a : acc_w) a.assign(size_t(g.Cout * K), A(0));
  for (auto& a : acc_b) a.assign(size_t(g.Cout), A(0));

  for_each_sample<A>(g.N, 2 * g.Cout * K * L, [&](int64_t n, Scratch<A>& s, int tid) {
    for (int64_t gi = 0; gi < G; ++gi) {
      const T* gyg = GY + (n * g.Cout + gi * Cog) * L;
      const A* gya;
      if constexpr (kSame) {
        gya = gyg;
      } else {
        s.tmp.resize(size_t(Cog * L));
        for (int64_t i = 0; i < Cog * L; ++i) s.tmp[size_t(i)] = cast_to<A>(gyg[i]);
        gya = s.tmp.data();
      }
      ConstMatMap<A> GYm(gya, Cog, L);
      const T* xg = X + (n * g.C + gi * Cig) * HW;
      if (want_w) {
        const A* cols;
        if (direct) {
          cols = reinterpret_cast<const A*>(xg);
        } else {
          s.col.resize(size_t(K * L));
          im2col_planes<T, A>(xg, Cig, g, s.col.data());
          cols = s.col.data();
        }
        MatMap<A>(acc_w[size_t(tid)].data() + gi * Cog * K, Cog, K).noalias() +=
            GYm * ConstMatMap<A>(cols, K, L).transpose();
      }
      if (want_b) VecMap<A>(acc_b[size_t(tid)].data() + gi * Cog, Cog) += GYm.rowwise().sum();
      if (want_x) {
        T* gxg = GX + (n * g.C + gi * Cig) * HW;
        ConstMatMap<A> Wg(Wd + gi * Cog * K, Cog, K);
        if (direct) {
          MatMap<A>(reinterpret_cast<A*>(gxg), K, L).noalias() = Wg.transpose() * GYm;
          continue;
        }
        s.col.resize(size_t(K * L));
        MatMap<A>(s.col.data(), K, L).noalias() = Wg.transpose() * GYm;
        A* planes;
        if constexpr (kSame) {
          planes = gxg;
        } else {
          s.planes.resize(size_t(Cig * HW));
          planes = s.planes.data();
        }
        std::fill(planes, planes + Cig * HW, A(0));
        col2im_planes<A>(s.col.data(), Cig, g, planes);
        if constexpr (!kSame)
          for (int64_t i = 0; i < Cig * HW; ++i) gxg[i] = cast_to<T>(planes[i]);
      }
    }
  });

  auto reduce_into = [](std::vector<std::vector<A>>& parts, const Tensor& out) {
    T* o = out.data_ptr<T>();
    const size_t n = parts[0].size();
    for (size_t p = 1; p < parts.size(); ++p)
      for (size_t i = 0; i < n; ++i) parts[0][i] += parts[p][i];
    for (size_t i = 0; i < n; ++i) o[i] = cast_to<T>(parts[0][i]);
  };
  if (want_w) reduce_into(acc_w, gw);
  if (want_b) reduce_into(acc_b, gb);
}

// Spreads samples over threads for the (memory-bound) unfold/fold kernels.
template <typename F>
void sample_loop(const Conv2dGeometry& g, int64_t per_sample, F&& f) {
  parallel_for(0, g.N, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_sample, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t n = b; n < e; ++n) f(n);
               });
}

// fp16 has no oneDNN convolution without fp16 math: t as a contiguous fp32 tensor (its values
// widened when `values`), or undefined when t is. The fp32 oneDNN convolution on widened
// operands, rounded once, costs about the fp32 step (Eigen's widened im2col path: 3x it).
Tensor fp32_twin(const Tensor& t, bool values) {
  if (!t.defined()) return Tensor();
  Tensor w = make_tensor(t.sizes(), DType::Float32, Device::cpu());
  if (values) copy(t, w);
  return w;
}
void round_into(const Tensor& from, const Tensor& to) {
  if (to.defined()) copy(from, to);
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g) {
  if (onednn::conv2d_forward(x, w, bias, y, g)) return;
  if (x.dtype() == DType::Float16) {
    const Tensor y32 = fp32_twin(y, false);
    if (onednn::conv2d_forward(fp32_twin(x, true), fp32_twin(w, true), fp32_twin(bias, true), y32, g))
      return round_into(y32, y);
  }
  dispatch_floating(x.dtype(), "conv2d", [&]<typename T>() { conv2d_forward_t<T>(x, w, bias, y, g); });
}

void conv2d_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dGeometry& g) {
  if (is_small_group(g) && (gw.defined() || gb.defined()) && !onednn::has_direct_weight_grad(x.dtype(), g)) {
    if (gx.defined()) conv2d_backward(gy, x, w, gx, Tensor(), Tensor(), g);
    return small_group_weight_grad(gy, x, gw, gb, g);
  }
  if (onednn::conv2d_backward(gy, x, w, gx, gw, gb, g)) return;
  if (x.dtype() == DType::Float16) {
    const Tensor gx32 = fp32_twin(gx, false), gw32 = fp32_twin(gw, false), gb32 = fp32_twin(gb, false);
    if (onednn::conv2d_backward(fp32_twin(gy, true), fp32_twin(x, true), fp32_twin(w, true), gx32, gw32, gb32, g)) {
      round_into(gx32, gx);
      round_into(gw32, gw);
      round_into(gb32, gb);
      return;
    }
  }
  dispatch_floating(x.dtype(), "conv2d", [&]<typename T>() { conv2d_backward_t<T>(gy, x, w, gx, gw, gb, g); });
}

void im2col(const Tensor& x, const Tensor& cols, const Conv2dGeometry& g) {
  const int64_t per = g.C * g.KH * g.KW * g.OH * g.OW;
  dispatch_floating(x.dtype(), "unfold", [&]<typename T>() {
    const T* X = x.data_ptr<T>();
    T* C = cols.data_ptr<T>();
    sample_loop(g, per, [&](int64_t n) { im2col_planes<T, T>(X + n * g.C * g.H * g.W, g.C, g, C + n * per); });
  });
}

void col2im(const Tensor& cols, const Tensor& x, const Conv2dGeometry& g) {
  const int64_t per = g.C * g.KH * g.KW * g.OH * g.OW, plane = g.C * g.H * g.W;
  dispatch_floating(x.dtype(), "fold", [&]<typename T>() {
    using A = acc_t<T>;
    const T* C = cols.data_ptr<T>();
    T* X = x.data_ptr<T>();
    sample_loop(g, per, [&](int64_t n) {
      std::vector<A> cbuf, xbuf(size_t(plane), A(0));
      const T* cn = C + n * per;
      const A* ca;
      if constexpr (std::is_same_v<T, A>) {
        ca = cn;
      } else {
        cbuf.resize(size_t(per));
        for (int64_t i = 0; i < per; ++i) cbuf[size_t(i)] = cast_to<A>(cn[i]);
        ca = cbuf.data();
      }
      col2im_planes<A>(ca, g.C, g, xbuf.data());
      for (int64_t i = 0; i < plane; ++i) X[n * plane + i] = cast_to<T>(xbuf[size_t(i)]);
    });
  });
}

}  // namespace mantissa::cpu
