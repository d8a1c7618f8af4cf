// Row reductions over the last axis of a contiguous [rows, n] block (sum, prod, max, min,
// argmax, argmin), var_mean and softmax / log_softmax rows. Floats accumulate in fp32
// (fp64 for fp64), integers in int64. Semantics follow core/cpu/reduce.cpp: NaN wins a
// max/min (the first NaN for arg*), ties go to the lowest index, a row of -inf softmaxes
// without producing inf - inf.
//
// Work split: rows of up to 256 elements get one warp each; longer rows one block each;
// a few very long rows (e.g. a full sum) are cut into chunks reduced by many blocks, whose
// partial states a second pass combines. Reductions over leading dims (launch::reduce's
// [outer, cols, n] column view: bias gradients, broadcast backward, max over dim 0) read the
// columns in place, planned by core/column_plan.h, with the same two-pass split along n.
#include <cmath>

#include "core/column_plan.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"
#include "cuda/nn_kernels.h"
#include "cuda/rows.cuh"

namespace mantissa::cuda {

namespace {

// Accumulator of a reduction of T: fp32 for fp16/bf16/fp32, fp64 for fp64, int64 for
// integers and bool (the CPU accumulates uint8/int32 sums in their own type and wraps).
template <typename T>
using red_acc_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, acc_t<T>, int64_t>;

template <typename Acc>
struct ProdOp {
  using State = Acc;
  __device__ State identity() const { return Acc(1); }
  __device__ State load(Acc v, int64_t) const { return v; }
  __device__ State combine(State a, State b) const { return a * b; }
  __device__ State shfl(State s, int m) const { return shfl_xor(s, m); }
  template <typename Out>
  __device__ Out finish(State s) const {
    return cast_to<Out>(s);
  }
};

template <typename Acc>
struct ValueIndex {
  Acc v;
  int64_t i;  // -1: empty (the identity)
};

// max/min and argmax/argmin. combine() is symmetric (NaN first, then the better value,
// then the lower index), so the result does not depend on the reduction order.
template <typename Acc, bool kMax, bool kIndex>
struct ExtremeOp {
  using State = ValueIndex<Acc>;
  __device__ State identity() const { return {Acc(0), -1}; }
  __device__ State load(Acc v, int64_t i) const { return {v, i}; }
  __device__ State combine(State a, State b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) {
      if (an && bn) return a.i <= b.i ? a : b;
      return an ? a : b;
    }
    if (kMax ? a.v > b.v : a.v < b.v) return a;
    if (kMax ? b.v > a.v : b.v < a.v) return b;
    return a.i <= b.i ? a : b;
  }
  __device__ State shfl(State s, int m) const { return {shfl_xor(s.v, m), shfl_xor(s.i, m)}; }
  template <typename Out>
  __device__ Out finish(State s) const {
    if constexpr (kIndex)
      return cast_to<Out>(s.i);
    else
      return cast_to<Out>(s.v);
  }
};

template <typename T, typename Op>
struct RowSrc {
  const T* x;
  int64_t n;
  Op op;
  __device__ int64_t len(int64_t) const { return n; }
  __device__ typename Op::State get(int64_t r, int64_t i) const {
    return op.load(cast_to<red_acc_t<T>>(x[r * n + i]), i);
  }
};

template <typename T, typename Op>
struct ChunkSrc {  // virtual row vr = (row vr / chunks, chunk vr % chunks)
  const T* x;
  int64_t n, chunks, chunk;
  Op op;
  __device__ int64_t len(int64_t vr) const {
    const int64_t rest = n - (vr % chunks) * chunk;
    return rest < chunk ? rest : chunk;
  }
  __device__ typename Op::State get(int64_t vr, int64_t i) const {
    const int64_t j = (vr % chunks) * chunk + i;
    return op.load(cast_to<red_acc_t<T>>(x[(vr / chunks) * n + j]), j);
  }
};

template <typename S>
struct StateSrc {
  const S* p;
  int64_t chunks;
  __device__ int64_t len(int64_t) const { return chunks; }
  __device__ S get(int64_t r, int64_t i) const { return p[r * chunks + i]; }
};

template <typename S>
struct StateDst {
  S* p;
  __device__ void put(int64_t r, S s) const { p[r] = s; }
};

template <typename Out, typename Op>
struct OutDst {
  Out* y;
  Op op;
  __device__ void put(int64_t r, typename Op::State s) const { y[r] = op.template finish<Out>(s); }
};

// rows virtual rows of src.len(r) states each -> dst.put(r, combined state)
template <typename Op, typename Src, typename Dst>
__global__ void reduce_rows_kernel(Rows R, int64_t rows, Op op, Src src, Dst dst) {
  for (int64_t r = R.first(); r < rows; r += R.step()) {
    typename Op::State s = op.identity();
    const int64_t n = src.len(r);
    for (int64_t i = R.lane(); i < n; i += R.width()) s = op.combine(s, src.get(r, i));
    s = R.allreduce(op, s);
    if (R.lane() == 0) dst.put(r, s);
  }
}

template <typename Src, typename Dst, typename Op>
void launch_rows(const RowPlan& p, int64_t rows, const Op& op, const Src& src, const Dst& dst, cudaStream_t s) {
  reduce_rows_kernel<<<p.grid, p.block, 0, s>>>(p.team, rows, op, src, dst);
  MT_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Out, typename Op>
void run_reduce_rows(const Tensor& in, const Tensor& out, int64_t rows, int64_t n, const Op& op) {
  const int dev = in.device().index;
  const cudaStream_t stream = current_stream(dev);
  const T* x = dptr<const T>(in);
  Out* y = dptr<Out>(out);
  const int64_t sms = device_properties(dev).multiProcessorCount;
  if (rows >= sms || n < 65536) {
    launch_rows(plan_rows(rows, n, dev), rows, op, RowSrc<T, Op>{x, n, op}, OutDst<Out, Op>{y, op}, stream);
    return;
  }
  // Few long rows: pass 1 reduces ~4 blocks' worth of chunks per SM into partial states.
  using S = typename Op::State;
  const int64_t want = (4 * sms + rows - 1) / rows;
  const int64_t chunk = (n + want - 1) / want;
  const int64_t chunks = (n + chunk - 1) / chunk;
  Tensor tmp = make_tensor({int64_t(sizeof(S)) * rows * chunks}, DType::UInt8, in.device());
  S* partial = dptr<S>(tmp);
  launch_rows(plan_rows(rows * chunks, chunk, dev), rows * chunks, op, ChunkSrc<T, Op>{x, n, chunks, chunk, op},
              StateDst<S>{partial}, stream);
  launch_rows(plan_rows(rows, chunks, dev), rows, op, StateSrc<S>{partial, chunks}, OutDst<Out, Op>{y, op}, stream);
}

// Column reduction of launch::reduce's view x [outer, cols, n] (strides {so, 1, ld}): the
// plan and the thread geometry are core/column_plan.h's. Each block combines, per column, the
// states of its chunk of n: its kColumnDepth thread rows' partial states in shared memory, in
// row order. dst gets index (o * gridDim.y + chunk) * cols + c: the output [outer, cols] when
// there is one chunk, the partial states [outer, chunks, cols] otherwise.
template <typename T, typename Op>
struct ColumnSrc {
  const T* x;
  int64_t so, ld;
  Op op;
  __device__ typename Op::State get(int64_t o, int64_t c, int64_t i) const {
    return op.load(cast_to<red_acc_t<T>>(x[o * so + c + i * ld]), i);
  }
};

template <typename S>
struct ColumnStateSrc {  // partial states [outer, chunks, cols], combined over the chunks
  const S* p;
  int64_t chunks, cols;
  __device__ S get(int64_t o, int64_t c, int64_t i) const { return p[(o * chunks + i) * cols + c]; }
};

template <typename Op, typename Src, typename Dst>
__global__ void __launch_bounds__(column_reduce::kColumnWidth* column_reduce::kColumnDepth)
    reduce_columns_kernel(column_reduce::ColumnPlan plan, int64_t outer, int64_t cols, int64_t n, Op op, Src src,
                          Dst dst) {
  using namespace column_reduce;
  using S = typename Op::State;
  static_assert(sizeof(S) <= 16, "state too large for the shared buffer");
  __shared__ alignas(16) unsigned char raw[kColumnDepth * kColumnWidth * 16];
  S* part = reinterpret_cast<S*>(raw);
  const int64_t c = int64_t(blockIdx.x) * kColumnWidth + threadIdx.x;
  int64_t begin = 0, end = 0;
  column_chunk_range(plan, int64_t(blockIdx.y), n, begin, end);
  for (int64_t o = blockIdx.z; o < outer; o += gridDim.z) {
    S s = op.identity();
    if (c < cols)
      for (int64_t i = begin + threadIdx.y; i < end; i += kColumnDepth) s = op.combine(s, src.get(o, c, i));
    part[threadIdx.y * kColumnWidth + threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      for (int k = 1; k < kColumnDepth; ++k) s = op.combine(s, part[k * kColumnWidth + threadIdx.x]);
      dst.put((o * int64_t(gridDim.y) + blockIdx.y) * cols + c, s);
    }
    __syncthreads();  // `part` is reused by the next o
  }
}

template <typename Src, typename Dst, typename Op>
void launch_columns(const column_reduce::ColumnPlan& p, int64_t outer, int64_t cols, int64_t n, const Op& op,
                    const Src& src, const Dst& dst, cudaStream_t s) {
  const dim3 grid(unsigned(p.grid_x), unsigned(p.grid_y), unsigned(p.grid_z));
  const dim3 block(column_reduce::kColumnWidth, column_reduce::kColumnDepth);
  reduce_columns_kernel<<<grid, block, 0, s>>>(p, outer, cols, n, op, src, dst);
  MT_CUDA_CHECK_LAUNCH();
}

// in: the column view [outer, cols, n]; out: contiguous [outer * cols]. No transposing copy
// of the input (a bias gradient or the backward of a broadcast add reads its gradient once).
template <typename T, typename Out, typename Op>
void run_reduce_columns(const Tensor& in, const Tensor& out, const Op& op) {
  const int64_t outer = in.size(0), cols = in.size(1), n = in.size(2);
  const int dev = in.device().index;
  const cudaStream_t stream = current_stream(dev);
  const int64_t wanted = 4 * int64_t(device_properties(dev).multiProcessorCount);
  const column_reduce::ColumnPlan p = column_reduce::plan_columns(outer, cols, n, wanted);
  const ColumnSrc<T, Op> src{dptr<const T>(in), in.stride(0), in.stride(2), op};
  if (p.chunks == 1) {
    launch_columns(p, outer, cols, n, op, src, OutDst<Out, Op>{dptr<Out>(out), op}, stream);
    return;
  }
  using S = typename Op::State;
  Tensor tmp = make_tensor({int64_t(sizeof(S)) * outer * p.chunks * cols}, DType::UInt8, in.device());
  launch_columns(p, outer, cols, n, op, src, StateDst<S>{dptr<S>(tmp)}, stream);
  const column_reduce::ColumnPlan p2 = column_reduce::plan_columns(outer, cols, p.chunks, 0);
  launch_columns(p2, outer, cols, p.chunks, op, ColumnStateSrc<S>{dptr<const S>(tmp), p.chunks, cols},
                 OutDst<Out, Op>{dptr<Out>(out), op}, stream);
}

// launch::reduce's column view [outer, cols, n] (strides {so, 1, ld}), or else contiguous rows.
bool is_column_view(const Tensor& in) { return in.dim() == 3 && in.stride(1) == 1 && in.size(1) > 1; }

template <typename T, typename Out, typename Op>
void run_reduce(const Tensor& in, const Tensor& out, int64_t rows, int64_t n, const Op& op) {
  if (is_column_view(in))
    run_reduce_columns<T, Out>(in, out, op);
  else
    run_reduce_rows<T, Out>(in, out, rows, n, op);
}

// in: [rows, n] contiguous; var, mean: [rows]. Two passes over the row (mean, then the
// squared deviations), as the CPU does.
template <typename T>
__global__ void var_mean_kernel(Rows R, const T* x, T* var, T* mean, int64_t rows, int64_t n, int64_t correction) {
  using Acc = acc_t<T>;
  const SumOp<Acc> sum;
  for (int64_t r = R.first(); r < rows; r += R.step()) {
    const T* p = x + r * n;
    Acc s = 0;
    for (int64_t i = R.lane(); i < n; i += R.width()) s += cast_to<Acc>(p[i]);
    const Acc m = R.allreduce(sum, s) / Acc(n);
    Acc ss = 0;
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      const Acc d = cast_to<Acc>(p[i]) - m;
      ss += d * d;
    }
    ss = R.allreduce(sum, ss);
    if (R.lane() == 0) {
      const int64_t dof = n - correction;
      mean[r] = cast_to<T>(m);
      var[r] = cast_to<T>(dof > 0 ? ss / Acc(dof) : Acc(NAN));
    }
  }
}

// in, out: [rows, n] contiguous. out = softmax(in) or log_softmax(in) along n, in Acc;
// log_softmax is (x - max) - log(sum), which keeps log(sum) for huge logits.
template <typename T, typename O, typename Acc>
__global__ void softmax_kernel(Rows R, const T* x, O* y, int64_t rows, int64_t n, bool log) {
  for (int64_t r = R.first(); r < rows; r += R.step()) {
    const T* p = x + r * n;
    O* q = y + r * n;
    Acc mx = Acc(-INFINITY);
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      const Acc v = cast_to<Acc>(p[i]);
      mx = mx < v ? v : mx;
    }
    mx = R.allreduce(MaxValueOp<Acc>{}, mx);
    if (mx == Acc(-INFINITY)) mx = 0;  // a row of -inf: avoid inf - inf
    Acc sum = 0;
    for (int64_t i = R.lane(); i < n; i += R.width()) sum += std::exp(cast_to<Acc>(p[i]) - mx);
    sum = R.allreduce(SumOp<Acc>{}, sum);
    if (log) {
      const Acc ls = std::log(sum);
      for (int64_t i = R.lane(); i < n; i += R.width()) q[i] = cast_to<O>((cast_to<Acc>(p[i]) - mx) - ls);
    } else {
      const Acc inv = Acc(1) / sum;
      for (int64_t i = R.lane(); i < n; i += R.width()) q[i] = cast_to<O>(std::exp(cast_to<Acc>(p[i]) - mx) * inv);
    }
  }
}

// in, out: [outer, n, inner] contiguous, inner > 1: one thread per (outer, inner) column, the
// same formulas down n (adjacent threads read adjacent columns).
template <typename T, typename O, typename Acc>
__global__ void softmax_columns_kernel(const T* x, O* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < outer * inner;
       col += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = col / inner, c = col - o * inner;
    const T* p = x + o * n * inner + c;
    O* q = y + o * n * inner + c;
    Acc mx = Acc(-INFINITY);
    for (int64_t j = 0; j < n; ++j) {
      const Acc v = cast_to<Acc>(p[j * inner]);
      mx = mx < v ? v : mx;
    }
    if (mx == Acc(-INFINITY)) mx = 0;
    Acc sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(cast_to<Acc>(p[j * inner]) - mx);
    const Acc k = log ? Acc(std::log(sum)) : Acc(1) / sum;
    for (int64_t j = 0; j < n; ++j) {
      const Acc v = cast_to<Acc>(p[j * inner]) - mx;
      q[j * inner] = cast_to<O>(log ? v - k : std::exp(v) * k);
    }
  }
}

// y, g: [rows, n] (Y); gx: [rows, n] (G). softmax: gx = y * (g - sum(g * y)); log: gx = g - exp(y) * sum(g).
template <typename Y, typename G, typename Acc>
__global__ void softmax_backward_kernel(Rows R, const Y* y, const Y* g, G* gx, int64_t rows, int64_t n, bool log) {
  for (int64_t r = R.first(); r < rows; r += R.step()) {
    const Y* py = y + r * n;
    const Y* pg = g + r * n;
    G* q = gx + r * n;
    Acc s = 0;
    for (int64_t i = R.lane(); i < n; i += R.width())
      s += log ? cast_to<Acc>(pg[i]) : cast_to<Acc>(pg[i]) * cast_to<Acc>(py[i]);
    s = R.allreduce(SumOp<Acc>{}, s);
    for (int64_t i = R.lane(); i < n; i += R.width()) {
      const Acc vy = cast_to<Acc>(py[i]), vg = cast_to<Acc>(pg[i]);
      q[i] = cast_to<G>(log ? vg - std::exp(vy) * s : vy * (vg - s));
    }
  }
}

// As softmax_backward_kernel along the middle dim of [outer, n, inner], a thread per column.
template <typename Y, typename G, typename Acc>
__global__ void softmax_backward_columns_kernel(const Y* y, const Y* g, G* gx, int64_t outer, int64_t n, int64_t inner,
                                                bool log) {
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < outer * inner;
       col += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = col / inner, c = col - o * inner, base = o * n * inner + c;
    Acc s = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = base + j * inner;
      s += log ? cast_to<Acc>(g[i]) : cast_to<Acc>(g[i]) * cast_to<Acc>(y[i]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = base + j * inner;
      const Acc vy = cast_to<Acc>(y[i]), vg = cast_to<Acc>(g[i]);
      gx[i] = cast_to<G>(log ? vg - std::exp(vy) * s : vy * (vg - s));
    }
  }
}

template <typename A, typename B>
using pair_acc_t = std::conditional_t<std::is_same_v<A, double> || std::is_same_v<B, double>, double, float>;

// [outer, n] or [outer, n, inner].
void softmax_geometry(const Tensor& t, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = t.size(0);
  n = t.size(1);
  inner = t.dim() == 3 ? t.size(2) : 1;
}

void row_geometry(const Tensor& in, const Tensor& out, int64_t& rows, int64_t& n) {
  n = in.dim() ? in.size(-1) : 1;
  rows = n ? in.numel() / n : out.numel();
}

}  // namespace

void reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
  int64_t rows, n;
  row_geometry(in, out, rows, n);
  if (rows == 0) return;
  MT_CHECK(n > 0, "reduce", "cannot reduce an empty row on the GPU");  // launch::reduce fills these
  MT_CHECK(is_column_view(in) || in.is_contiguous(), "reduce",
           "the CUDA kernel expects a contiguous [rows, n] input or the [outer, cols, n] column view");
  DeviceGuard g(in.device().index);
  dispatch_all(in.dtype(), [&]<typename T>() {
    using Acc = red_acc_t<T>;
    // One output type per (op, T), as the CPU kernel: sums of bool/uint8/int32 are int64,
    // arg* are int64, everything else keeps T.
    using SumOut =
        std::conditional_t<std::is_same_v<T, bool> || std::is_same_v<T, uint8_t> || std::is_same_v<T, int32_t>, int64_t,
                           T>;
    auto expect = [&](DType want) {
      MT_CHECK(out.dtype() == want, "reduce", "the CUDA kernel writes ", dtype_name(want), " for a ",
               dtype_name(in.dtype()), " input, got an output of ", dtype_name(out.dtype()));
    };
    switch (op) {
      case ReduceOp::Sum:
        expect(std::is_same_v<SumOut, T> ? in.dtype() : DType::Int64);
        return run_reduce<T, SumOut>(in, out, rows, n, SumOp<Acc>{});
      case ReduceOp::Prod:
        expect(in.dtype());
        return run_reduce<T, T>(in, out, rows, n, ProdOp<Acc>{});
      case ReduceOp::Max:
        expect(in.dtype());
        return run_reduce<T, T>(in, out, rows, n, ExtremeOp<Acc, true, false>{});
      case ReduceOp::Min:
        expect(in.dtype());
        return run_reduce<T, T>(in, out, rows, n, ExtremeOp<Acc, false, false>{});
      case ReduceOp::ArgMax:
        expect(DType::Int64);
        return run_reduce<T, int64_t>(in, out, rows, n, ExtremeOp<Acc, true, true>{});
      case ReduceOp::ArgMin:
        expect(DType::Int64);
        return run_reduce<T, int64_t>(in, out, rows, n, ExtremeOp<Acc, false, true>{});
    }
  });
}

void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  int64_t rows, n;
  row_geometry(in, var, rows, n);
  if (rows == 0) return;
  MT_CHECK(in.is_contiguous(), "var", "the CUDA kernel expects a contiguous [rows, n] input");
  const int dev = in.device().index;
  DeviceGuard g(dev);
  dispatch_floating(in.dtype(), "var", [&]<typename T>() {
    const RowPlan p = plan_rows(rows, n, dev);
    const cudaStream_t s = current_stream(dev);
    var_mean_kernel<T>
        <<<p.grid, p.block, 0, s>>>(p.team, dptr<const T>(in), dptr<T>(var), dptr<T>(mean), rows, n, correction);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void softmax(const Tensor& in, const Tensor& out, bool log) {
  int64_t outer, n, inner;
  softmax_geometry(in, outer, n, inner);
  if (outer * n * inner == 0) return;
  MT_CHECK(in.is_contiguous() && out.is_contiguous(), "softmax", "the CUDA kernel expects contiguous rows");
  const int dev = in.device().index;
  DeviceGuard g(dev);
  dispatch_floating(in.dtype(), "softmax", [&]<typename T>() {
    dispatch_floating(out.dtype(), "softmax", [&]<typename O>() {
      using Acc = pair_acc_t<T, O>;
      const cudaStream_t s = current_stream(dev);
      if (inner == 1) {
        const RowPlan p = plan_rows(outer, n, dev);
        softmax_kernel<T, O, Acc><<<p.grid, p.block, 0, s>>>(p.team, dptr<const T>(in), dptr<O>(out), outer, n, log);
      } else {
        softmax_columns_kernel<T, O, Acc>
            <<<grid_for(outer * inner, dev), kBlock, 0, s>>>(dptr<const T>(in), dptr<O>(out), outer, n, inner, log);
      }
      MT_CUDA_CHECK_LAUNCH();
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  int64_t outer, n, inner;
  softmax_geometry(y, outer, n, inner);
  if (outer * n * inner == 0) return;
  MT_CHECK(gy.dtype() == y.dtype(), "softmax_backward", "the gradient's dtype ", dtype_name(gy.dtype()),
           " differs from the output's ", dtype_name(y.dtype()));
  const int dev = y.device().index;
  DeviceGuard g(dev);
  dispatch_floating(y.dtype(), "softmax_backward", [&]<typename Y>() {
    dispatch_floating(gx.dtype(), "softmax_backward", [&]<typename G>() {
      using Acc = pair_acc_t<Y, G>;
      const cudaStream_t s = current_stream(dev);
      if (inner == 1) {
        const RowPlan p = plan_rows(outer, n, dev);
        softmax_backward_kernel<Y, G, Acc>
            <<<p.grid, p.block, 0, s>>>(p.team, dptr<const Y>(y), dptr<const Y>(gy), dptr<G>(gx), outer, n, log);
      } else {
        softmax_backward_columns_kernel<Y, G, Acc><<<grid_for(outer * inner, dev), kBlock, 0, s>>>(
            dptr<const Y>(y), dptr<const Y>(gy), dptr<G>(gx), outer, n, inner, log);
      }
      MT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace mantissa::cuda
