// The weight gradient of a grouped convolution with few channels per group and unit stride
// (conv_grouped.h).
//
//   gw[o, i, kh, kw] = sum over n, oh, ow of gy[n, o, oh, ow] x[n, i, oh + kh DH - PH, ow + kw DW - PW]
//   (o an output channel of group g, i an input channel of the same group)
//
// Each (sample, channel) plane of x is copied into a zero-padded plane xp [OH + DH (KH-1), Wp]
// with Wp = OW + DW (KW-1), and gy's plane into gp [OH, Wp] with zeros past column OW. Flattened,
// every tap of every (o, i) pair is then one dot product of gp with xp shifted by
// kh DH Wp + kw DW: the zero columns of gp cancel the positions that would wrap into the next
// row. Four taps share each load of gp. Groups are spread over threads; each sums its samples
// in order (deterministic).
#include <algorithm>
#include <vector>

#include "core/cpu/conv_grouped.h"
#include "core/cpu/loops.h"

namespace mantissa::cpu {

bool is_small_group_unit_stride(const Conv2dGeometry& g) {
  return g.groups > 1 && (g.C / g.groups) * (g.Cout / g.groups) <= 16 && g.SH == 1 && g.SW == 1;
}

namespace {

// Up to four taps' dot products of gp [len] with xp at offsets off[0..n): accumulated into sums.
template <typename A>
void dot_taps(const A* gp, const A* xp, int64_t len, const int64_t* off, int n, A* sums) {
  const A* x0 = xp + off[0];
  const A* x1 = xp + off[n > 1 ? 1 : 0];
  const A* x2 = xp + off[n > 2 ? 2 : 0];
  const A* x3 = xp + off[n > 3 ? 3 : 0];
  A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (int64_t i = 0; i < len; ++i) {
    const A v = gp[i];
    a0 += v * x0[i];
    a1 += v * x1[i];
    a2 += v * x2[i];
    a3 += v * x3[i];
  }
  const A a[4] = {a0, a1, a2, a3};
  for (int t = 0; t < n; ++t) sums[t] += a[t];
}

// The sum of p [n] (its zero columns included: they add nothing), in 16 lanes.
template <typename A>
A plane_sum(const A* p, int64_t n) {
  A sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

template <typename T>
void small_group_weight_grad_t(const Tensor& gy, const Tensor& x, const Tensor& gw, const Tensor& gb,
                               const Conv2dGeometry& g) {
  using A = acc_t<T>;
  const int64_t G = g.groups, Ci = g.C / G, Co = g.Cout / G;
  const int64_t HW = g.H * g.W, L = g.OH * g.OW, taps = g.KH * g.KW;
  const int64_t Wp = g.OW + g.DW * (g.KW - 1), Hp = g.OH + g.DH * (g.KH - 1);
  const int64_t xplane = Hp * Wp, gplane = g.OH * Wp;
  const int64_t len = (g.OH - 1) * Wp + g.OW;  // the flattened span of gp's valid positions
  // The input rows and columns that land inside xp (all of them unless the padding is uneven).
  const int64_t rows = std::min(g.H, Hp - g.PH), cols = std::min(g.W, Wp - g.PW);
  std::vector<int64_t> offsets(static_cast<size_t>(taps));
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) offsets[size_t(kh * g.KW + kw)] = kh * g.DH * Wp + kw * g.DW;
  const T* X = x.data_ptr<T>();
  const T* GY = gy.data_ptr<T>();
  T* GW = gw.defined() ? gw.data_ptr<T>() : nullptr;
  T* GB = gb.defined() ? gb.data_ptr<T>() : nullptr;
  const int64_t per_group = g.N * (Co * Ci * taps + Ci + Co) * gplane;
  parallel_for(0, G, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_group, 1)),
               [&](int64_t g0, int64_t g1) {
                 // Only the planes' interiors are written: the zero borders stay from the allocation.
                 std::vector<A> xp(static_cast<size_t>(Ci * xplane), A(0)), gp(static_cast<size_t>(Co * gplane), A(0)),
                     sums(static_cast<size_t>(Co * Ci * taps)), bias_sums(static_cast<size_t>(Co));
                 for (int64_t gi = g0; gi < g1; ++gi) {
                   std::fill(sums.begin(), sums.end(), A(0));
                   std::fill(bias_sums.begin(), bias_sums.end(), A(0));
                   for (int64_t n = 0; n < g.N; ++n) {
                     for (int64_t i = 0; i < Ci; ++i) {
                       const T* xs = X + (n * g.C + gi * Ci + i) * HW;
                       for (int64_t ih = 0; ih < rows; ++ih) {
                         A* row = xp.data() + i * xplane + (ih + g.PH) * Wp + g.PW;
                         for (int64_t iw = 0; iw < cols; ++iw) row[iw] = cast_to<A>(xs[ih * g.W + iw]);
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
                         for (int64_t t = 0; t < taps; t += 4)
                           dot_taps<A>(gp.data() + o * gplane, xp.data() + i * xplane, len, offsets.data() + t,
                                       int(std::min<int64_t>(4, taps - t)), sums.data() + (o * Ci + i) * taps + t);
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
