// Embedding backward on the GPU (contract in core/nn_kernels.h), deterministic and without
// expanding the index to [tokens, dim]: the (row, position) pairs are sorted by row with a
// stable radix sort, so each row's tokens lie together in increasing position; one block per
// sorted position that starts a row then sums that row's gradient rows in fp32, in the same
// order as the CPU, and rounds once. No atomics, no host synchronisation.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"
#include "cuda/nn_kernels.h"

namespace mantissa::cuda {

namespace {

// keys [N] = index[n] when it is a kept row (in [0, num), not padding_idx), else num (skipped);
// positions [N] = n.
__global__ void embedding_keys_kernel(const int64_t* index, int64_t N, int64_t num, int64_t padding_idx, int64_t* keys,
                                      int64_t* positions) {
  MT_GRID_LOOP(n, N) {
    const int64_t v = index[n];
    keys[n] = v >= 0 && v < num && v != padding_idx ? v : num;
    positions[n] = n;
  }
}

// keys, positions: [N] sorted by key (stable); g: T [N, D]; out: T [num, D] (zeroed before).
// Block i handles the run of equal keys that starts at i, if one does.
template <typename T>
__global__ void embedding_rows_kernel(const int64_t* keys, const int64_t* positions, const T* g, T* out, int64_t N,
                                      int64_t num, int64_t D) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const int64_t r = keys[i];
    if (r >= num || (i > 0 && keys[i - 1] == r)) continue;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      A acc = 0;
      for (int64_t k = i; k < N && keys[k] == r; ++k) acc += cast_to<A>(g[positions[k] * D + d]);
      out[r * D + d] = cast_to<T>(acc);
    }
  }
}

int key_bits(int64_t num) {
  int bits = 1;
  while (bits < 63 && (int64_t(1) << bits) <= num) ++bits;
  return bits;
}

}  // namespace

void embedding_backward(const Tensor& grad, const Tensor& index, const Tensor& gweight, int64_t padding_idx) {
  const int64_t num = gweight.size(0), D = gweight.size(1), N = index.numel();
  const int dev = gweight.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  fill(gweight, 0);
  if (N == 0 || D == 0) return;
  const Device device = gweight.device();
  Tensor keys = make_tensor({N}, DType::Int64, device), pos = make_tensor({N}, DType::Int64, device);
  Tensor keys_sorted = make_tensor({N}, DType::Int64, device), pos_sorted = make_tensor({N}, DType::Int64, device);
  embedding_keys_kernel<<<grid_for(N, dev), kBlock, 0, stream>>>(dptr<const int64_t>(index), N, num, padding_idx,
                                                                 dptr<int64_t>(keys), dptr<int64_t>(pos));
  MT_CUDA_CHECK_LAUNCH();
  MT_CHECK(N <= INT32_MAX, "embedding", "backward over ", N, " tokens (at most 2^31 - 1)");
  const int bits = key_bits(num);
  size_t temp_bytes = 0;
  MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, dptr<const int64_t>(keys),
                                                dptr<int64_t>(keys_sorted), dptr<const int64_t>(pos),
                                                dptr<int64_t>(pos_sorted), int(N), 0, bits, stream));
  Tensor temp = make_tensor({int64_t(temp_bytes) + 1}, DType::UInt8, device);
  MT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, dptr<const int64_t>(keys),
                                                dptr<int64_t>(keys_sorted), dptr<const int64_t>(pos),
                                                dptr<int64_t>(pos_sorted), int(N), 0, bits, stream));
  const unsigned grid = unsigned(std::min<int64_t>(N, 65535));
  const int block = int(std::min<int64_t>(256, (D + 31) / 32 * 32));
  dispatch_floating(gweight.dtype(), "embedding", [&]<typename T>() {
    embedding_rows_kernel<T><<<grid, block, 0, stream>>>(dptr<const int64_t>(keys_sorted),
                                                         dptr<const int64_t>(pos_sorted), dptr<const T>(grad),
                                                         dptr<T>(gweight), N, num, D);
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
