// The weight gradient of a grouped convolution with few channels per group (conv_grouped.h).
//
//   gw[o, i, kh, kw] = sum over n, oh, ow of
//                      gy[n, o, oh, ow] x[n, i, oh SH + kh DH - PH, ow SW + kw DW - PW]
//   (o an output channel of group g, i an input channel of the same group)
//
// Each (sample, channel) plane of x is split into SH x SW phase planes of the zero-padded input
// (phase (a, b) holds padded rows a, a + SH, ... and columns b, b + SW, ...; with unit stride the
// padded plane itself), each [OH + (KH-1) DH / SH, Wp], Wp = OW + (KW-1) DW / SW, and gy's plane
// is copied into gp [OH, Wp] with zeros past column OW. Tap (kh, kw) reads phase
// (kh DH % SH, kw DW % SW) shifted by kh DH / SH rows and kw DW / SW columns with unit stride:
// flattened, one dot product of gp with the phase at that offset, the zero columns of gp
// cancelling the positions that would wrap into the next row. Four taps share each load of gp.
// Groups are spread over threads; each sums its samples in order (deterministic).
#include <algorithm>
#include <vector>

#include "core/cpu/conv_grouped.h"
#include "core/cpu/loops.h"

namespace mantissa::cpu {

bool is_small_group(const Conv2dGeometry& g) { return g.groups > 1 && (g.C / g.groups) * (g.Cout / g.groups) <= 16; }

namespace {

// N (1 to 4) taps' dot products of gp [len] with xp at offsets off[0..N): added into sums.
// A remainder of fewer than four taps computes only those (a 3 x 3 kernel's ninth tap alone,
// not three dot products beside it thrown away).
template <int N, typename A>
void dot_taps(const A* gp, const A* xp, int64_t len, const int64_t* off, A* sums) {
  const A* x0 = xp + off[0];
  const A* x1 = xp + off[N > 1 ? 1 : 0];
  const A* x2 = xp + off[N > 2 ? 2 : 0];
  const A* x3 = xp + off[N > 3 ? 3 : 0];
  A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (int64_t i = 0; i < len; ++i) {
    const A v = gp[i];
    a0 += v * x0[i];
    if constexpr (N > 1) a1 += v * x1[i];
    if constexpr (N > 2) a2 += v * x2[i];
    if constexpr (N > 3) a3 += v * x3[i];
  }
  const A a[4] = {a0, a1, a2, a3};
  for (int t = 0; t < N; ++t) sums[t] += a[t];
}

// All `taps` dot products of gp with xp at offsets off, four at a time.
template <typename A>
void dot_all_taps(const A* gp, const A* xp, int64_t len, const int64_t* off, int64_t taps, A* sums) {
  int64_t t = 0;
  for (; t + 4 <= taps; t += 4) dot_taps<4>(gp, xp, len, off + t, sums + t);
  switch (taps - t) {
    case 3:
      return dot_taps<3>(gp, xp, len, off + t, sums + t);
    case 2:
      return dot_taps<2>(gp, xp, len, off + t, sums + t);
    case 1:
      return dot_taps<1>(gp, xp, len, off + t, sums + t);
    default:
      return;
  }
}

// The sum of p [n] (its zero columns included: they add nothing), in 16 lanes.
template <typename A>
A plane_sum(const A* p, int64_t n) {
  A sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

// One direction of the geometry: input size `in`, output `out`, kernel k, stride S, padding P,
// dilation D. Tap j reads padded index o S + j D = (o + j D / S) S + j D % S: phase j D % S at
// shift j D / S; each phase holds `span` = out + (k - 1) D / S positions.
struct Axis {
  int64_t in, out, k, S, P, D, span;
  Axis(int64_t in_, int64_t out_, int64_t k_, int64_t S_, int64_t P_, int64_t D_)
      : in(in_), out(out_), k(k_), S(S_), P(P_), D(D_), span(out_ + (k_ - 1) * D_ / S_) {}
  // The positions [lo, hi) of phase a that hold an input element (the rest is padding).
  void inside(int64_t a, int64_t& lo, int64_t& hi) const {
    lo = P > a ? (P - a + S - 1) / S : 0;
    hi = std::clamp<int64_t>((in + P - a + S - 1) / S, lo, span);
    lo = std::min(lo, hi);
  }
};

template <typename T>
void small_group_weight_grad_t(const Tensor& gy, const Tensor& x, const Tensor& gw, const Tensor& gb,
                               const Conv2dGeometry& g) {
  using A = acc_t<T>;
  const int64_t G = g.groups, Ci = g.C / G, Co = g.Cout / G;
  const int64_t HW = g.H * g.W, L = g.OH * g.OW, taps = g.KH * g.KW;
  const Axis rows(g.H, g.OH, g.KH, g.SH, g.PH, g.DH), cols(g.W, g.OW, g.KW, g.SW, g.PW, g.DW);
  const int64_t Wp = cols.span, phase = rows.span * Wp, xplane = g.SH * g.SW * phase, gplane = g.OH * Wp;
  const int64_t len = (g.OH - 1) * Wp + g.OW;  // the flattened span of gp's valid positions
  std::vector<int64_t> offsets(static_cast<size_t>(taps));
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw)
      offsets[size_t(kh * g.KW + kw)] =
          (kh * g.DH % g.SH * g.SW + kw * g.DW % g.SW) * phase + kh * g.DH / g.SH * Wp + kw * g.DW / g.SW;
  const T* X = x.data_ptr<T>();
  const T* GY = gy.data_ptr<T>();
  T* GW = gw.defined() ? gw.data_ptr<T>() : nullptr;
  T* GB = gb.defined() ? gb.data_ptr<T>() : nullptr;
  const int64_t per_group = g.N * ((Co * Ci * taps + Co) * gplane + Ci * xplane);
  parallel_for(0, G, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_group, 1)),
               [&](int64_t g0, int64_t g1) {
                 // Only the positions that hold input elements are written: the padding's zeros stay from the
                 // allocation (they depend on the geometry alone).
                 std::vector<A> xp(static_cast<size_t>(Ci * xplane), A(0)), gp(static_cast<size_t>(Co * gplane), A(0)),
                     sums(static_cast<size_t>(Co * Ci * taps)), bias_sums(static_cast<size_t>(Co));
                 for (int64_t gi = g0; gi < g1; ++gi) {
                   std::fill(sums.begin(), sums.end(), A(0));
                   std::fill(bias_sums.begin(), bias_sums.end(), A(0));
                   for (int64_t n = 0; n < g.N; ++n) {
                     for (int64_t i = 0; i < Ci; ++i) {
                       const T* xs = X + (n * g.C + gi * Ci + i) * HW;
                       for (int64_t ah = 0; ah < g.SH; ++ah)
                         for (int64_t aw = 0; aw < g.SW; ++aw) {
                           int64_t r0, r1, c0, c1;
                           rows.inside(ah, r0, r1);
                           cols.inside(aw, c0, c1);
                           A* ph = xp.data() + i * xplane + (ah * g.SW + aw) * phase;
                           for (int64_t r = r0; r < r1; ++r) {
                             const T* src = xs + (r * g.SH + ah - g.PH) * g.W + aw - g.PW;
                             A* row = ph + r * Wp;
                             for (int64_t c = c0; c < c1; ++c) row[c] = cast_to<A>(src[c * g.SW]);
                           }
                         }
                     }
                     for (int64_t o = 0; o < Co; ++o) {
                       const T* gs = GY + (n * g.Cout + gi * Co + o) * L;
                       for (int64_t oh = 0; oh < g.OH; ++oh) {
                         A* row = gp.data() + o * gplane + oh * Wp;
                         for (int64_t ow = 0; ow < g.OW; ++ow) row[ow] = cast_to<A>(gs[oh * g.OW + ow]);
                       }
                       if (GB) bias_sums[size_t(o)] += plane_sum(gp.data() + o * gplane, gplane);
                       if (!GW) continue;
                       for (int64_t i = 0; i < Ci; ++i)
                         dot_all_taps(gp.data() + o * gplane, xp.data() + i * xplane, len, offsets.data(), taps,
                                      sums.data() + (o * Ci + i) * taps);
                     }
                   }
                   const int64_t wsize = Co * Ci * taps;
                   if (GW)
                     for (int64_t k = 0; k < wsize; ++k) GW[gi * wsize + k] = cast_to<T>(sums[size_t(k)]);
                   if (GB)
                     for (int64_t o = 0; o < Co; ++o) GB[gi * Co + o] = cast_to<T>(bias_sums[size_t(o)]);
                 }
               });
}

}  // namespace

void small_group_weight_grad(const Tensor& gy, const Tensor& x, const Tensor& gw, const Tensor& gb,
                             const Conv2dGeometry& g) {
  dispatch_floating(x.dtype(), "conv2d", [&]<typename T>() { small_group_weight_grad_t<T>(gy, x, gw, gb, g); });
}

}  // namespace mantissa::cpu
