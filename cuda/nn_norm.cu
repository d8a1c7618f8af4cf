// Layer norm (rows of [M, n]), group norm (its rows: groups) and batch norm (channels of
// [N, C, S]) on the GPU.
// Statistics are two-pass (mean, then centred squares) in the accumulation type, as on the
// CPU. Layer norm: a warp per row up to 256 elements, a block per longer row; its weight and
// bias gradients are column sums, done in row chunks and combined in a fixed order.
// Batch norm: a block per channel for the reductions, one thread per element for apply.
// Element formulas (inv_std, normalize, norm_backward) come from core/nn_math.h.
#include "core/nn_math.h"
#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

using nn::opt_mut_ptr;
using nn::opt_ptr;

// Which weight / bias element multiplies element i of row r: layer norm's column i, or group
// norm's channel (rows: the [N, G] groups of C / G channels, each S positions long).
struct ColumnParam {
  __device__ int64_t operator()(int64_t, int64_t i) const { return i; }
};
struct GroupChannelParam {
  int64_t G, Cg, S;
  __device__ int64_t operator()(int64_t r, int64_t i) const { return r % G * Cg + i / S; }
};

// x, y: [M, n]; w, b: acc (indexed by param) or null; mean, rstd: acc [M].
// y = (x - mean) * rstd * w + b with each row's mean and 1 / sqrt(var + eps).
template <typename T, typename Param>
__global__ void layer_norm_kernel(Rows R, const T* x, const acc_t<T>* w, const acc_t<T>* b, acc_t<T> eps, T* y,
                                  acc_t<T>* mean, acc_t<T>* rstd, int64_t M, int64_t n, Param param) {
  using A = acc_t<T>;
  for (int64_t r = R.first(); r < M; r += R.step()) {
    const T* xr = x + r * n;
    A s = 0;
    for (int64_t i = R.lane(); i < n; i += R.width()) s += cast_to<A>(xr[i]);
    const A m = R.sum(s) / A(n);
    A ss = 0;
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      const A d = cast_to<A>(xr[i]) - m;
      ss += d * d;
    }
    const A rs = math::inv_std(R.sum(ss) / A(n), eps);
    if (R.lane() == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    T* yr = y + r * n;
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      A h = math::normalize(cast_to<A>(xr[i]), m, rs);
      if (w) h *= w[param(r, i)];
      if (b) h += b[param(r, i)];
      yr[i] = cast_to<T>(h);
    }
  }
}

// gy, x, gx: [M, n]; mean, rstd: acc [M]; w: acc [n] or null.
// gx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, with g = gy * w.
template <typename T, typename Param>
__global__ void layer_norm_backward_kernel(Rows R, const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                                           const acc_t<T>* w, T* gx, int64_t M, int64_t n, Param param) {
  using A = acc_t<T>;
  for (int64_t r = R.first(); r < M; r += R.step()) {
    const T* xr = x + r * n;
    const T* gr = gy + r * n;
    const A m = mean[r], rs = rstd[r];
    A sg = 0, sgx = 0;
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      const A g = cast_to<A>(gr[i]) * (w ? w[param(r, i)] : A(1));
      sg += g;
      sgx += g * math::normalize(cast_to<A>(xr[i]), m, rs);
    }
    const A mg = R.sum(sg) / A(n), mgx = R.sum(sgx) / A(n);
    T* gxr = gx + r * n;
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      const A g = cast_to<A>(gr[i]) * (w ? w[param(r, i)] : A(1));
      gxr[i] = cast_to<T>(math::norm_backward(g, math::normalize(cast_to<A>(xr[i]), m, rs), rs, mg, mgx));
    }
  }
}

constexpr int kColTile = 32, kRowLanes = 8;

// gy, x: [M, n]; mean, rstd: acc [M]; pw, pb: acc [chunks, n] (either may be null).
// pw[k, i] = sum of gy * xhat and pb[k, i] = sum of gy over the rows of chunk k (blockIdx.y).
// Block (32, 8): 32 columns, 8 row lanes whose sums are added in shared memory.
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                                                 acc_t<T>* pw, acc_t<T>* pb, int64_t M, int64_t n,
                                                 int64_t rows_per_chunk) {
  using A = acc_t<T>;
  __shared__ A sw[kRowLanes][kColTile + 1], sb[kRowLanes][kColTile + 1];
  const int64_t i = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
  A aw = 0, ab = 0;
  if (i < n)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const A g = cast_to<A>(gy[r * n + i]);
      aw += g * math::normalize(cast_to<A>(x[r * n + i]), mean[r], rstd[r]);
      ab += g;
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && i < n) {
    for (int k = 1; k < kRowLanes; ++k) {
      aw += sw[k][threadIdx.x];
      ab += sb[k][threadIdx.x];
    }
    if (pw) pw[int64_t(blockIdx.y) * n + i] = aw;
    if (pb) pb[int64_t(blockIdx.y) * n + i] = ab;
  }
}

// p: acc [chunks, n] -> out: acc [n], summed over chunks in order.
template <typename A>
__global__ void sum_chunks_kernel(const A* p, A* out, int64_t chunks, int64_t n) {
  MT_GRID_LOOP(i, n) {
    A s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += p[k * n + i];
    out[i] = s;
  }
}

// gy, x: [N, C, S] as N C rows of S; mean, rstd: acc [N, G] (row r's group: r / Cg).
// pw[r] = sum of gy * xhat and pb[r] = sum of gy over row r (either may be null).
template <typename T>
__global__ void group_norm_param_partials_kernel(Rows R, const T* gy, const T* x, const acc_t<T>* mean,
                                                 const acc_t<T>* rstd, acc_t<T>* pw, acc_t<T>* pb, int64_t rows,
                                                 int64_t S, int64_t Cg) {
  using A = acc_t<T>;
  for (int64_t r = R.first(); r < rows; r += R.step()) {
    const A m = mean[r / Cg], rs = rstd[r / Cg];
    A aw = 0, ab = 0;
    for (int64_t i = R.lane(); i < S; i += R.width()) {
      const A g = cast_to<A>(gy[r * S + i]);
      aw += g * math::normalize(cast_to<A>(x[r * S + i]), m, rs);
      ab += g;
    }
    aw = R.sum(aw);
    ab = R.sum(ab);
    if (R.lane() == 0) {
      if (pw) pw[r] = aw;
      if (pb) pb[r] = ab;
    }
  }
}

// x: [N, C, S]; mean, var: acc [C]. Per channel: mean, then the biased variance around it.
template <typename T>
__global__ void batch_norm_stats_kernel(const T* x, acc_t<T>* mean, acc_t<T>* var, int64_t N, int64_t C, int64_t S) {
  using A = acc_t<T>;
  const A count = A(N * S);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const A m = nn::channel_block_sum<A>(c, N, C, S, [&](int64_t o) { return cast_to<A>(x[o]); }) / count;
    const A ss = nn::channel_block_sum<A>(c, N, C, S, [&](int64_t o) {
      const A d = cast_to<A>(x[o]) - m;
      return d * d;
    });
    if (threadIdx.x == 0) {
      mean[c] = m;
      var[c] = ss / count;
    }
  }
}

// x, y: [N, C, S]; scale, shift: acc [C]. y = x * scale[c] + shift[c].
template <typename T>
__global__ void batch_norm_apply_kernel(const T* x, const acc_t<T>* scale, const acc_t<T>* shift, T* y, int64_t C,
                                        int64_t S, int64_t total) {
  using A = acc_t<T>;
  MT_GRID_LOOP(i, total) {
    const int64_t c = (i / S) % C;
    y[i] = cast_to<T>(cast_to<A>(x[i]) * scale[c] + shift[c]);
  }
}

// gy, x, gx: [N, C, S]; mean, invstd, w: acc [C]; gw, gb: acc [C] (each output may be null).
// gb = sum gy, gw = sum gy * xhat, gx = w * invstd * (gy - [training] (mean(gy) + xhat * mean(gy * xhat))).
template <typename T>
__global__ void batch_norm_backward_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* invstd,
                                           const acc_t<T>* w, bool training, T* gx, acc_t<T>* gw, acc_t<T>* gb,
                                           int64_t N, int64_t C, int64_t S) {
  using A = acc_t<T>;
  const A count = A(N * S);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const A m = mean[c], is = invstd[c], wc = w[c];
    const A sg = nn::channel_block_sum<A>(c, N, C, S, [&](int64_t o) { return cast_to<A>(gy[o]); });
    const A sgx =
        nn::channel_block_sum<A>(c, N, C, S, [&](int64_t o) { return cast_to<A>(gy[o]) * (cast_to<A>(x[o]) - m); });
    if (threadIdx.x == 0) {
      if (gb) gb[c] = sg;
      if (gw) gw[c] = sgx * is;
    }
    if (!gx) continue;
    // In terms of g = w * gy: mean(g) and mean(g * xhat) over the channel.
    const A mg = training ? wc * sg / count : A(0);
    const A mgx = training ? wc * sgx * is / count : A(0);
    for (int64_t i = threadIdx.x; i < N * S; i += blockDim.x) {
      const int64_t n = i / S, o = (n * C + c) * S + (i - n * S);
      gx[o] = cast_to<T>(
          math::norm_backward(wc * cast_to<A>(gy[o]), math::normalize(cast_to<A>(x[o]), m, is), is, mg, mgx));
    }
  }
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y, const Tensor& mean,
                const Tensor& rstd) {
  const int64_t n = x.size(-1), M = n ? x.numel() / n : 0;
  if (M == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const RowPlan p = plan_rows(M, n, dev);
    layer_norm_kernel<T><<<p.grid, p.block, 0, current_stream(dev)>>>(p.team, dptr<const T>(x), opt_ptr<A>(w),
                                                                      opt_ptr<A>(b), A(eps), dptr<T>(y), dptr<A>(mean),
                                                                      dptr<A>(rstd), M, n, ColumnParam{});
    MT_CUDA_CHECK_LAUNCH();
  });
}

void layer_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w,
                         const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  const int64_t n = x.size(-1), M = n ? x.numel() / n : 0;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using A = acc_t<T>;
    if (gx.defined() && M > 0) {
      const RowPlan p = plan_rows(M, n, dev);
      layer_norm_backward_kernel<T><<<p.grid, p.block, 0, stream>>>(p.team, dptr<const T>(gy), dptr<const T>(x),
                                                                    dptr<const A>(mean), dptr<const A>(rstd),
                                                                    opt_ptr<A>(w), dptr<T>(gx), M, n, ColumnParam{});
      MT_CUDA_CHECK_LAUNCH();
    }
    if (!gw.defined() && !gb.defined()) return;
    if (M == 0) {
      if (gw.defined()) fill(gw, 0);
      if (gb.defined()) fill(gb, 0);
      return;
    }
    // About four blocks per SM in total, each chunk at least 32 rows.
    const int64_t col_tiles = (n + kColTile - 1) / kColTile;
    const int64_t want = std::max<int64_t>(1, 4 * device_properties(dev).multiProcessorCount / col_tiles);
    const int64_t chunks = std::min<int64_t>({want, (M + 31) / 32, 65535});
    const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
    Tensor pw = gw.defined() ? make_tensor({chunks, n}, gw.dtype(), x.device()) : Tensor();
    Tensor pb = gb.defined() ? make_tensor({chunks, n}, gb.dtype(), x.device()) : Tensor();
    layer_norm_param_partials_kernel<T>
        <<<dim3(unsigned(col_tiles), unsigned(chunks)), dim3(kColTile, kRowLanes), 0, stream>>>(
            dptr<const T>(gy), dptr<const T>(x), dptr<const A>(mean), dptr<const A>(rstd), opt_mut_ptr<A>(pw),
            opt_mut_ptr<A>(pb), M, n, rows_per_chunk);
    MT_CUDA_CHECK_LAUNCH();
    for (auto [part, out] : {std::pair{pw, gw}, {pb, gb}}) {
      if (!out.defined()) continue;
      sum_chunks_kernel<A><<<grid_for(n, dev), kBlock, 0, stream>>>(dptr<const A>(part), dptr<A>(out), chunks, n);
      MT_CUDA_CHECK_LAUNCH();
    }
  });
}

// Group norm: layer norm's row kernels over the [N G] groups (rows of C / G * S), each element's
// weight and bias those of its channel; gw and gb from per-(sample, channel) sums added over the
// samples in order.
void group_norm(const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), M = N * groups, n = C / groups * S;
  if (M == 0 || n == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "group_norm", [&]<typename T>() {
    using A = acc_t<T>;
    const RowPlan p = plan_rows(M, n, dev);
    layer_norm_kernel<T><<<p.grid, p.block, 0, current_stream(dev)>>>(
        p.team, dptr<const T>(x), opt_ptr<A>(w), opt_ptr<A>(b), A(eps), dptr<T>(y), dptr<A>(mean), dptr<A>(rstd), M, n,
        GroupChannelParam{groups, C / groups, S});
    MT_CUDA_CHECK_LAUNCH();
  });
}

void group_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& w,
                         int64_t groups, const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), M = N * groups, n = C / groups * S;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  dispatch_floating(x.dtype(), "group_norm", [&]<typename T>() {
    using A = acc_t<T>;
    if (gx.defined() && M > 0 && n > 0) {
      const RowPlan p = plan_rows(M, n, dev);
      layer_norm_backward_kernel<T><<<p.grid, p.block, 0, stream>>>(
          p.team, dptr<const T>(gy), dptr<const T>(x), dptr<const A>(mean), dptr<const A>(rstd), opt_ptr<A>(w),
          dptr<T>(gx), M, n, GroupChannelParam{groups, C / groups, S});
      MT_CUDA_CHECK_LAUNCH();
    }
    if (!gw.defined() && !gb.defined()) return;
    if (N == 0 || S == 0) {
      if (gw.defined()) fill(gw, 0);
      if (gb.defined()) fill(gb, 0);
      return;
    }
    Tensor pw = gw.defined() ? make_tensor({N, C}, gw.dtype(), x.device()) : Tensor();
    Tensor pb = gb.defined() ? make_tensor({N, C}, gb.dtype(), x.device()) : Tensor();
    const RowPlan p = plan_rows(N * C, S, dev);
    group_norm_param_partials_kernel<T><<<p.grid, p.block, 0, stream>>>(
        p.team, dptr<const T>(gy), dptr<const T>(x), dptr<const A>(mean), dptr<const A>(rstd), opt_mut_ptr<A>(pw),
        opt_mut_ptr<A>(pb), N * C, S, C / groups);
    MT_CUDA_CHECK_LAUNCH();
    for (auto [part, out] : {std::pair{pw, gw}, {pb, gb}}) {
      if (!out.defined()) continue;
      sum_chunks_kernel<A><<<grid_for(C, dev), kBlock, 0, stream>>>(dptr<const A>(part), dptr<A>(out), N, C);
      MT_CUDA_CHECK_LAUNCH();
    }
  });
}

void batch_norm_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  int64_t N, C, S;
  batch_norm_dims(x, N, C, S);
  if (C == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using A = acc_t<T>;
    batch_norm_stats_kernel<T><<<nn::channel_grid(C, dev), 512, 0, current_stream(dev)>>>(
        dptr<const T>(x), dptr<A>(mean), dptr<A>(var), N, C, S);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_apply(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y) {
  int64_t N, C, S;
  batch_norm_dims(x, N, C, S);
  const int64_t total = x.numel();
  if (total == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using A = acc_t<T>;
    batch_norm_apply_kernel<T><<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(
        dptr<const T>(x), dptr<const A>(scale), dptr<const A>(shift), dptr<T>(y), C, S, total);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& w,
                         bool training, const Tensor& gx, const Tensor& gw, const Tensor& gb) {
  int64_t N, C, S;
  batch_norm_dims(x, N, C, S);
  if (C == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using A = acc_t<T>;
    batch_norm_backward_kernel<T><<<nn::channel_grid(C, dev), 512, 0, current_stream(dev)>>>(
        dptr<const T>(gy), dptr<const T>(x), dptr<const A>(mean), dptr<const A>(invstd), dptr<const A>(w), training,
        opt_mut_ptr<T>(gx), opt_mut_ptr<A>(gw), opt_mut_ptr<A>(gb), N, C, S);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
