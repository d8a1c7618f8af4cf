// Fused log-softmax + NLL (cross-entropy) on the CPU, forward and backward, one row
// of logits per task. Log-probabilities are (x - max) - log(sum): x - (max + log(sum))
// loses log(sum) to rounding for huge logits (3e6 + 0.69 rounds to 3e6 + 0.75 in fp32). So the
// backward recomputes each row's max and log(sum) (cheap passes over a row in cache) rather than
// reading the saved logsumexp; nothing of size [M, C] is stored besides the logits themselves.
// Logits of an [N, C, d...] input (a segmentation model's [N, C, H, W]) come as the class-strided
// view [N, S, C] of their own storage and are read in place: a block of kPositions adjacent
// positions at a time, vectorized across them, class by class (a transposing copy in and out
// and rows of a few classes had made fp32 [8, 21, 64, 64] 3.7x slower than PyTorch's).
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/nn_kernels.h"
#include "core/nn_math.h"

namespace mantissa::cpu {

namespace {

// The row's shift (its max; 0 for a row of -inf) and log(sum(exp(x - shift))).
template <typename A, typename T>
void row_shift(const T* x, int64_t C, A& mx, A& ls) {
  mx = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < C; ++c) {
    const A v = cast_to<A>(x[c]);
    mx = v > mx ? v : mx;  // not std::max: its reference return keeps the loop scalar
  }
  mx = math::softmax_shift(mx);
  A sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += math::exp_shifted_acc(cast_to<A>(x[c]) - mx);
  ls = std::log(sum);
}

// Logits [N, S, C] in one of the kernel's two layouts: rows (contiguous; S == 1 for a 2-D
// input) or the class-strided view of a contiguous [N, C, S] (strides C S, 1, S).
struct LogitsLayout {
  int64_t N, S, C;
  bool class_strided;
};
LogitsLayout logits_layout(const Tensor& t) {
  if (t.dim() == 2 || t.is_contiguous()) return {t.numel() / std::max<int64_t>(t.size(-1), 1), 1, t.size(-1), false};
  MT_CHECK(t.dim() == 3 && t.stride(1) == 1 && t.stride(2) == t.size(1) && t.stride(0) == t.size(1) * t.size(2),
           "cross_entropy", "internal: logits must be contiguous rows or a class-strided [N, S, C] view, got ",
           shape_str(t.sizes()), " with strides ", shape_str(t.strides()));
  MT_CHECK(t.size(2) <= std::numeric_limits<int32_t>::max(), "cross_entropy", "more than 2^31 - 1 classes (", t.size(2),
           ") in an [N, C, d...] input");
  return {t.size(0), t.size(1), t.size(2), true};
}

constexpr int64_t kPositions = 64;  // positions per block of the class-strided layout

// The shift (max; 0 for -inf) and log(sum(exp(x - shift))) of `len` adjacent positions whose
// class c lies at x + c S.
template <typename A, typename T>
void position_shifts(const T* x, int64_t C, int64_t S, int64_t len, A* mx, A* ls) {
  for (int64_t j = 0; j < len; ++j) mx[j] = -std::numeric_limits<A>::infinity();
  for (int64_t c = 0; c < C; ++c) {
    const T* xc = x + c * S;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      const A v = load_acc<A>(xc, j);
      mx[j] = v > mx[j] ? v : mx[j];
    }
  }
  A sum[kPositions];
  for (int64_t j = 0; j < len; ++j) {
    mx[j] = math::softmax_shift(mx[j]);
    sum[j] = 0;
  }
  for (int64_t c = 0; c < C; ++c) {
    const T* xc = x + c * S;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) sum[j] += math::exp_shifted_acc(load_acc<A>(xc, j) - mx[j]);
  }
  for (int64_t j = 0; j < len; ++j) ls[j] = std::log(sum[j]);
}

// Runs body(n, s0, len) over the position blocks of every sample on the pool.
template <typename F>
void for_each_position_block(const LogitsLayout& d, F body) {
  const int64_t blocks = (d.S + kPositions - 1) / kPositions;
  parallel_for(0, d.N * blocks, std::max<int64_t>(1, kParallelGrain / (kPositions * std::max<int64_t>(d.C, 1))),
               [&](int64_t b, int64_t e) {
                 for (int64_t k = b; k < e; ++k) {
                   const int64_t n = k / blocks, s0 = k % blocks * kPositions;
                   body(n, s0, std::min(kPositions, d.S - s0));
                 }
               });
}

// cross_entropy over the class-strided layout: loss and lse of positions n S + s.
template <typename T, typename A>
void cross_entropy_class_strided(const LogitsLayout& d, const T* X, const int64_t* t, const A* w, int64_t ignore_index,
                                 A s, A* L, A* Z) {
  const int64_t C = d.C, S = d.S;
  for_each_position_block(d, [&](int64_t n, int64_t s0, int64_t len) {
    const T* x = X + n * C * S + s0;
    A mx[kPositions], ls[kPositions], smooth[kPositions] = {};
    position_shifts<A>(x, C, S, len, mx, ls);
    if (s > 0) {
      for (int64_t c = 0; c < C; ++c) {
        const T* xc = x + c * S;
        const A wc = w ? w[c] : A(1);
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) smooth[j] += wc * (ls[j] - (load_acc<A>(xc, j) - mx[j]));
      }
    }
    for (int64_t j = 0; j < len; ++j) {
      const int64_t r = n * S + s0 + j, tc = t[r];
      Z[r] = mx[j] + ls[j];
      if (tc == ignore_index || tc < 0 || tc >= C) {  // out-of-range targets: rejected by the op
        L[r] = 0;
        continue;
      }
      L[r] = math::cross_entropy_loss(ls[j], load_acc<A>(x + tc * S, j) - mx[j], w ? w[tc] : A(1), s, A(C), smooth[j]);
    }
  });
}

// cross_entropy_backward over the class-strided layout, into gx of the same layout.
template <typename T, typename A>
void cross_entropy_backward_class_strided(const LogitsLayout& d, const A* G, const T* X, const int64_t* t, const A* w,
                                          int64_t ignore_index, A s, A wsum, T* GX) {
  const int64_t C = d.C, S = d.S;
  const A smooth = math::cross_entropy_grad_coefs(A(1), s, A(C), wsum).smooth;  // s / C, whatever the target
  for_each_position_block(d, [&](int64_t n, int64_t s0, int64_t len) {
    const int64_t off = n * C * S + s0, r0 = n * S + s0;
    const T* x = X + off;
    T* gx = GX + off;
    // Per position: the target class (int32) and whether the position counts (as A): int64 and
    // bool lanes kept GCC 12 from vectorizing the class loop (6.5 ns per element).
    A mx[kPositions], ls[kPositions], g[kPositions], a[kPositions], target_term[kPositions], counted[kPositions];
    int32_t tc[kPositions];
    position_shifts<A>(x, C, S, len, mx, ls);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t tj = t[r0 + j];
      const bool ignored = tj == ignore_index;
      const math::CrossEntropyGradCoefs<A> k =
          math::cross_entropy_grad_coefs(w && !ignored ? w[tj] : A(1), s, A(C), wsum);
      tc[j] = int32_t(tj);    // a class index (C < 2^31: checked by the caller)
      counted[j] = !ignored;  // an ignored position's gradient is 0, even beside a NaN logit
      g[j] = G[r0 + j];
      a[j] = k.a;
      target_term[j] = k.target_term;
    }
    for (int64_t c = 0; c < C; ++c) {
      const T* xc = x + c * S;
      T* gc = gx + c * S;
      const A sc = smooth * (w ? w[c] : A(1));
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) {
        const A p = math::exp_shifted_acc((load_acc<A>(xc, j) - mx[j]) - ls[j]);
        const A v = g[j] * math::cross_entropy_grad(p, int32_t(c) == tc[j], a[j], target_term[j], sc);
        store_acc(gc, j, counted[j] != A(0) ? v : A(0));
      }
    }
  });
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                   double label_smoothing, const Tensor& loss, const Tensor& lse) {
  const LogitsLayout d = logits_layout(logits);
  const int64_t C = d.C, M = target.numel();
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = logits.data_ptr<T>();
    const int64_t* t = target.data_ptr<int64_t>();
    const A* w = weight.defined() ? weight.data_ptr<A>() : nullptr;
    A* L = loss.data_ptr<A>();
    A* Z = lse.data_ptr<A>();
    const A s = A(label_smoothing);
    if (d.class_strided) {
      cross_entropy_class_strided(d, X, t, w, ignore_index, s, L, Z);
      return;
    }
    parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* x = X + r * C;
        A mx, ls;
        row_shift<A>(x, C, mx, ls);
        Z[r] = mx + ls;
        if (t[r] == ignore_index || t[r] < 0 || t[r] >= C) {  // out-of-range targets: rejected by the op
          L[r] = 0;
          continue;
        }
        const A wt = w ? w[t[r]] : A(1);
        A smooth = 0;
        if (s > 0) {
          if (w) {  // NOLINT(bugprone-branch-clone): the loops differ; clang-tidy 14 compares omp simd without them
#pragma omp simd reduction(+ : smooth)
            for (int64_t c = 0; c < C; ++c) smooth += w[c] * (ls - (cast_to<A>(x[c]) - mx));
          } else {
#pragma omp simd reduction(+ : smooth)
            for (int64_t c = 0; c < C; ++c) smooth += ls - (cast_to<A>(x[c]) - mx);
          }
        }
        L[r] = math::cross_entropy_loss(ls, cast_to<A>(x[t[r]]) - mx, wt, s, A(C), smooth);
      }
    });
  });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& logits, const Tensor& target, const Tensor& weight,
                            const Tensor& /*lse*/, int64_t ignore_index, double label_smoothing,
                            const Tensor& glogits) {
  const LogitsLayout d = logits_layout(logits);
  const int64_t C = d.C, M = target.numel();
  MT_CHECK(glogits.sizes() == logits.sizes() && glogits.strides() == logits.strides(), "cross_entropy",
           "internal: the gradient must have the logits' layout, got strides ", shape_str(glogits.strides()), " and ",
           shape_str(logits.strides()));
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = logits.data_ptr<T>();
    const int64_t* t = target.data_ptr<int64_t>();
    const A* w = weight.defined() ? weight.data_ptr<A>() : nullptr;
    const A* G = grad.data_ptr<A>();
    T* GX = glogits.data_ptr<T>();
    const A s = A(label_smoothing);
    A wsum = A(C);
    if (w) {
      wsum = 0;
      for (int64_t c = 0; c < C; ++c) wsum += w[c];
    }
    if (d.class_strided) {
      cross_entropy_backward_class_strided(d, G, X, t, w, ignore_index, s, wsum, GX);
      return;
    }
    parallel_for(0, M, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        T* gx = GX + r * C;
        if (t[r] == ignore_index) {
          for (int64_t c = 0; c < C; ++c) gx[c] = T(0);
          continue;
        }
        const T* x = X + r * C;
        A mx, ls;
        row_shift<A>(x, C, mx, ls);
        const A g = G[r];
        const A wt = w ? w[t[r]] : A(1);
        const math::CrossEntropyGradCoefs<A> k = math::cross_entropy_grad_coefs(wt, s, A(C), wsum);
        const int64_t tc = t[r];
        if (w) {  // NOLINT(bugprone-branch-clone): as above
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const A p = math::exp_shifted_acc((cast_to<A>(x[c]) - mx) - ls);
            gx[c] = cast_to<T>(g * math::cross_entropy_grad(p, c == tc, k.a, k.target_term, k.smooth * w[c]));
          }
        } else {
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) {
            const A p = math::exp_shifted_acc((cast_to<A>(x[c]) - mx) - ls);
            gx[c] = cast_to<T>(g * math::cross_entropy_grad(p, c == tc, k.a, k.target_term, k.smooth));
          }
        }
      }
    });
  });
}

}  // namespace mantissa::cpu
