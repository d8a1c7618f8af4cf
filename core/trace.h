// The tracing hook: a tracer (onnx/, the ONNX exporter) installed on one thread receives
// every kernel that thread dispatches on the CPU, by handing out its own twin of the kernel
// tables from backend_for() / nn_kernels_for() (the one place ops reach a kernel), and every
// custom autograd::Function call (autograd/function.h).
//
// Off (no tracer installed anywhere), the cost is one relaxed load of a global counter and a
// branch in backend_for(), as for the profiler's twin tables.
#pragma once
#include <atomic>
#include <vector>

#include "core/tensor.h"

namespace mantissa {
struct Backend;
struct NnKernels;
namespace autograd {
class Context;
}  // namespace autograd
}  // namespace mantissa

namespace mantissa::trace {

class Tracer {
 public:
  virtual ~Tracer() = default;
  // The twins of the CPU kernel tables that record each call, then run the real kernel.
  virtual const Backend& backend() = 0;
  virtual const NnKernels& nn_kernels() = 0;
  // A custom Function `name` starts: true when the tracer records it as one unit, in which case
  // the kernels its forward dispatches are run but not recorded until function_end().
  virtual bool function_begin(const char* name) = 0;
  virtual void function_end(const char* name, const std::vector<Tensor>& inputs, const autograd::Context& ctx,
                            const Tensor& output) = 0;
};

namespace detail {
inline std::atomic<int> g_installed{0};  // tracers installed on any thread
Tracer* installed_here();                // this thread's, or null
}  // namespace detail

// This thread's tracer, or null (one relaxed load while none is installed anywhere).
inline Tracer* current() {
  if (detail::g_installed.load(std::memory_order_relaxed) == 0) [[likely]]
    return nullptr;
  return detail::installed_here();
}

// Installs `t` on this thread for the guard's lifetime (the previous one is restored).
class Guard {
 public:
  explicit Guard(Tracer* t);
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  Tracer* prev_;
};

}  // namespace mantissa::trace
