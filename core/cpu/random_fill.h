// Counter-based normal and uniform draws (rand, randn, normal, uniform: core/random.cpp): element
// i of a fill is a function of (seed, i) alone, Philox4x32-10 (core/philox.h), so the threads
// split a tensor in any way and every run gives the same numbers. Floats take 24 random bits per
// uniform (4 per Philox block), doubles 53 (2 per block); a normal is Box-Muller's
// sqrt(-2 ln u1) cos / sin(2 pi u2) on one block's words, u1 in (0, 1].
#pragma once
#include <cstdint>

namespace mantissa::cpu {

// out[i] = mean + stddev * N_i (normal_fill) or low + (high - low) * U_i (uniform_fill), i < n.
void normal_fill(float* out, int64_t n, uint64_t seed, float mean, float stddev);
void normal_fill(double* out, int64_t n, uint64_t seed, double mean, double stddev);
void uniform_fill(float* out, int64_t n, uint64_t seed, float low, float high);
void uniform_fill(double* out, int64_t n, uint64_t seed, double low, double high);

}  // namespace mantissa::cpu
