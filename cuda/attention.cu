// Scaled dot-product attention and tril/triu on the GPU (contracts in core/nn_kernels.h).
//
// Attention runs as batched tensor-core GEMMs through score buffers (cuda/attention_gemm.cu)
// wherever core/attention_plan.h finds that they fit the memory budget (0, so never, unless
// cuda::set_attention_score_memory or MANTISSA_ATTENTION_SCORE_MEMORY sets one); otherwise
// here. The row kernels are memory-lean, not tensor-core fast: a block of kThreads threads
// per query row (forward, dQ) or per key row (dK, dV). Scores are recomputed from q . k
// whenever they are needed and never stored beyond one tile of kThreads values in shared
// memory, so memory stays O(L + S) per problem; softmax statistics and every sum are in fp32
// (fp64 for fp64). The forward stores the per-row log-sum-exp, from which backward
// recomputes P.
#include <cmath>

#include "core/philox.h"
#include "cuda/attention.cuh"
#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxPerThread = 8;  // output columns per thread: E, Ev <= kThreads * kMaxPerThread

template <typename A, typename T>
__device__ void load_row(A* dst, const T* src, int64_t n) {
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) dst[e] = cast_to<A>(src[e]);
}

// One block per query row (p, i). q [G, L, E], k [G, S, E], v [G, S, Ev] -> out [G, L, Ev],
// lse [G, L]. Shared: q row (E) and one tile of probabilities (kThreads).
template <typename T>
__global__ void attention_forward_kernel(Attn<acc_t<T>> a, const T* q, const T* k, const T* v, T* out, acc_t<T>* lse) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  A* qs = reinterpret_cast<A*>(smem);
  A* ps = qs + a.E;
  const int64_t row = blockIdx.x, p = row / a.L, i = row % a.L;
  const int64_t nk = a.visible(i);
  const T* kp = k + p * a.S * a.E;
  const T* vp = v + p * a.S * a.Ev;
  load_row(qs, q + row * a.E, a.E);
  __syncthreads();
  // Pass 1: the row's max and sum of exponentials (online per thread, then combined).
  A m = -INFINITY, l = 0;
  for (int64_t j = threadIdx.x; j < nk; j += blockDim.x) {
    const A s = score(a, p, i, j, qs, kp + j * a.E);
    if (s > m) {
      l = (m == -INFINITY ? l : l * exp(m - s)) + 1;  // l is 0 (or NaN) while m = -inf
      m = s;
    } else if (s != -INFINITY) {
      l += exp(s - m);
    }
  }
  // A thread with m = -inf saw only -inf and NaN: its l is 0, or NaN after a NaN. With M = -inf
  // (a NaN query) the sum is NaN unless every key is masked, and so the log-sum-exp and P are.
  const A M = block_allreduce(MaxValueOp<A>{}, m);
  const A sum = nn::block_sum(m == -INFINITY ? l : l * exp(m - M));
  const A row_lse = M == -INFINITY && sum == A(0) ? A(-INFINITY) : M + log(sum);
  if (threadIdx.x == 0) lse[row] = row_lse;
  // Pass 2: out = dropout(P) v, a tile of keys at a time.
  A acc[kMaxPerThread] = {};
  for (int64_t j0 = 0; j0 < nk; j0 += kThreads) {
    const int64_t j = j0 + threadIdx.x;
    A pj = 0;
    if (j < nk) pj = a.prob(score(a, p, i, j, qs, kp + j * a.E), row_lse) * a.drop(p, i, j);
    ps[threadIdx.x] = cast_to<A>(cast_to<T>(pj));  // P enters the second product in T
    __syncthreads();
    const int64_t n = min(int64_t(kThreads), nk - j0);
    for (int c = 0; c < kMaxPerThread; ++c) {
      const int64_t e = threadIdx.x + int64_t(c) * kThreads;
      if (e >= a.Ev) break;
      A s = 0;
      for (int64_t jj = 0; jj < n; ++jj) s += ps[jj] * cast_to<A>(vp[(j0 + jj) * a.Ev + e]);
      acc[c] += s;
    }
    __syncthreads();
  }
  for (int c = 0; c < kMaxPerThread; ++c) {
    const int64_t e = threadIdx.x + int64_t(c) * kThreads;
    if (e < a.Ev) out[row * a.Ev + e] = cast_to<T>(acc[c]);
  }
}

// One block per query row: D[row] = sum_j P dP and gq[row] = scale * sum_j P (dP - D) k[j],
// with dP = dropout(gout . v[j]). Shared: q row (E), gout row (Ev), a tile of dS (kThreads).
template <typename T>
__global__ void attention_backward_q_kernel(Attn<acc_t<T>> a, const T* gout, const T* q, const T* k, const T* v,
                                            const acc_t<T>* lse, acc_t<T>* D, T* gq) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  A* qs = reinterpret_cast<A*>(smem);
  A* gos = qs + a.E;
  A* ds = gos + a.Ev;
  const int64_t row = blockIdx.x, p = row / a.L, i = row % a.L;
  const int64_t nk = a.visible(i);
  const T* kp = k + p * a.S * a.E;
  const T* vp = v + p * a.S * a.Ev;
  load_row(qs, q + row * a.E, a.E);
  load_row(gos, gout + row * a.Ev, a.Ev);
  __syncthreads();
  const A row_lse = lse[row];
  auto grad_p = [&](int64_t j) {  // dP[i, j]
    A s = 0;
    for (int64_t e = 0; e < a.Ev; ++e) s += gos[e] * cast_to<A>(vp[j * a.Ev + e]);
    return s * a.drop(p, i, j);
  };
  A partial = 0;
  for (int64_t j = threadIdx.x; j < nk; j += blockDim.x)
    partial += a.prob(score(a, p, i, j, qs, kp + j * a.E), row_lse) * grad_p(j);
  const A d = nn::block_sum(partial);
  if (threadIdx.x == 0) D[row] = d;
  A acc[kMaxPerThread] = {};
  for (int64_t j0 = 0; j0 < nk; j0 += kThreads) {
    const int64_t j = j0 + threadIdx.x;
    A dsj = 0;
    if (j < nk) dsj = a.prob(score(a, p, i, j, qs, kp + j * a.E), row_lse) * (grad_p(j) - d);
    ds[threadIdx.x] = dsj;
    __syncthreads();
    const int64_t n = min(int64_t(kThreads), nk - j0);
    for (int c = 0; c < kMaxPerThread; ++c) {
      const int64_t e = threadIdx.x + int64_t(c) * kThreads;
      if (e >= a.E) break;
      A s = 0;
      for (int64_t jj = 0; jj < n; ++jj) s += ds[jj] * cast_to<A>(kp[(j0 + jj) * a.E + e]);
      acc[c] += s;
    }
    __syncthreads();
  }
  if (gq)
    for (int c = 0; c < kMaxPerThread; ++c) {
      const int64_t e = threadIdx.x + int64_t(c) * kThreads;
      if (e < a.E) gq[row * a.E + e] = cast_to<T>(acc[c] * a.scale);
    }
}

// One block per key row (p, j): gv[j] = sum_i dropout(P)[i, j] gout[i] and
// gk[j] = scale * sum_i dS[i, j] q[i], over the queries that see key j. Shared: k row (E),
// v row (Ev), tiles of dropout(P) and dS (kThreads each).
template <typename T>
__global__ void attention_backward_kv_kernel(Attn<acc_t<T>> a, const T* gout, const T* q, const T* k, const T* v,
                                             const acc_t<T>* lse, const acc_t<T>* D, T* gk, T* gv) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  A* ks = reinterpret_cast<A*>(smem);
  A* vs = ks + a.E;
  A* pds = vs + a.Ev;
  A* dss = pds + kThreads;
  const int64_t col = blockIdx.x, p = col / a.S, j = col % a.S;
  const int64_t first = a.causal ? j : 0;
  const T* qp = q + p * a.L * a.E;
  const T* gp = gout + p * a.L * a.Ev;
  load_row(ks, k + col * a.E, a.E);
  load_row(vs, v + col * a.Ev, a.Ev);
  __syncthreads();
  A acck[kMaxPerThread] = {}, accv[kMaxPerThread] = {};
  for (int64_t i0 = first; i0 < a.L; i0 += kThreads) {
    const int64_t i = i0 + threadIdx.x;
    A pd = 0, dsi = 0;
    if (i < a.L) {
      // score(q_i, k_j) with the roles of the shared and global rows swapped.
      A s = 0;
      for (int64_t e = 0; e < a.E; ++e) s += ks[e] * cast_to<A>(qp[i * a.E + e]);
      const A pij = a.prob(a.masked(p, i, j, s), lse[p * a.L + i]);
      const A dr = a.drop(p, i, j);
      A dpd = 0;
      for (int64_t e = 0; e < a.Ev; ++e) dpd += vs[e] * cast_to<A>(gp[i * a.Ev + e]);
      pd = pij * dr;
      dsi = pij * (dpd * dr - D[p * a.L + i]);
    }
    pds[threadIdx.x] = pd;
    dss[threadIdx.x] = dsi;
    __syncthreads();
    const int64_t n = min(int64_t(kThreads), a.L - i0);
    for (int c = 0; c < kMaxPerThread; ++c) {
      const int64_t e = threadIdx.x + int64_t(c) * kThreads;
      if (e < a.Ev) {
        A s = 0;
        for (int64_t ii = 0; ii < n; ++ii) s += pds[ii] * cast_to<A>(gp[(i0 + ii) * a.Ev + e]);
        accv[c] += s;
      }
      if (e < a.E) {
        A s = 0;
        for (int64_t ii = 0; ii < n; ++ii) s += dss[ii] * cast_to<A>(qp[(i0 + ii) * a.E + e]);
        acck[c] += s;
      }
    }
    __syncthreads();
  }
  for (int c = 0; c < kMaxPerThread; ++c) {
    const int64_t e = threadIdx.x + int64_t(c) * kThreads;
    if (gv && e < a.Ev) gv[col * a.Ev + e] = cast_to<T>(accv[c]);
    if (gk && e < a.E) gk[col * a.E + e] = cast_to<T>(acck[c] * a.scale);
  }
}

// out [G, R, C] = in inside the triangle, 0 outside (grid-stride over elements).
template <typename T>
__global__ void triangle_kernel(const T* in, T* out, int64_t n, int64_t R, int64_t C, int64_t diagonal, bool upper) {
  MT_GRID_LOOP(idx, n) {
    const int64_t c = idx % C, r = (idx / C) % R;
    const bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
    out[idx] = keep ? in[idx] : cast_to<T>(0);
  }
}

void check_widths(const AttentionGeometry& g) {
  MT_CHECK(g.E <= int64_t(kThreads) * kMaxPerThread && g.Ev <= int64_t(kThreads) * kMaxPerThread,
           "scaled_dot_product_attention", "the CUDA kernel supports head dims up to ", kThreads * kMaxPerThread,
           ", got E = ", g.E, ", Ev = ", g.Ev);
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                       const Tensor& lse, const AttentionGeometry& g) {
  const int64_t rows = g.B * g.H * g.L;
  if (rows == 0) return;
  if (const int64_t chunk = attention_gemm_chunk(g, q.dtype()); chunk > 0)
    return attention_forward_gemm(q, k, v, mask, out, lse, g, chunk);
  check_widths(g);
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    using A = acc_t<T>;
    const size_t shared = size_t(g.E + kThreads) * sizeof(A);
    attention_forward_kernel<T><<<unsigned(rows), kThreads, shared, current_stream(dev)>>>(
        device_geometry<T>(g, mask), dptr<const T>(q), dptr<const T>(k), dptr<const T>(v), dptr<T>(out), dptr<A>(lse));
    MT_CUDA_CHECK_LAUNCH();
  });
}

void attention_backward(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        const Tensor& /*out*/, const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                        const AttentionGeometry& g) {
  const int64_t G = g.B * g.H;
  if (G == 0) return;
  if (const int64_t chunk = attention_gemm_chunk(g, q.dtype()); chunk > 0)
    return attention_backward_gemm(gout, q, k, v, mask, lse, gq, gk, gv, g, chunk);
  check_widths(g);
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    using A = acc_t<T>;
    const Attn<A> a = device_geometry<T>(g, mask);
    Tensor D = make_tensor({G, g.L}, lse.dtype(), q.device());
    if (g.L > 0) {
      const size_t shared_q = size_t(g.E + g.Ev + kThreads) * sizeof(A);
      attention_backward_q_kernel<T><<<unsigned(G * g.L), kThreads, shared_q, stream>>>(
          a, dptr<const T>(gout), dptr<const T>(q), dptr<const T>(k), dptr<const T>(v), dptr<const A>(lse), dptr<A>(D),
          nn::opt_mut_ptr<T>(gq));
      MT_CUDA_CHECK_LAUNCH();
    }
    if ((gk.defined() || gv.defined()) && g.S > 0) {
      const size_t shared_kv = size_t(g.E + g.Ev + 2 * kThreads) * sizeof(A);
      attention_backward_kv_kernel<T><<<unsigned(G * g.S), kThreads, shared_kv, stream>>>(
          a, dptr<const T>(gout), dptr<const T>(q), dptr<const T>(k), dptr<const T>(v), dptr<const A>(lse),
          dptr<const A>(D), nn::opt_mut_ptr<T>(gk), nn::opt_mut_ptr<T>(gv));
      MT_CUDA_CHECK_LAUNCH();
    }
  });
}

void triangle(const Tensor& in, const Tensor& out, int64_t diagonal, bool upper) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = in.device().index;
  DeviceGuard guard(dev);
  dispatch_all(in.dtype(), [&]<typename T>() {
    triangle_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(dptr<const T>(in), dptr<T>(out), n,
                                                                             in.size(1), in.size(2), diagonal, upper);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
