// The dropout mask on the CPU: the counter-based draw of core/philox.h, shared with CUDA.
#include <bit>
#include <cmath>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/philox.h"

namespace mantissa::cpu {

// out: contiguous [n] (any shape), floating. Element i keeps philox_uniform(seed, i) < 1 - p,
// word i % 4 of Philox block i / 4: each block is drawn once for its four elements (drawing it
// per element did the 10 rounds four times), kLanes blocks at a time across vector lanes.
void dropout_mask(const Tensor& out, double p, uint64_t seed) {
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    // philox_uniform(seed, i) < keep_prob, with u = (word >> 8) * 2^-24 exact: the same test on
    // the integer (word >> 8) against ceil(keep_prob * 2^24).
    const float keep_prob = float(1.0 - p);
    const uint32_t threshold = uint32_t(std::ceil(double(keep_prob) * 16777216.0));
    const T scale = cast_to<T>(1.0 / (1.0 - p)), zero = cast_to<T>(0.0);
    const uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
    // Written as the values' bits (U: an unsigned type of T's size): Eigen's 16-bit float
    // structs made the select below scalar.
    using U = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
    U* y = static_cast<U*>(out.raw_data());
    const U scale_bits = std::bit_cast<U>(scale), zero_bits = std::bit_cast<U>(zero);
    parallel_for(0, out.numel(), kParallelGrain / 8, [&](int64_t b, int64_t e) {
      // Local copies: a captured reference in the select below made GCC gather from &scale / &zero.
      const U kept = scale_bits, dropped = zero_bits;
      constexpr int64_t kLanes = 16;
      uint32_t v0[kLanes], v1[kLanes], v2[kLanes], v3[kLanes];
      for (int64_t blk0 = b >> 2; blk0 * 4 < e; blk0 += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) {  // the counters: block number, then zeros
          v0[l] = uint32_t(uint64_t(blk0 + l));
          v1[l] = uint32_t(uint64_t(blk0 + l) >> 32);
          v2[l] = v3[l] = 0;
        }
        uint32_t r0 = k0, r1 = k1;
        for (int round = 0; round < 10; ++round) {  // as math::philox4x32_10, a round across the lanes
          if (round > 0) {
            r0 += math::kPhiloxW0;
            r1 += math::kPhiloxW1;
          }
#pragma omp simd
          for (int64_t l = 0; l < kLanes; ++l) math::philox_round(v0[l], v1[l], v2[l], v3[l], r0, r1);
        }
        // Words in element order (element 4 l + w is word w of lane l), then a vector loop.
        uint32_t words[4 * kLanes];
        for (int64_t l = 0; l < kLanes; ++l) {
          words[4 * l] = v0[l];
          words[4 * l + 1] = v1[l];
          words[4 * l + 2] = v2[l];
          words[4 * l + 3] = v3[l];
        }
        const int64_t base = blk0 * 4, first = std::max(b, base), last = std::min(e, base + 4 * kLanes);
#pragma omp simd
        for (int64_t i = first; i < last; ++i) y[i] = (words[i - base] >> 8) < threshold ? kept : dropped;
      }
    });
  });
}

}  // namespace mantissa::cpu
