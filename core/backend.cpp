#include "core/backend.h"

#include <array>
#include <atomic>

#include "core/backend_registry.h"
#include "core/cpu/kernels.h"
#include "core/error.h"
#include "core/profile_op.h"
#include "core/trace.h"

namespace mantissa {

#define MT_NAME_CASE(Enum, name, ...) \
  case Op::Enum:                      \
    return #name;
const char* op_name(UnaryOp op) {
  using Op = UnaryOp;
  switch (op) { MT_UNARY_OPS(MT_NAME_CASE) }
  return "unary";
}
const char* op_name(BinaryOp op) {
  using Op = BinaryOp;
  switch (op) { MT_BINARY_OPS(MT_NAME_CASE) }
  return "binary";
}
const char* op_name(ReduceOp op) {
  using Op = ReduceOp;
  switch (op) { MT_REDUCE_OPS(MT_NAME_CASE) }
  return "reduce";
}
#undef MT_NAME_CASE

namespace cpu {
namespace {
const Backend kBackend{MT_BACKEND_KERNELS(MT_BACKEND_TABLE_ENTRY)};
}  // namespace
}  // namespace cpu

const Backend& cpu_backend() { return cpu::kBackend; }

namespace {

// ---------------------------------------------------------------- profiled dispatch
// backend_for() is the one place every op passes on its way to a kernel, so the op ranges
// are recorded here: while profiling is on it hands out a twin of the table whose entries
// open a range named after the op, then call the real kernel. Off, the cost is the branch
// in backend_for().

// The profiled twin of the table Inner() returns.
template <const Backend& (*Inner)()>
const Backend& profiled() {
#define MT_PROFILED_Named(entry) MT_PROFILED_ENTRY(Backend, Inner, entry, #entry)
#define MT_PROFILED_ByOp(entry) MT_PROFILED_OP_ENTRY(Backend, Inner, entry, op_name)
#define MT_PROFILED_Softmax(entry)                                                                                   \
  .entry = [](const Tensor& in, const Tensor& out, bool log) {                                                       \
    profiler::detail::call_in_range<Backend, Inner, &Backend::entry>(log ? "log_softmax" : "softmax", in, out, log); \
  }
#define MT_ENTRY(name, params, range) MT_PROFILED_##range(name),
  static const Backend t{MT_BACKEND_KERNELS(MT_ENTRY)};
#undef MT_ENTRY
#undef MT_PROFILED_Named
#undef MT_PROFILED_ByOp
#undef MT_PROFILED_Softmax
  return t;
}

const Backend& cuda_table() { return *find_backend(DeviceType::CUDA)->kernels; }

// The devices a backend has, asked once per type: the count is fixed for the process and
// the query (cudaGetDeviceCount) is a driver call that every op would otherwise pay.
int device_count_of(DeviceType type, const DeviceBackend& b) {
  static std::array<std::atomic<int>, kNumDeviceTypes> known{};  // count + 1; 0: not asked yet
  std::atomic<int>& k = known[size_t(type)];
  int v = k.load(std::memory_order_relaxed);
  if (v == 0) {
    v = b.device_count() + 1;
    k.store(v, std::memory_order_relaxed);
  }
  return v - 1;
}

}  // namespace

const Backend& backend_for(Device d) {
  if (d.is_cpu()) {
    if (trace::Tracer* t = trace::current()) [[unlikely]]
      return t->backend();  // an exporter records this thread's ops (core/trace.h)
    return profiler::enabled() ? profiled<cpu_backend>() : cpu_backend();
  }
  const DeviceBackend* b = find_backend(d.type);
  MT_CHECK(b != nullptr, "dispatch", "device ", d.str(), " is not available: mantissa was built without it");
  const int count = device_count_of(d.type, *b);
  MT_CHECK(d.index < count, "dispatch", "device ", d.str(), " is not available (", count, " devices found)");
  return profiler::enabled() ? profiled<cuda_table>() : *b->kernels;
}

}  // namespace mantissa
