// index_select, gather and scatter_add; shapes and index geometry in core/index_math.h. Index
// values are range-checked by launch::check_index_range (check_index_kernel below, which
// reports through the sticky error record, core/index_check.h) without a host
// synchronisation, so these kernels cannot trust them: an out-of-range value reads 0 and
// scatters nothing.
#include "core/index_math.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {

// Moving elements needs only their size: one kernel per element width, not per dtype.
template <typename F>
void dispatch_width(DType t, F&& f) {
  switch (element_size(t)) {
    case 1:
      return f.template operator()<uint8_t>();
    case 2:
      return f.template operator()<uint16_t>();
    case 4:
      return f.template operator()<uint32_t>();
    default:
      return f.template operator()<uint64_t>();
  }
}

Tensor contig(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_same_device(t, c);
  return c;
}

// idx: int64 [n]. The first value outside [0, bound) (and != ignore when has_ignore) is
// written to *rec with `code`; later ones find the code set and leave the record alone.
__global__ void check_index_kernel(const int64_t* idx, int64_t n, int64_t bound, bool has_ignore, int64_t ignore,
                                   IndexErrorRecord* rec, int32_t code) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = idx[p];
    if ((v >= 0 && v < bound) || (has_ignore && v == ignore)) continue;
    if (atomicCAS(&rec->code, 0, code) == 0) {
      rec->position = p;
      rec->value = v;
      rec->bound = bound;
      __threadfence_system();
    }
  }
}

// p: the flat position in out.
template <typename E>
__global__ void index_select_kernel(const E* x, const int64_t* idx, E* y, int64_t total, math::IndexGeometry g) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = idx[g.j_at(p)];
    y[p] = v >= 0 && v < g.n ? x[g.data_offset_at(p, v)] : E(0);
  }
}

// p: the flat position in index and out.
template <typename E>
__global__ void gather_kernel(const E* x, const int64_t* idx, E* y, int64_t total, math::IndexGeometry g) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = idx[p];
    y[p] = v >= 0 && v < g.n ? x[g.data_offset_at(p, v)] : E(0);
  }
}

// Byte-wide atomics do not exist: update the aligned 32-bit word that holds the byte.
// The word stays inside the allocation, whose blocks are multiples of 512 bytes.
__device__ void atomic_add_byte(uint8_t* addr, unsigned v, bool logical_or) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  unsigned* word = reinterpret_cast<unsigned*>(a & ~uintptr_t(3));
  const unsigned shift = unsigned(a & 3) * 8;
  if (logical_or) {
    if (v) atomicOr(word, 1u << shift);
    return;
  }
  unsigned old = *word, assumed;
  do {
    assumed = old;
    const unsigned byte = ((assumed >> shift) + v) & 0xffu;
    old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (byte << shift));
  } while (assumed != old);
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    atomic_add_byte(reinterpret_cast<uint8_t*>(p), v ? 1u : 0u, true);  // bool + bool saturates: OR
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    atomic_add_byte(p, v, false);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    // Two's complement: unsigned wrap-around addition is signed addition.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    atomicAdd(p, v);  // float, double, int32, __half (sm_70+), __nv_bfloat16 (sm_80+)
  }
}

// p: the flat position in index and src.
template <typename T>
__global__ void scatter_add_kernel(T* y, const int64_t* idx, const T* s, int64_t total, math::IndexGeometry g) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = idx[p];
    if (v >= 0 && v < g.n) atomic_add(&y[g.data_offset_at(p, v)], s[p]);
  }
}

}  // namespace

void check_index(const Tensor& index, int64_t bound, bool has_ignore, int64_t ignore, int32_t code) {
  const int64_t n = index.numel();
  if (n == 0) return;
  const int dev = index.device().index;
  DeviceGuard g(dev);
  check_index_kernel<<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(
      dptr<const int64_t>(index), n, bound, has_ignore, ignore, index_error_record(dev), code);
  MT_CUDA_CHECK_LAUNCH();
}

void index_select(const Tensor& in0, int64_t dim, const Tensor& index0, const Tensor& out) {
  MT_CHECK(out.is_contiguous(), "index_select", "the CUDA kernel expects a contiguous output");
  const int64_t total = out.numel();
  if (total == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  Tensor in = contig(in0), index = contig(index0);
  const math::IndexGeometry geometry = math::index_select_geometry(in, dim, index);
  dispatch_width(in.dtype(), [&]<typename E>() {
    index_select_kernel<E><<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(
        dptr<const E>(in), dptr<const int64_t>(index), dptr<E>(out), total, geometry);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void gather(const Tensor& in0, int64_t dim, const Tensor& index0, const Tensor& out) {
  MT_CHECK(out.is_contiguous(), "gather", "the CUDA kernel expects a contiguous output");
  const int64_t total = out.numel();
  if (total == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  Tensor in = contig(in0), index = contig(index0);
  const math::IndexGeometry geometry = math::gather_geometry(in, dim, index);
  dispatch_width(in.dtype(), [&]<typename E>() {
    gather_kernel<E><<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(
        dptr<const E>(in), dptr<const int64_t>(index), dptr<E>(out), total, geometry);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index0, const Tensor& src0) {
  MT_CHECK(out.is_contiguous(), "scatter_add", "the CUDA kernel expects a contiguous output");
  const int64_t total = index0.numel();
  if (total == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  Tensor index = contig(index0), src = contig(src0);
  const math::IndexGeometry geometry = math::gather_geometry(out, dim, index);
  dispatch_all(out.dtype(), [&]<typename T>() {
    scatter_add_kernel<T><<<grid_for(total, dev), kBlock, 0, current_stream(dev)>>>(
        dptr<T>(out), dptr<const int64_t>(index), dptr<const T>(src), total, geometry);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
