// The one range check of index values (index_select, gather, scatter_add, embedding,
// nll_loss / cross_entropy targets), and the sticky device error that reports it on a GPU
// without a host synchronisation.
//
// On the CPU the values are checked before the kernel and the error is thrown at once. On a
// device, a check kernel queued on the op's stream compares every value and the first one out
// of range writes an IndexErrorRecord (in host-mapped memory) naming the op; the op's kernels
// skip out-of-range values instead of touching memory outside their input. The record is read
// lazily: at the next host synchronisation or device-to-host copy on that device (a .item(), a
// .to(cpu), cuda::synchronize), which then throws the mantissa::Error the CPU would have
// thrown, minus the shapes, and clears the record. Results computed from the bad indices in
// between are garbage (out-of-range positions read as 0), as in PyTorch's device-side assert,
// but no memory outside the tensors is ever read or written.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace mantissa {

// Written by the first failing device thread (code by compare-and-swap, then the rest).
struct IndexErrorRecord {
  int32_t code = 0;  // 0: no error; else an index_error_code()
  int32_t unused = 0;
  int64_t position = 0;  // flat position in the index tensor
  int64_t value = 0;     // the offending value
  int64_t bound = 0;     // valid values: [0, bound) (and the ignore value, if any)
};

// A small integer naming (op, what) in device records: "embedding"/"index", "nll_loss"/"target".
// The same pair always gets the same code; at most 255 pairs per process.
int32_t index_error_code(const char* op, const char* what);

// The message of a record: "<op>: <what> <value> at position <position> is out of range for
// <bound> ..."; shared by the CPU's eager throw and the device's lazy one.
std::string index_error_message(const IndexErrorRecord& r);

// Throws the mantissa::Error `r` describes after clearing it; returns when r.code == 0.
void throw_if_index_error(IndexErrorRecord& r);

namespace launch {
// Checks that every value of `index` (int64, contiguous, any device) is in [0, bound) or
// equals *ignore; `context` (shapes) is appended to the CPU's message. CPU: throws now;
// device: queues the check (see above) and returns at once.
void check_index_range(const char* op, const char* what, const Tensor& index, int64_t bound,
                       const int64_t* ignore = nullptr, const std::string& context = {});
}  // namespace launch

}  // namespace mantissa
