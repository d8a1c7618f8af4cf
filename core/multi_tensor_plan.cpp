#include "core/multi_tensor_plan.h"

#include "core/error.h"

namespace mantissa::multi_tensor {

namespace {

void set_slot(TensorList& list, int slot, const TensorEntry& e) {
  list.param[slot] = e.param;
  list.grad[slot] = e.grad;
  for (int k = 0; k < 3; ++k) list.state[k][slot] = e.state[k];
  list.working_copy[slot] = e.working_copy;
  list.step[slot] = e.step;
  list.first_at_step[slot] = e.first_at_step;
  list.numel[slot] = e.numel;
}

}  // namespace

std::vector<Launch> plan_launches(const std::vector<TensorEntry>& tensors, int max_tensors, int max_blocks,
                                  int64_t chunk) {
  MT_CHECK(max_tensors >= 1 && max_tensors <= kMaxTensors && max_blocks >= 1 && max_blocks <= kMaxBlocks && chunk >= 1,
           "fused_optimizer_step", "internal: launch limits ", max_tensors, " tensors, ", max_blocks, " blocks, chunk ",
           chunk);
  std::vector<Launch> out;
  Launch cur{};
  auto flush = [&] {
    if (cur.blocks > 0) out.push_back(cur);
    cur = Launch{};
  };
  for (const TensorEntry& e : tensors) {
    if (e.numel <= 0) continue;
    const int64_t chunks = (e.numel + chunk - 1) / chunk;
    MT_CHECK(chunks <= INT32_MAX, "fused_optimizer_step", "parameter of ", e.numel, " elements has too many chunks");
    if (cur.tensors == max_tensors || cur.blocks == max_blocks) flush();
    // The slot is looked up per chunk, never kept across a carry: after one the tensor is slot 0.
    set_slot(cur.list, cur.tensors++, e);
    for (int64_t c = 0; c < chunks; ++c) {
      if (cur.blocks == max_blocks) {
        flush();  // the tensor continues in the next launch as its slot 0
        set_slot(cur.list, cur.tensors++, e);
      }
      cur.list.block_tensor[cur.blocks] = uint8_t(cur.tensors - 1);
      cur.list.block_chunk[cur.blocks] = int32_t(c);
      ++cur.blocks;
    }
  }
  flush();
  return out;
}

std::vector<StepList> plan_step_lists(const std::vector<int64_t*>& steps, int max_steps) {
  MT_CHECK(max_steps >= 1 && max_steps <= kMaxSteps, "fused_optimizer_step", "internal: ", max_steps,
           " step counters per launch");
  std::vector<StepList> out;
  StepList cur{};
  for (int64_t* s : steps) {
    if (cur.count == max_steps) {
      out.push_back(cur);
      cur = StepList{};
    }
    cur.step[cur.count++] = s;
  }
  if (cur.count > 0) out.push_back(cur);
  return out;
}

}  // namespace mantissa::multi_tensor
