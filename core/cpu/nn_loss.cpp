// Fused log-softmax + NLL (cross-entropy) on the CPU, forward and backward, one row
// of logits per task. Log-probabilities are (x - max) - log(sum): x - (max + log(sum))
// loses log(sum) to rounding for huge logits (3e6 + 0.69 rounds to 3e6 + 0.75 in fp32). So the
// backward recomputes each row's max and log(sum) (cheap passes over a row in cache) rather than
// reading the saved logsumexp; nothing of size [M, C] is stored besides the logits themselves.
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

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                   double label_smoothing, const Tensor& loss, const Tensor& lse) {
  const int64_t C = logits.size(-1), M = target.numel();
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    const T* X = logits.data_ptr<T>();
    const int64_t* t = target.data_ptr<int64_t>();
    const A* w = weight.defined() ? weight.data_ptr<A>() : nullptr;
    A* L = loss.data_ptr<A>();
    A* Z = lse.data_ptr<A>();
    const A s = A(label_smoothing);
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
  const int64_t C = logits.size(-1), M = target.numel();
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
