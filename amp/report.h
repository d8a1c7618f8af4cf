// Where precision went in a profiled run under autocast: built from a stopped
// profiler::Profile (core/profile.h), as a struct and as text.
//
//   mt::profiler::Profile prof;
//   for (...) { { mt::amp::Autocast ac(mt::kHalf); loss = ...; } scaler.backward(loss); ... }
//   prof.stop();
//   mt::amp::AmpReport r = mt::amp::amp_report(prof);
//   std::cout << r.str();
//
// What it reads: each op's compute dtype and FLOPs; the op that last consulted the autocast
// policy before each kernel (autocast notes its decision, so the kernels that follow on the
// thread are attributed to it); the "autocast_cast" and "working_copy_cast" ranges around the
// casts autocast inserts; working-copy cache hits; the loss scale GradScaler::update() notes.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/profile.h"

namespace mantissa::amp {

struct AmpReport {
  // FLOPs of matmul/conv/attention kernels (forward and backward) by the dtype they computed in.
  std::map<DType, double> gemm_flops;
  double reduced_flop_share() const;  // fp16 + bf16 over all

  // Kernels that ran in fp32 under autocast because the op that launched them has the fp32
  // policy (softmax, losses, norms, reductions), grouped by that op.
  struct Fp32Op {
    std::string op;       // the policy's op ("cross_entropy")
    int64_t kernels = 0;  // kernels launched under it
    double ms = 0;
    std::vector<std::string> kernel_names;  // distinct, in order of appearance
  };
  std::vector<Fp32Op> fp32_ops;  // by time, largest first

  // Casts autocast inserted: of activations (and other non-parameters), and of fp32 master
  // weights into their cached working copies.
  struct Casts {
    int64_t count = 0;
    int64_t bytes = 0;  // written (the cast outputs)
    double ms = 0;
  };
  Casts activation_casts, working_copy_casts;
  int64_t working_copy_hits = 0, working_copy_misses = 0;
  double working_copy_hit_rate() const;  // 0 when never looked up

  // GEMMs of the forward pass by module: dtype and shape; `friendly` false when a reduced-
  // precision GEMM has a dimension that is not a multiple of 8 (tensor cores then pad or fall
  // back), with the padded sizes that would be.
  struct Gemm {
    std::string module;  // dotted path of the innermost module around it ("" outside any)
    std::string op;      // "matmul", "conv2d_forward", "attention_forward"
    DType dtype = DType::Float32;
    int64_t m = 0, n = 0, k = 0;
    int64_t padded_m = 0, padded_n = 0, padded_k = 0;
    int64_t calls = 0;
    double ms = 0;
    bool friendly = true;
  };
  std::vector<Gemm> gemms;  // in order of first appearance
  std::vector<Gemm> unfriendly_gemms() const;

  // The loss scale after each GradScaler::update() while profiling.
  struct ScalePoint {
    int64_t update = 0;  // 1, 2, ... within the profile
    double scale = 0;
    bool skipped = false;  // the step this update closed was skipped (inf/NaN gradients)
  };
  std::vector<ScalePoint> loss_scale;
  int64_t skipped_steps() const;

  std::string str() const;
};

// Throws mantissa::Error if the profile is still recording.
AmpReport amp_report(const profiler::Profile& profile);

}  // namespace mantissa::amp
