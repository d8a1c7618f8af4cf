// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind dropout masks: element i of a stream is a pure function
// of (seed, i), so the CPU loop and the CUDA kernel draw the same mask from the same seed,
// in any order and on any number of threads. Checked against Random123's known answers
// (tests/test_random.cpp).
#pragma once
#include <cstdint>

#include "core/elementwise_math.h"

namespace mantissa::math {

struct Philox4 {
  uint32_t v[4];
};

constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;  // key schedule (Weyl) increments

// One Philox4x32 round on the counter words (v0..v3) with the round's key (k0, k1): plain
// scalars, so that a CPU loop can run it across vector lanes (core/cpu/dropout.cpp).
MT_HOST_DEVICE void philox_round(uint32_t& v0, uint32_t& v1, uint32_t& v2, uint32_t& v3, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  const uint64_t p0 = uint64_t(kM0) * v0, p1 = uint64_t(kM1) * v2;
  const uint32_t n0 = uint32_t(p1 >> 32) ^ v1 ^ k0, n2 = uint32_t(p0 >> 32) ^ v3 ^ k1;
  v1 = uint32_t(p1);
  v3 = uint32_t(p0);
  v0 = n0;
  v2 = n2;
}

// One Philox4x32 block: 10 rounds over the counter ctr with the key (k0, k1); round r uses
// the key advanced r times by the Weyl increments.
MT_HOST_DEVICE Philox4 philox4x32_10(Philox4 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    philox_round(ctr.v[0], ctr.v[1], ctr.v[2], ctr.v[3], k0, k1);
  }
  return ctr;
}

// Uniform in [0, 1) with 24 random bits (exact in fp32) for element i of the stream `seed`:
// block i / 4 of the counter sequence, word i % 4.
MT_HOST_DEVICE float philox_uniform(uint64_t seed, uint64_t i) {
  const uint64_t block = i >> 2;
  const Philox4 r =
      philox4x32_10({{uint32_t(block), uint32_t(block >> 32), 0u, 0u}}, uint32_t(seed), uint32_t(seed >> 32));
  return float(r.v[i & 3] >> 8) * (1.0f / 16777216.0f);
}

// Dropout: element i is kept (and scaled by 1 / (1 - p) by the caller) with probability
// keep_prob = 1 - p.
struct DropoutKeep {
  uint64_t seed;
  float keep_prob;
  MT_HOST_DEVICE bool operator()(uint64_t i) const { return philox_uniform(seed, i) < keep_prob; }
};

}  // namespace mantissa::math
