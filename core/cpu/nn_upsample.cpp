// Interpolation (nearest, linear, bilinear) on the CPU, one [IH, IW] -> [OH, OW] plane per
// task. Source indices and weights come from core/nn_kernels.h (upsample_nearest_source,
// upsample_linear_tap), shared with cuda/nn_upsample.cu; they are tabulated once per call.
#include <algorithm>
#include <vector>

#include "core/cpu/loops.h"
#include "core/cpu/plane_loop.h"
#include "core/nn_kernels.h"

namespace mantissa::cpu {

namespace {

template <typename A>
std::vector<UpsampleTap<A>> taps(int64_t in, int64_t out, const UpsampleGeometry& g, double scale_factor) {
  std::vector<UpsampleTap<A>> t(static_cast<size_t>(out));
  for (int64_t d = 0; d < out; ++d) {
    if (g.linear) {
      t[size_t(d)] = upsample_linear_tap<A>(d, in, out, g.align_corners, scale_factor);
    } else {
      const int64_t s = upsample_nearest_source(d, in, out, scale_factor);
      t[size_t(d)] = {s, s, A(1), A(0)};
    }
  }
  return t;
}

}  // namespace

// x: [N, C, IH, IW] -> y: [N, C, OH, OW].
void upsample(const Tensor& x, const Tensor& y, const UpsampleGeometry& g) {
  dispatch_floating(x.dtype(), "upsample", [&]<typename T>() {
    using A = acc_t<T>;
    const std::vector<UpsampleTap<A>> th = taps<A>(g.IH, g.OH, g, g.scale_h), tw = taps<A>(g.IW, g.OW, g, g.scale_w);
    // Nearest, a dim of unchanged size and 1-D inputs read one tap.
    const bool one_h = !g.linear || g.one_d || g.IH == g.OH, one_w = !g.linear || g.IW == g.OW;
    const T* X = x.data_ptr<T>();
    T* Y = y.data_ptr<T>();
    if (!g.linear) {
      // Nearest: an output row is its source row gathered by the column table, and a row with
      // the same source as the row above is a copy of it (the per-element loop below: 1.2-1.7x
      // PyTorch's 2x upsampling).
      std::vector<int64_t> col(size_t(g.OW));
      for (int64_t ow = 0; ow < g.OW; ++ow) col[size_t(ow)] = tw[size_t(ow)].i0;
      for_each_plane(g, g.OH * g.OW, [&](int64_t p) {
        const T* xp = X + p * g.IH * g.IW;
        T* yp = Y + p * g.OH * g.OW;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          T* yr = yp + oh * g.OW;
          if (oh > 0 && th[size_t(oh)].i0 == th[size_t(oh - 1)].i0) {
            std::copy(yr - g.OW, yr, yr);
            continue;
          }
          const T* r = xp + th[size_t(oh)].i0 * g.IW;
          for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] = r[col[size_t(ow)]];
        }
      });
      return;
    }
    for_each_plane(g, g.OH * g.OW, [&](int64_t p) {
      const T* xp = X + p * g.IH * g.IW;
      T* yp = Y + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const UpsampleTap<A>& a = th[size_t(oh)];
        const T* r0 = xp + a.i0 * g.IW;
        const T* r1 = xp + a.i1 * g.IW;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const UpsampleTap<A>& b = tw[size_t(ow)];
          auto row = [&](const T* r) {
            return one_w ? cast_to<A>(r[b.i0]) : cast_to<A>(r[b.i0]) * b.l0 + cast_to<A>(r[b.i1]) * b.l1;
          };
          const A v = one_h ? row(r0) : row(r0) * a.l0 + row(r1) * a.l1;
          yp[oh * g.OW + ow] = cast_to<T>(v);
        }
      }
    });
  });
}

// gy: [N, C, OH, OW] -> gx: [N, C, IH, IW] (overwritten), accumulated in acc per plane.
void upsample_backward(const Tensor& gy, const Tensor& gx, const UpsampleGeometry& g) {
  dispatch_floating(gy.dtype(), "upsample", [&]<typename T>() {
    using A = acc_t<T>;
    const std::vector<UpsampleTap<A>> th = taps<A>(g.IH, g.OH, g, g.scale_h), tw = taps<A>(g.IW, g.OW, g, g.scale_w);
    const bool one_h = !g.linear || g.one_d || g.IH == g.OH, one_w = !g.linear || g.IW == g.OW;
    const T* GY = gy.data_ptr<T>();
    T* GX = gx.data_ptr<T>();
    if (!g.linear) {
      // Nearest's source index never decreases along a dim, so input row i (column j) takes the
      // output rows (columns) of one range [first[i], end[i]): each input row sums its block of
      // gy's rows, each element in the order of the loop below (the same values), with no
      // scattered adds into a plane of accumulators.
      struct Ranges {
        std::vector<int64_t> first, end;
      };
      auto ranges = [](const std::vector<UpsampleTap<A>>& taps, int64_t in) {
        Ranges r{std::vector<int64_t>(size_t(in), 0), std::vector<int64_t>(size_t(in), 0)};
        for (int64_t o = 0; o < int64_t(taps.size()); ++o) {
          const size_t i = size_t(taps[size_t(o)].i0);
          if (r.end[i] == 0) r.first[i] = o;
          r.end[i] = o + 1;
        }
        return r;
      };
      const Ranges rows = ranges(th, g.IH), cols = ranges(tw, g.IW);
      // Output columns in equal groups of k per input column (an integer scale): whole rows in
      // one loop, vectorized for k = 2.
      int64_t k = g.OW % g.IW == 0 ? g.OW / g.IW : 0;
      for (int64_t j = 0; j < g.IW && k > 0; ++j)
        if (cols.first[size_t(j)] != j * k || cols.end[size_t(j)] != (j + 1) * k) k = 0;
      for_each_plane(g, g.OH * g.OW, [&](int64_t p) {
        const T* gp = GY + p * g.OH * g.OW;
        T* xp = GX + p * g.IH * g.IW;
        std::vector<A> acc(size_t(g.IW));
        for (int64_t i = 0; i < g.IH; ++i) {
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t oh = rows.first[size_t(i)]; oh < rows.end[size_t(i)]; ++oh) {
            const T* gr = gp + oh * g.OW;
            if (k == 2) {
              for (int64_t j = 0; j < g.IW; ++j)
                acc[size_t(j)] = acc[size_t(j)] + cast_to<A>(gr[2 * j]) + cast_to<A>(gr[2 * j + 1]);
            } else {
              for (int64_t j = 0; j < g.IW; ++j) {
                A a = acc[size_t(j)];
                for (int64_t ow = cols.first[size_t(j)]; ow < cols.end[size_t(j)]; ++ow) a += cast_to<A>(gr[ow]);
                acc[size_t(j)] = a;
              }
            }
          }
          for (int64_t j = 0; j < g.IW; ++j) xp[i * g.IW + j] = cast_to<T>(acc[size_t(j)]);
        }
      });
      return;
    }
    for_each_plane(g, g.OH * g.OW, [&](int64_t p) {
      std::vector<A> acc(size_t(g.IH * g.IW), A(0));
      const T* gp = GY + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const UpsampleTap<A>& a = th[size_t(oh)];
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const UpsampleTap<A>& b = tw[size_t(ow)];
          const A v = cast_to<A>(gp[oh * g.OW + ow]);
          auto put = [&](int64_t h, A vh) {
            A* r = acc.data() + h * g.IW;
            if (one_w) {
              r[b.i0] += vh;
            } else {
              r[b.i0] += vh * b.l0;
              r[b.i1] += vh * b.l1;
            }
          };
          if (one_h) {
            put(a.i0, v);
          } else {
            put(a.i0, v * a.l0);
            put(a.i1, v * a.l1);
          }
        }
      }
      T* xp = GX + p * g.IH * g.IW;
      for (int64_t i = 0; i < g.IH * g.IW; ++i) xp[i] = cast_to<T>(acc[size_t(i)]);
    });
  });
}

}  // namespace mantissa::cpu
