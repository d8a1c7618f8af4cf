#include "amp/autocast.h"

#include <atomic>

#include "autograd/node.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/profiler.h"

namespace mantissa::amp {

namespace {

std::atomic<uint64_t> g_casts{0};

// The edge from a working copy to its fp32 master. Stateless, so it survives
// backward passes and serves every forward until the master changes.
struct MasterCastNode final : autograd::Node {
  DType master_dtype;
  explicit MasterCastNode(DType t) : master_dtype(t) {}
  std::string name() const override { return "MasterCastBackward"; }
  // Without a graph of the backward, the fp16 gradient goes to the master's
  // AccumulateGrad as is: it converts while accumulating (one pass, not two).
  std::vector<Tensor> apply(const Tensor& g) override { return {GradMode::is_enabled() ? g.to(master_dtype) : g}; }
};

bool is_param(const Tensor& t) { return t.is_leaf() && t.requires_grad(); }

// The one casting rule of every category: float64 is never lowered (PyTorch autocasts only
// float32 and the reduced types), so a float64 matmul under Autocast(kBFloat16) stays float64.
Tensor cast_input(const Tensor& x, DType to) {
  if (!x.defined() || !is_floating(x.dtype()) || x.dtype() == to) return x;
  if (x.dtype() == DType::Float64 && to != DType::Float64) return x;
  if (!autocast_applies(x.device().type)) return x;
  if (is_param(x) && x.dtype() == DType::Float32 && is_reduced_float(to)) return working_copy(x, to);
  profiler::Range range("autocast_cast");  // the copy inside is the cast autocast inserted
  return x.to(to);
}

}  // namespace

Autocast::Autocast(DType dtype, bool enabled, std::optional<DeviceType> device) : prev_(autocast_state()) {
  MT_CHECK(!enabled || is_reduced_float(dtype), "Autocast", "dtype must be float16 or bfloat16, got ",
           dtype_name(dtype));
  autocast_state() = AutocastState{enabled, dtype, device};
}

Autocast::~Autocast() { autocast_state() = prev_; }

bool is_autocast_enabled() { return autocast_state().enabled; }

std::vector<Tensor> autocast_many(const OpPolicy& op, const std::vector<Tensor>& xs) {
  const AutocastState& s = autocast_state();
  if (!s.enabled) return xs;
  std::vector<Tensor> out = xs;
  const CastPolicy policy = op.policy();
  note_policy_lookup(op.name());
  // A Profile attributes the kernels that follow to this op and its policy (the AMP report).
  if (profiler::enabled()) profiler::note("autocast", op.name(), double(policy));
  switch (policy) {
    case CastPolicy::LowerPrecision:
      for (auto& x : out) x = cast_input(x, s.dtype);
      break;
    case CastPolicy::Fp32:
      for (auto& x : out)
        if (x.defined() && is_reduced_float(x.dtype())) x = cast_input(x, DType::Float32);
      break;
    case CastPolicy::Promote: {
      DType widest = DType::Bool;
      bool any = false;
      for (auto& x : out)
        if (x.defined() && is_floating(x.dtype())) {
          widest = any ? promote_types(widest, x.dtype()) : x.dtype();
          any = true;
        }
      if (any)
        for (auto& x : out) x = cast_input(x, widest);
      break;
    }
    case CastPolicy::PassThrough:
      break;
  }
  return out;
}

Tensor autocast_one(const OpPolicy& op, const Tensor& x) {
  if (!autocast_state().enabled) return x;
  return autocast_many(op, {x})[0];
}

Tensor working_copy(const Tensor& param, DType dtype) {
  auto& m = autograd::meta(param);
  const bool want_graph = GradMode::is_enabled();
  bool valid = m.working_copy.defined() && m.working_copy.dtype() == dtype &&
               m.working_copy_version == param.version() && m.working_copy.device() == param.device() &&
               (!want_graph || m.working_copy.grad_fn());
  if (profiler::enabled()) profiler::note("working_copy", valid ? "hit" : "miss", valid ? 1 : 0);
  if (valid) return m.working_copy;
  profiler::Range range("working_copy_cast");
  Tensor w = launch::cast(param, dtype);
  if (want_graph) {
    auto node = std::make_shared<MasterCastNode>(param.dtype());
    node->next.push_back(autograd::gradient_edge(param));
    auto& wm = autograd::meta(w);
    wm.requires_grad = true;
    wm.grad_fn = std::move(node);
  }
  m.working_copy = w;
  m.working_copy_version = param.version();
  ++g_casts;
  return w;
}

Tensor working_copy_for_refresh(const Tensor& param) {
  const auto* m = autograd::meta_if(param);
  if (!m || !m->working_copy.defined()) return Tensor();
  return m->working_copy;
}

void mark_working_copy_fresh(const Tensor& param) {
  auto& m = autograd::meta(param);
  if (m.working_copy.defined()) m.working_copy_version = param.version();
}

uint64_t working_copy_casts() { return g_casts.load(); }

MemoryReport memory_report(const std::vector<Tensor>& params) {
  MemoryReport r;
  for (const Tensor& p : params) {
    r.master_bytes += p.nbytes();
    const auto* m = autograd::meta_if(p);
    if (!m) continue;
    if (m->working_copy.defined()) r.working_copy_bytes += m->working_copy.nbytes();
    if (m->grad.defined()) r.grad_bytes += m->grad.nbytes();
  }
  return r;
}

}  // namespace mantissa::amp
