#include "core/trace.h"

namespace mantissa::trace {

namespace {
thread_local Tracer* t_tracer = nullptr;
}  // namespace

Tracer* detail::installed_here() { return t_tracer; }

Guard::Guard(Tracer* t) : prev_(t_tracer) {
  t_tracer = t;
  detail::g_installed.fetch_add(1, std::memory_order_relaxed);
}

Guard::~Guard() {
  t_tracer = prev_;
  detail::g_installed.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace mantissa::trace
