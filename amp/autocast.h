// Autocast: the RAII guard users write, and the input casting every op applies.
//
//   { mt::amp::Autocast ac(mt::kHalf);        // fp16 for matmul/linear/conv, fp32 for softmax, losses
//     loss = criterion(model.forward(x), y); }
//
// Floating parameters (leaves that require grad) are cast through a cached working
// copy: made once per parameter value, invalidated by any write to the fp32 master
// (its version counter), and linked to the master by a cast node so gradients arrive
// in the master's .grad in fp32.
#pragma once
#include <vector>

#include "amp/autocast_policy.h"
#include "core/tensor.h"

namespace mantissa::amp {

class Autocast {
 public:
  // dtype: kHalf or kBFloat16. By default autocast applies on whatever device an op's inputs
  // live (CPU or CUDA); naming a device restricts it there (tensors elsewhere pass through).
  explicit Autocast(DType dtype = DType::Float16, bool enabled = true, std::optional<DeviceType> device = std::nullopt);
  explicit Autocast(bool enabled) : Autocast(autocast_state().dtype, enabled, autocast_state().device) {}
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  AutocastState prev_;
};

bool is_autocast_enabled();

// Casts an op's inputs per its policy entry (no-ops when autocast is off): the op's typed
// constant (MT_DECLARE_CAST_POLICY, list_policy()), or policy_entry(name) for a custom op.
Tensor autocast_one(const OpPolicy& op, const Tensor& x);
std::vector<Tensor> autocast_many(const OpPolicy& op, const std::vector<Tensor>& xs);

// The cached lower-precision working copy of `param` (created when missing or stale).
Tensor working_copy(const Tensor& param, DType dtype);
// The param's working copy (of whatever dtype) for a fused optimizer step to overwrite, or an
// undefined tensor when it has none; mark_working_copy_fresh() after the overwrite.
Tensor working_copy_for_refresh(const Tensor& param);
// Marks a param's working copy as matching its current version (after a fused refresh).
void mark_working_copy_fresh(const Tensor& param);
// How many working copies have been (re)made by casting since start (for tests and stats).
uint64_t working_copy_casts();

// Bytes held by fp32 masters, working copies and gradients of `params`.
struct MemoryReport {
  size_t master_bytes = 0, working_copy_bytes = 0, grad_bytes = 0;
};
MemoryReport memory_report(const std::vector<Tensor>& params);

}  // namespace mantissa::amp
