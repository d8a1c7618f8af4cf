// What a profiled op range knows about its op, and the range that the dispatch tables open
// around each kernel (core/backend.cpp, core/nn_kernels.cpp):
//
//   profiler::OpRange r("matmul", a, b, bias, out);   // every argument of the kernel
//
// Off (no Profile recording, NVTX off) it costs the same branch as profiler::Range. On, it
// describes the tensor arguments (shape, dtype, device; undefined ones keep their position)
// and, for GEMM-shaped ops, counts FLOPs and the GEMM's M, N, K from the shapes and the
// conv/attention geometry. Arguments of other types are ignored.
#pragma once
#include <string>
#include <vector>

#include "core/nn_kernels.h"
#include "core/profiler.h"
#include "core/tensor.h"

namespace mantissa::profiler {

struct TensorInfo {
  bool defined = false;
  Shape shape;
  DType dtype = DType::Float32;
  Device device;
};

struct OpInfo {
  std::vector<TensorInfo> tensors;             // the kernel's tensor arguments, in order
  Device device;                               // of the first defined tensor
  DType compute = DType::Float32;              // of the first defined floating tensor (the kernel contracts)
  double flops = 0;                            // multiply-adds count 2; 0 for ops that are not GEMM-shaped
  int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;  // the (largest) GEMM of matmul/conv/attention
  const Conv2dGeometry* conv = nullptr;        // while the range is open
  const AttentionGeometry* attention = nullptr;
};

namespace detail {
inline void describe(OpInfo& info, const Tensor& t) {
  TensorInfo ti;
  if (t.defined()) ti = {true, t.shape(), t.dtype(), t.device()};
  info.tensors.push_back(std::move(ti));
}
inline void describe(OpInfo& info, const Conv2dGeometry& g) { info.conv = &g; }
inline void describe(OpInfo& info, const AttentionGeometry& g) { info.attention = &g; }
template <typename T>
void describe(OpInfo&, const T&) {}
// Device, compute dtype, FLOPs and GEMM dims from the described arguments (core/profile_op.cpp).
void finish(const char* name, OpInfo& info);
}  // namespace detail

class OpRange {
 public:
  template <typename... Args>
  explicit OpRange(const char* name, const Args&... args) : active_(enabled()) {
    if (!active_) return;
    OpInfo info;
    info.tensors.reserve(sizeof...(Args));
    (detail::describe(info, args), ...);
    detail::finish(name, info);
    push_op(name, info);
  }
  ~OpRange() {
    if (active_) pop();
  }
  OpRange(const OpRange&) = delete;
  OpRange& operator=(const OpRange&) = delete;

 private:
  bool active_;
};

}  // namespace mantissa::profiler

// Twins of the kernel tables while profiling (backend_for, nn_kernels_for): each entry of the
// twin opens an op range named after the kernel, with its arguments' shapes and dtypes, then
// calls the real table's entry.
//   static const Backend t{MT_PROFILED_ENTRY(Backend, cpu_backend, matmul, "matmul"), ...};
namespace mantissa::profiler::detail {
template <typename Table, const Table& (*Inner)(), auto Member, typename... Args>
void call_in_range(const char* name, Args... args) {
  OpRange r(name, args...);
  (Inner().*Member)(args...);
}
}  // namespace mantissa::profiler::detail
#define MT_PROFILED_ENTRY(Table, Inner, entry, name) \
  .entry = [](auto... args) { ::mantissa::profiler::detail::call_in_range<Table, Inner, &Table::entry>(name, args...); }
// The same, named by the entry's first argument (the op): name_of(op).
#define MT_PROFILED_OP_ENTRY(Table, Inner, entry, name_of)                                              \
  .entry = [](auto op, auto... args) {                                                                  \
    ::mantissa::profiler::detail::call_in_range<Table, Inner, &Table::entry>(name_of(op), op, args...); \
  }
