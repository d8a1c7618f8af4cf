// Embedding backward on the CPU (contract in core/nn_kernels.h): the tokens are bucketed by
// row (a counting sort, stable in token order), then each row sums its tokens' gradient rows
// in the accumulation type and rounds once, rows in parallel. Same order and rounding as the
// CUDA kernel, so both devices give the same bits.
#include <vector>

#include "core/cpu/loops.h"
#include "core/nn_kernels.h"

namespace mantissa::cpu {

void embedding_backward(const Tensor& grad, const Tensor& index, const Tensor& gweight, int64_t padding_idx) {
  const int64_t num = gweight.size(0), D = gweight.size(1), N = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  auto kept = [&](int64_t v) { return v >= 0 && v < num && v != padding_idx; };
  // start[r] .. start[r + 1]: the tokens of row r in `order`, in increasing position.
  std::vector<int64_t> start(static_cast<size_t>(num) + 1, 0), order(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    if (kept(idx[n])) ++start[size_t(idx[n]) + 1];
  for (int64_t r = 0; r < num; ++r) start[size_t(r) + 1] += start[size_t(r)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t n = 0; n < N; ++n)
      if (kept(idx[n])) order[size_t(fill[size_t(idx[n])]++)] = n;
  }
  dispatch_floating(gweight.dtype(), "embedding", [&]<typename T>() {
    using A = acc_t<T>;
    const T* g = grad.data_ptr<T>();
    T* out = gweight.data_ptr<T>();
    parallel_for(0, num, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
      std::vector<A> acc(static_cast<size_t>(D));
      for (int64_t r = b; r < e; ++r) {
        const int64_t k0 = start[size_t(r)], k1 = start[size_t(r) + 1];
        T* o = out + r * D;
        A* a = acc.data();
        if (k0 == k1) {  // no token: the row is zero
          for (int64_t d = 0; d < D; ++d) o[d] = T(0);
          continue;
        }
        // The first token's row starts the sum as 0 + row (not a copy: -0 becomes +0, as the
        // sum from zero on the GPU gives), saving a pass that zeroes the accumulator.
        const T* row0 = g + order[size_t(k0)] * D;
        if constexpr (std::is_same_v<A, T>) {
          if (k1 - k0 == 1) {  // one token, in the accumulation type already: straight to the row
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) o[d] = A(0) + row0[d];
            continue;
          }
        }
        // load_acc / narrow_block, not cast_to: GCC vectorizes no loop over Eigen's bf16 struct
        // (the bf16 backward ran at half the fp32 one's element rate).
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) a[d] = A(0) + load_acc<A>(row0, d);
        for (int64_t k = k0 + 1; k < k1; ++k) {
          const T* row = g + order[size_t(k)] * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) a[d] += load_acc<A>(row, d);
        }
        if constexpr (std::is_same_v<A, float>) {
          narrow_block(a, o, D);
        } else {
          for (int64_t d = 0; d < D; ++d) o[d] = cast_to<T>(a[d]);
        }
      }
    });
  });
}

}  // namespace mantissa::cpu
