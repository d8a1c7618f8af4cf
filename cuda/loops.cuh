// CUDA launch helpers: dtype dispatch to device storage types, conversions, compute
// types, and a strided N-operand indexer. The per-element math is not here: launchers
// apply the functors of core/elementwise_math.h, the same ones the CPU loops apply.
//
// Contiguous operands (after dim merging) that are 16-byte aligned take a vectorized path:
// each thread moves 16 bytes per operand per access (4 floats, 8 halves); everything else
// walks the strided indexer.
//
// Design constraints (as the CPU side): fp16/bf16 are storage types and every computation
// on them happens in fp32 (fp64 for fp64); a launcher writes `out` in out's shape with
// inputs broadcast (stride 0) or arbitrarily strided; every launch is checked.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "core/dtype_dispatch.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "cuda/device.h"

namespace mantissa::cuda {

template <typename T>
constexpr bool is_reduced_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// The device's fp16/bf16 conversions (round to nearest even).
struct Float16Convert {
  MT_HOST_DEVICE static float to_float(__half v) { return __half2float(v); }
  MT_HOST_DEVICE static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  MT_HOST_DEVICE static __half to_fp16(float f) { return __float2half_rn(f); }
  MT_HOST_DEVICE static __nv_bfloat16 to_bf16(float f) { return __float2bfloat16_rn(f); }
};

// This device's dtype dispatch and conversions (the CPU's rules: core/dtype_dispatch.h), and
// the dtype policy of the shared elementwise rules (core/elementwise_dispatch.h).
using Dtypes = DtypeDispatch<__half, __nv_bfloat16, Float16Convert>;
// The type arithmetic happens in: fp32 for every float type narrower than fp64.
template <typename T>
using acc_t = Dtypes::acc<T>;

template <typename T>
MT_HOST_DEVICE float to_float(T v) {
  return Float16Convert::to_float(v);
}

template <typename To, typename From>
MT_HOST_DEVICE To cast_to(From v) {
  return Dtypes::cast<To>(v);
}

// Calls f.template operator()<T>() with T the C++ type of `t` (core/dtype_dispatch.h).
template <typename F>
void dispatch_all(DType t, F&& f) {
  Dtypes::all(t, std::forward<F>(f));
}
template <typename F>
void dispatch_floating(DType t, const char* op, F&& f) {
  Dtypes::floating(t, op, std::forward<F>(f));
}

template <typename T>
T* dptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

// ---------------------------------------------------------------- strided indexing

constexpr int kMaxDims = 10;  // after coalescing; more throws a mantissa::Error
constexpr int kBlock = 256;

template <int N>
struct Offsets {
  int64_t v[N];
};

// Maps a linear index over out's shape to element offsets of N operands (operand 0 is
// usually `out`). Passed to kernels by value. `mode` picks the cheapest walk that is
// exact: 0 all contiguous, 1 one strided dim, 2 general with 32-bit div/mod, 3 64-bit.
template <int N>
struct Indexer {
  int ndim = 0;
  int mode = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // Calls body(offsets) for each of the n elements, grid-stride.
  template <typename Body>
  __device__ __forceinline__ void for_each(int64_t n, Body&& body) const {
    const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    Offsets<N> o;
    if (mode == 0) {
      for (int64_t i = start; i < n; i += step) {
#pragma unroll
        for (int k = 0; k < N; ++k) o.v[k] = i;
        body(o);
      }
    } else if (mode == 1) {
      for (int64_t i = start; i < n; i += step) {
#pragma unroll
        for (int k = 0; k < N; ++k) o.v[k] = i * strides[k][0];
        body(o);
      }
    } else if (mode == 2) {
      for (int64_t i = start; i < n; i += step) {
        uint32_t rem = uint32_t(i);
#pragma unroll
        for (int k = 0; k < N; ++k) o.v[k] = 0;
        for (int d = ndim - 1; d >= 0; --d) {
          const uint32_t s = uint32_t(sizes[d]);
          const uint32_t q = rem / s;
          const int64_t idx = int64_t(rem - q * s);
          rem = q;
#pragma unroll
          for (int k = 0; k < N; ++k) o.v[k] += idx * strides[k][d];
        }
        body(o);
      }
    } else {
      for (int64_t i = start; i < n; i += step) {
        int64_t rem = i;
#pragma unroll
        for (int k = 0; k < N; ++k) o.v[k] = 0;
        for (int d = ndim - 1; d >= 0; --d) {
          const int64_t q = rem / sizes[d];
          const int64_t idx = rem - q * sizes[d];
          rem = q;
#pragma unroll
          for (int k = 0; k < N; ++k) o.v[k] += idx * strides[k][d];
        }
        body(o);
      }
    }
  }
};

// Builds the indexer for `shape` and per-operand element strides (already broadcast to
// `shape`): drops size-1 dims and merges dims that are contiguous with each other in
// every operand, so a contiguous or simply broadcast op becomes 1-D.
template <int N>
Indexer<N> make_indexer(const Shape& shape, const std::array<Shape, N>& st, const char* op) {
  Indexer<N> ix;
  int64_t sizes[64];
  int64_t strides[N][64];
  int nd = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k) merge = strides[k][nd - 1] == st[k][d] * shape[d];
    if (merge) {
      sizes[nd - 1] *= shape[d];
      for (int k = 0; k < N; ++k) strides[k][nd - 1] = st[k][d];
    } else {
      MT_CHECK(nd < 64, op, "too many dimensions (", shape.size(), ")");
      sizes[nd] = shape[d];
      for (int k = 0; k < N; ++k) strides[k][nd] = st[k][d];
      ++nd;
    }
  }
  MT_CHECK(nd <= kMaxDims, op, "the CUDA kernels support at most ", kMaxDims, " non-mergeable dimensions, got ", nd,
           " for shape ", shape_str(shape));
  ix.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    ix.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) ix.strides[k][d] = strides[k][d];
  }
  const int64_t n = shape_numel(shape);
  bool unit = nd <= 1;
  for (int k = 0; k < N && unit && nd == 1; ++k) unit = strides[k][0] == 1;
  if (nd == 0) {  // one element: every offset is 0
    ix.ndim = 1;
    ix.sizes[0] = 1;
    ix.mode = 0;
  } else if (unit) {
    ix.mode = 0;
  } else if (nd == 1) {
    ix.mode = 1;
  } else {
    ix.mode = n <= int64_t(UINT32_MAX) ? 2 : 3;
  }
  return ix;
}

// Strides of `t` viewed as broadcast to `shape`.
inline Shape bstrides(const Tensor& t, const Shape& shape) { return broadcast_strides(t.sizes(), t.strides(), shape); }

// A grid for a grid-stride loop over n items: enough blocks to fill the GPU a few times
// over, not one block per element.
inline unsigned grid_for(int64_t n, int device, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  int64_t cap = int64_t(device_properties(device).multiProcessorCount) * 16;
  if (blocks > cap) blocks = cap;
  return unsigned(blocks < 1 ? 1 : blocks);
}

// ---------------------------------------------------------------- vectorized access

// V elements of T loaded or stored as one aligned access: 16 bytes (LDG.128 / STG.128) when
// sizeof(T) * V == 16. The contiguous fast paths below move every operand this way.
template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// Elements per access for a kernel reading In and writing Out: 16 bytes of the wider type.
template <typename In, typename Out>
constexpr int vec_width() {
  constexpr size_t wider = sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out);
  return wider >= 16 ? 1 : int(16 / wider);
}

template <typename T, int V>
bool vec_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * V) == 0;
}

// ---------------------------------------------------------------- unary / binary launchers

// in: broadcast/strided to out's shape; out: any strides.
// out[i] = Out(f(Acc(in[i])))
template <typename In, typename Out, typename Acc, typename F>
__global__ void unary_kernel(Indexer<2> ix, int64_t n, const In* x, Out* y, F f) {
  ix.for_each(n, [&](const Offsets<2>& o) { y[o.v[0]] = cast_to<Out>(f(cast_to<Acc>(x[o.v[1]]))); });
}

// in, out: contiguous [n], each aligned to its Vec<., V>. Grid-stride over the n / V
// vectors, then the n % V tail element by element.
// out[i] = Out(f(Acc(in[i])))
template <int V, typename In, typename Out, typename Acc, typename F>
__global__ void unary_vec_kernel(int64_t n, const In* x, Out* y, F f) {
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / V;
  for (int64_t i = start; i < nvec; i += step) {
    const Vec<In, V> a = reinterpret_cast<const Vec<In, V>*>(x)[i];
    Vec<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = cast_to<Out>(f(cast_to<Acc>(a.v[k])));
    reinterpret_cast<Vec<Out, V>*>(y)[i] = r;
  }
  for (int64_t i = nvec * V + start; i < n; i += step) y[i] = cast_to<Out>(f(cast_to<Acc>(x[i])));
}

template <typename In, typename Out, typename Acc, typename F>
void launch_unary(const Tensor& in, const Tensor& out, F f, const char* op) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  auto ix = make_indexer<2>(out.sizes(), {out.strides(), bstrides(in, out.sizes())}, op);
  const In* x = dptr<const In>(in);
  Out* y = dptr<Out>(out);
  constexpr int V = vec_width<In, Out>();
  if (V > 1 && ix.mode == 0 && vec_aligned<In, V>(x) && vec_aligned<Out, V>(y)) {
    unary_vec_kernel<V, In, Out, Acc, F><<<grid_for(n / V + 1, dev), kBlock, 0, current_stream(dev)>>>(n, x, y, f);
  } else {
    unary_kernel<In, Out, Acc, F><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(ix, n, x, y, f);
  }
  MT_CUDA_CHECK_LAUNCH();
}

// a, b: broadcast/strided to out's shape; out: any strides.
// out[i] = Out(f(Acc(a[i]), Acc(b[i])))
template <typename In, typename Out, typename Acc, typename F>
__global__ void binary_kernel(Indexer<3> ix, int64_t n, const In* a, const In* b, Out* y, F f) {
  ix.for_each(
      n, [&](const Offsets<3>& o) { y[o.v[0]] = cast_to<Out>(f(cast_to<Acc>(a[o.v[1]]), cast_to<Acc>(b[o.v[2]]))); });
}

// a, b, out: contiguous [n], each aligned to its Vec<., V>; walked as in unary_vec_kernel.
// out[i] = Out(f(Acc(a[i]), Acc(b[i])))
template <int V, typename In, typename Out, typename Acc, typename F>
__global__ void binary_vec_kernel(int64_t n, const In* a, const In* b, Out* y, F f) {
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = n / V;
  for (int64_t i = start; i < nvec; i += step) {
    const Vec<In, V> va = reinterpret_cast<const Vec<In, V>*>(a)[i];
    const Vec<In, V> vb = reinterpret_cast<const Vec<In, V>*>(b)[i];
    Vec<Out, V> r;
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = cast_to<Out>(f(cast_to<Acc>(va.v[k]), cast_to<Acc>(vb.v[k])));
    reinterpret_cast<Vec<Out, V>*>(y)[i] = r;
  }
  for (int64_t i = nvec * V + start; i < n; i += step) y[i] = cast_to<Out>(f(cast_to<Acc>(a[i]), cast_to<Acc>(b[i])));
}

template <typename In, typename Out, typename Acc, typename F>
void launch_binary(const Tensor& a, const Tensor& b, const Tensor& out, F f, const char* op) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  auto ix = make_indexer<3>(out.sizes(), {out.strides(), bstrides(a, out.sizes()), bstrides(b, out.sizes())}, op);
  const In* pa = dptr<const In>(a);
  const In* pb = dptr<const In>(b);
  Out* y = dptr<Out>(out);
  constexpr int V = vec_width<In, Out>();
  if (V > 1 && ix.mode == 0 && vec_aligned<In, V>(pa) && vec_aligned<In, V>(pb) && vec_aligned<Out, V>(y)) {
    binary_vec_kernel<V, In, Out, Acc, F>
        <<<grid_for(n / V + 1, dev), kBlock, 0, current_stream(dev)>>>(n, pa, pb, y, f);
  } else {
    binary_kernel<In, Out, Acc, F><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(ix, n, pa, pb, y, f);
  }
  MT_CUDA_CHECK_LAUNCH();
}

}  // namespace mantissa::cuda
