// Fused log-softmax + NLL (cross-entropy) on the GPU. Forward: a warp per row of up to 256
// classes, a block per longer row (max, then sum of exp, then the loss terms); backward: the
// same teams, recomputing each row's max and log(sum) (log-probabilities are (x - max) - log(sum);
// the saved logsumexp max + log(sum) loses log(sum) for huge logits). exp is math::exp_acc and
// the loss and gradient formulas come from core/nn_math.h, as on the CPU.
//
// Invalid targets: the op range-checks them first (launch::check_index_range, reported
// through the sticky device error at the next host read, core/index_check.h); the kernels
// write a 0 loss and a 0 gradient for a target outside [0, C) and read nothing out of bounds.
// No host synchronisation. Logits of an [N, C, d...] input arrive as the class-strided view
// [N, S, C] (the CPU reads it in place): here they are copied into rows first, and the gradient
// computed in rows is copied back into the view's layout.
#include "core/nn_math.h"
#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

// A row's shift (its max; 0 for a row of -inf) and log(sum(exp(x - shift))), reduced over the
// row's team; the forward and the backward both recompute them (as the CPU's row_shift).
template <typename T, typename A>
__device__ void row_shift(Rows R, const T* xr, int64_t C, A& mx, A& ls) {
  mx = -A(INFINITY);
  for (int64_t c = R.lane(); c < C; c += R.width()) {
    const A v = cast_to<A>(xr[c]);
    mx = mx < v ? v : mx;
  }
  mx = math::softmax_shift(R.max(mx));
  A se = 0;
  for (int64_t c = R.lane(); c < C; c += R.width()) se += math::exp_acc(cast_to<A>(xr[c]) - mx);
  ls = std::log(R.sum(se));
}

// logits: [M, C]; target: int64 [M]; w: acc [C] or null; loss, lse: acc [M].
// lse[r] = logsumexp(logits[r]); loss[r] = math::cross_entropy_loss(...), 0 where target == ignore_index.
template <typename T>
__global__ void cross_entropy_kernel(Rows R, const T* x, const int64_t* target, const acc_t<T>* w, int64_t ignore_index,
                                     acc_t<T> s, acc_t<T>* loss, acc_t<T>* lse, int64_t M, int64_t C) {
  using A = acc_t<T>;
  for (int64_t r = R.first(); r < M; r += R.step()) {
    const T* xr = x + r * C;
    A mx, ls;
    row_shift(R, xr, C, mx, ls);
    const int64_t t = target[r];  // uniform across the team, so the branches below are too
    if (R.lane() == 0) lse[r] = mx + ls;
    if (t == ignore_index || t < 0 || t >= C) {
      if (R.lane() == 0) loss[r] = 0;
      continue;
    }
    A smooth = 0;
    if (s > A(0)) {
      for (int64_t c = R.lane(); c < C; c += R.width()) smooth += (w ? w[c] : A(1)) * (ls - (cast_to<A>(xr[c]) - mx));
      smooth = R.sum(smooth);
    }
    if (R.lane() == 0) loss[r] = math::cross_entropy_loss(ls, cast_to<A>(xr[t]) - mx, w ? w[t] : A(1), s, A(C), smooth);
  }
}

// w: acc [C] -> out: acc [1], the sum (one block).
template <typename A>
__global__ void weight_sum_kernel(const A* w, A* out, int64_t C) {
  A s = 0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += w[c];
  s = nn::block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

// grad: acc [M]; logits, glogits: [M, C]; target: int64 [M]; w: acc [C] or null;
// wsum: acc [1] (sum of w) or null (then C). One team per row, as the forward:
// glogits[r, c] = grad[r] * math::cross_entropy_grad(exp((x - max) - log(sum)), ...), 0 in ignored rows.
template <typename T>
__global__ void cross_entropy_backward_kernel(Rows R, const acc_t<T>* grad, const T* x, const int64_t* target,
                                              const acc_t<T>* w, const acc_t<T>* wsum, int64_t ignore_index, acc_t<T> s,
                                              T* gx, int64_t M, int64_t C) {
  using A = acc_t<T>;
  for (int64_t r = R.first(); r < M; r += R.step()) {
    const T* xr = x + r * C;
    T* gr = gx + r * C;
    const int64_t t = target[r];                 // uniform across the team
    if (t == ignore_index || t < 0 || t >= C) {  // out-of-range targets were rejected by the forward
      for (int64_t c = R.lane(); c < C; c += R.width()) gr[c] = cast_to<T>(0.0f);
      continue;
    }
    A mx, ls;
    row_shift(R, xr, C, mx, ls);
    const math::CrossEntropyGradCoefs<A> k =
        math::cross_entropy_grad_coefs(w ? w[t] : A(1), s, A(C), wsum ? *wsum : A(C));
    const A g = grad[r];
    for (int64_t c = R.lane(); c < C; c += R.width()) {
      const A p = math::exp_acc((cast_to<A>(xr[c]) - mx) - ls);
      gr[c] = cast_to<T>(g * math::cross_entropy_grad(p, c == t, k.a, k.target_term, k.smooth * (w ? w[c] : A(1))));
    }
  }
}

// The logits as contiguous rows [M, C] (a copy of a class-strided view).
Tensor as_row_logits(const Tensor& logits) {
  if (logits.is_contiguous()) return logits;
  Tensor rows = make_tensor(logits.sizes(), logits.dtype(), logits.device());
  copy_same_device(logits, rows);
  return rows;
}

}  // namespace

void cross_entropy(const Tensor& logits_in, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                   double label_smoothing, const Tensor& loss, const Tensor& lse) {
  const int64_t C = logits_in.size(-1), M = target.numel();
  if (M == 0) return;
  const Tensor logits = as_row_logits(logits_in);
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    const RowPlan p = plan_rows(M, C, dev);
    cross_entropy_kernel<T><<<p.grid, p.block, 0, stream>>>(p.team, dptr<const T>(logits), dptr<const int64_t>(target),
                                                            nn::opt_ptr<A>(weight), ignore_index, A(label_smoothing),
                                                            dptr<A>(loss), dptr<A>(lse), M, C);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_backward(const Tensor& grad, const Tensor& logits_in, const Tensor& target, const Tensor& weight,
                            const Tensor& /*lse*/, int64_t ignore_index, double label_smoothing,
                            const Tensor& glogits_out) {
  const int64_t C = logits_in.size(-1), M = target.numel();
  if (M * C == 0) return;
  const Tensor logits = as_row_logits(logits_in);
  const Tensor glogits = glogits_out.is_contiguous()
                             ? glogits_out
                             : make_tensor(glogits_out.sizes(), glogits_out.dtype(), glogits_out.device());
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = acc_t<T>;
    Tensor wsum;
    if (weight.defined()) {
      wsum = make_tensor({1}, weight.dtype(), logits.device());
      weight_sum_kernel<A><<<1, 512, 0, stream>>>(dptr<const A>(weight), dptr<A>(wsum), C);
      MT_CUDA_CHECK_LAUNCH();
    }
    const RowPlan p = plan_rows(M, C, dev);
    cross_entropy_backward_kernel<T><<<p.grid, p.block, 0, stream>>>(
        p.team, dptr<const A>(grad), dptr<const T>(logits), dptr<const int64_t>(target), nn::opt_ptr<A>(weight),
        nn::opt_ptr<A>(wsum), ignore_index, A(label_smoothing), dptr<T>(glogits), M, C);
    MT_CUDA_CHECK_LAUNCH();
  });
  if (!glogits.is_same(glogits_out)) copy_same_device(glogits, glogits_out);
}

}  // namespace mantissa::cuda
