// Interpolation (nearest, linear, bilinear) on the CPU, one [IH, IW] -> [OH, OW] plane per
// task. Source indices and weights come from core/nn_kernels.h (upsample_nearest_source,
// upsample_linear_tap), shared with cuda/nn_upsample.cu; they are tabulated once per call.
#include <algorithm>
#include <utility>
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

// This thread's scratch buffer number Slot of at least n elements, contents unspecified: the
// per-plane loops below would otherwise allocate per plane (a [16, 64, 32, 32] call: 3000).
template <typename A, int Slot>
A* scratch(size_t n) {
  thread_local std::vector<A> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// A linear dim's taps as arrays (the gather loops below vectorize over them).
template <typename A>
struct LinearTaps {
  std::vector<int64_t> i0, i1;
  std::vector<A> l0, l1;
  explicit LinearTaps(const std::vector<UpsampleTap<A>>& t) {
    for (const auto& k : t) {
      i0.push_back(k.i0);
      i1.push_back(k.i1);
      l0.push_back(k.l0);
      l1.push_back(k.l1);
    }
  }
};

// The adjoint of a linear dim as gathers: input index j takes tap weight w[k][j] of output
// out[k][j] for k < width, in output order, the rows padded with an index that reads 0 (one
// past the output row: the caller puts a 0 there). A scatter of each output into its two inputs
// made a chain of dependent read-modify-writes of the same few elements; per j, a list of
// (output, weight) pairs did not vectorize (bilinear 2x of [16, 64, 32, 32] backward 10.8 and
// 7.7 ms, PyTorch's about 10).
template <typename A>
struct LinearAdjoint {
  int64_t width = 0;
  std::vector<int32_t> out;  // [width, in]
  std::vector<A> weight;     // [width, in]
  LinearAdjoint(const std::vector<UpsampleTap<A>>& t, int64_t in, bool one) {
    std::vector<std::vector<std::pair<int32_t, A>>> terms(static_cast<size_t>(in));
    for (int64_t o = 0; o < int64_t(t.size()); ++o) {
      const auto& k = t[size_t(o)];
      terms[size_t(k.i0)].push_back({int32_t(o), one ? A(1) : k.l0});
      if (!one) terms[size_t(k.i1)].push_back({int32_t(o), k.l1});
    }
    for (const auto& tj : terms) width = std::max<int64_t>(width, int64_t(tj.size()));
    out.assign(size_t(width * in), int32_t(t.size()));
    weight.assign(size_t(width * in), A(0));
    for (int64_t j = 0; j < in; ++j)
      for (size_t k = 0; k < terms[size_t(j)].size(); ++k) {
        out[k * size_t(in) + size_t(j)] = terms[size_t(j)][k].first;
        weight[k * size_t(in) + size_t(j)] = terms[size_t(j)][k].second;
      }
  }
};

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
    // Separably, in torch's order: each input row interpolated along w once (into one of two
    // row slots, reused while the output rows still read it), then each output row the blend
    // of its two rows' slots, a vector loop. Per element, each output gathered four inputs and
    // their two taps (bilinear 2x of [16, 64, 32, 32]: 7.5 ms, PyTorch's time).
    const LinearTaps<A> w(tw);
    for_each_plane(g, g.OH * g.OW, [&](int64_t p) {
      const T* xp = X + p * g.IH * g.IW;
      T* yp = Y + p * g.OH * g.OW;
      A* slots = scratch<A, 0>(2 * size_t(g.OW));
      int64_t held[2] = {-1, -1};
      // Input row i along w, in a slot other than the one holding row `keep`.
      auto row_along_w = [&](int64_t i, int64_t keep) -> const A* {
        for (int s = 0; s < 2; ++s)
          if (held[s] == i) return slots + s * g.OW;
        const int s = held[0] == keep ? 1 : 0;
        A* out = slots + s * g.OW;
        const T* r = xp + i * g.IW;
        const int64_t* i0 = w.i0.data();
        const int64_t* i1 = w.i1.data();
        const A* l0 = w.l0.data();
        const A* l1 = w.l1.data();
        if (one_w) {
          for (int64_t ow = 0; ow < g.OW; ++ow) out[ow] = cast_to<A>(r[i0[ow]]);
        } else {
#pragma omp simd
          for (int64_t ow = 0; ow < g.OW; ++ow)
            out[ow] = cast_to<A>(r[i0[ow]]) * l0[ow] + cast_to<A>(r[i1[ow]]) * l1[ow];
        }
        held[s] = i;
        return out;
      };
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const UpsampleTap<A>& a = th[size_t(oh)];
        const A* u0 = row_along_w(a.i0, one_h ? -1 : a.i1);
        T* yr = yp + oh * g.OW;
        if (one_h) {
          map_acc<A>(u0, yr, g.OW, [](A v) { return v; });
          continue;
        }
        const A* u1 = row_along_w(a.i1, a.i0);
        const A l0 = a.l0, l1 = a.l1;
        map_acc<A>(u0, u1, yr, g.OW, [l0, l1](A v0, A v1) { return v0 * l0 + v1 * l1; });
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
        A* acc = scratch<A, 0>(size_t(g.IW));
        for (int64_t i = 0; i < g.IH; ++i) {
          std::fill(acc, acc + g.IW, A(0));
          for (int64_t oh = rows.first[size_t(i)]; oh < rows.end[size_t(i)]; ++oh) {
            const T* gr = gp + oh * g.OW;
            if (k == 2) {
              for (int64_t j = 0; j < g.IW; ++j) acc[j] = acc[j] + cast_to<A>(gr[2 * j]) + cast_to<A>(gr[2 * j + 1]);
            } else {
              for (int64_t j = 0; j < g.IW; ++j) {
                A a = acc[j];
                for (int64_t ow = cols.first[size_t(j)]; ow < cols.end[size_t(j)]; ++ow) a += cast_to<A>(gr[ow]);
                acc[j] = a;
              }
            }
          }
          for (int64_t j = 0; j < g.IW; ++j) xp[i * g.IW + j] = cast_to<T>(acc[j]);
        }
      });
      return;
    }
    // The forward's adjoint, separably: along h, each gy row added into its two input rows'
    // accumulators times their h weights (vector loops); along w, gathers (LinearAdjoint).
    // Upsampling (OH >= IH) takes h first, so the gathers run once per input row on rows of
    // the output's width; downsampling takes w first, once per output row. Per element, four
    // scattered read-modify-writes waited on each other (bilinear 2x of [16, 64, 32, 32]
    // backward 10.8 ms against 4.0; PyTorch's ~10).
    const LinearAdjoint<A> wt(tw, g.IW, one_w);
    const bool h_first = g.OH >= g.IH;
    for_each_plane(g, g.OH * g.OW, [&](int64_t p) {
      // acc: [IH, pitch], rows of the output's width (h first) or the input's; a gathered row
      // reads a trailing 0 for the gathers' padding.
      const int64_t pitch = h_first ? g.OW + 1 : g.IW;
      A* acc = scratch<A, 0>(size_t(g.IH * pitch));
      A* along_w = scratch<A, 1>(size_t(g.IW));
      A* gr = scratch<A, 2>(size_t(g.OW) + 1);
      std::fill(acc, acc + g.IH * pitch, A(0));
      gr[g.OW] = 0;
      // u[j] (j < IW) = the adjoint along w of the row r (r[OW] = 0).
      auto back_along_w = [&](const A* r, A* u) {
#pragma omp simd
        for (int64_t j = 0; j < g.IW; ++j) u[j] = 0;
        for (int64_t k = 0; k < wt.width; ++k) {
          const int32_t* o = wt.out.data() + k * g.IW;
          const A* wk = wt.weight.data() + k * g.IW;
#pragma omp simd
          for (int64_t j = 0; j < g.IW; ++j) u[j] += r[o[j]] * wk[j];
        }
      };
      const T* gp = GY + p * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const UpsampleTap<A>& a = th[size_t(oh)];
        map_acc<A>(gp + oh * g.OW, gr, g.OW, [](A v) { return v; });
        const A* src = gr;
        int64_t len = g.OW;
        if (!h_first) {
          back_along_w(gr, along_w);
          src = along_w;
          len = g.IW;
        }
        auto add_into = [&](int64_t h, A l) {
          A* r = acc + h * pitch;
#pragma omp simd
          for (int64_t o = 0; o < len; ++o) r[o] += src[o] * l;
        };
        add_into(a.i0, one_h ? A(1) : a.l0);
        if (!one_h) add_into(a.i1, a.l1);
      }
      T* xp = GX + p * g.IH * g.IW;
      for (int64_t i = 0; i < g.IH; ++i) {
        const A* u = acc + i * pitch;
        if (h_first) {
          back_along_w(u, along_w);
          u = along_w;
        }
        map_acc<A>(u, xp + i * g.IW, g.IW, [](A v) { return v; });
      }
    });
  });
}

}  // namespace mantissa::cpu
