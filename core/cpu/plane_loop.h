// The per-plane loop of the CPU pooling and upsampling kernels.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/cpu/loops.h"

namespace mantissa::cpu {

// Calls f(plane) for each of the g.N * g.C [H, W] planes of a geometry (Pool2dGeometry,
// UpsampleGeometry), in parallel chunks of about kParallelGrain elements of work.
template <typename Geometry, typename F>
void for_each_plane(const Geometry& g, int64_t work_per_plane, F&& f) {
  parallel_for(0, g.N * g.C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work_per_plane, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t p = b; p < e; ++p) f(p);
               });
}

}  // namespace mantissa::cpu
