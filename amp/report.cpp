#include "amp/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "amp/autocast_policy.h"

namespace mantissa::amp {

namespace {

int64_t round_up8(int64_t v) { return (v + 7) / 8 * 8; }

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The dotted path of the innermost module around event i.
std::string module_of(const std::vector<profiler::Event>& ev, int i) {
  for (int p = ev[size_t(i)].parent; p >= 0; p = ev[size_t(p)].parent)
    if (ev[size_t(p)].kind == profiler::Kind::Module) return ev[size_t(p)].name;
  return "";
}

// Bytes written by the copy kernels inside a cast range (their destination tensors).
int64_t cast_bytes(const std::vector<profiler::Event>& ev, size_t range) {
  int64_t bytes = 0;
  for (size_t j = range + 1; j < ev.size() && ev[j].start_ns <= ev[range].end_ns; ++j) {
    if (ev[j].kind != profiler::Kind::Op || ev[j].name != "copy" || ev[j].thread != ev[range].thread) continue;
    if (ev[j].op.tensors.size() < 2 || !ev[j].op.tensors[1].defined) continue;
    const profiler::TensorInfo& dst = ev[j].op.tensors[1];
    int64_t numel = 1;
    for (int64_t d : dst.shape) numel *= d;
    bytes += numel * int64_t(element_size(dst.dtype));
  }
  return bytes;
}

}  // namespace

double AmpReport::reduced_flop_share() const {
  double reduced = 0, all = 0;
  for (const auto& [dtype, flops] : gemm_flops) {
    all += flops;
    if (is_reduced_float(dtype)) reduced += flops;
  }
  return all > 0 ? reduced / all : 0;
}

double AmpReport::working_copy_hit_rate() const {
  const int64_t lookups = working_copy_hits + working_copy_misses;
  return lookups ? double(working_copy_hits) / double(lookups) : 0;
}

std::vector<AmpReport::Gemm> AmpReport::unfriendly_gemms() const {
  std::vector<Gemm> out;
  for (const Gemm& g : gemms)
    if (!g.friendly) out.push_back(g);
  return out;
}

int64_t AmpReport::skipped_steps() const {
  return std::count_if(loss_scale.begin(), loss_scale.end(), [](const ScalePoint& p) { return p.skipped; });
}

AmpReport amp_report(const profiler::Profile& profile) {
  const std::vector<profiler::Event>& ev = profile.events();
  AmpReport r;
  std::map<std::string, size_t> fp32_index;
  std::map<std::tuple<std::string, std::string, int, int64_t, int64_t, int64_t>, size_t> gemm_index;
  for (size_t i = 0; i < ev.size(); ++i) {
    const profiler::Event& e = ev[i];
    if (e.kind == profiler::Kind::Range && (e.name == "autocast_cast" || e.name == "working_copy_cast")) {
      AmpReport::Casts& c = e.name == "autocast_cast" ? r.activation_casts : r.working_copy_casts;
      ++c.count;
      c.ms += e.ms();
      c.bytes += cast_bytes(ev, i);
      continue;
    }
    if (e.kind != profiler::Kind::Op) continue;
    if (e.op.flops > 0 && !e.nested_op) r.gemm_flops[e.op.compute] += e.op.flops;
    if (e.autocast && e.op.compute == DType::Float32 && e.autocast_policy == int(CastPolicy::Fp32)) {
      auto [it, added] = fp32_index.try_emplace(e.autocast_op, r.fp32_ops.size());
      if (added) r.fp32_ops.push_back({e.autocast_op, 0, 0, {}});
      AmpReport::Fp32Op& f = r.fp32_ops[it->second];
      ++f.kernels;
      f.ms += e.ms();
      if (std::find(f.kernel_names.begin(), f.kernel_names.end(), e.name) == f.kernel_names.end())
        f.kernel_names.push_back(e.name);
    }
    if (e.op.flops > 0 && !e.nested_op && e.phase == profiler::Phase::Forward) {
      const std::string module = module_of(ev, int(i));
      const auto key = std::make_tuple(module, e.name, int(e.op.compute), e.op.gemm_m, e.op.gemm_n, e.op.gemm_k);
      auto [it, added] = gemm_index.try_emplace(key, r.gemms.size());
      if (added) {
        AmpReport::Gemm g;
        g.module = module;
        g.op = e.name;
        g.dtype = e.op.compute;
        g.m = e.op.gemm_m, g.n = e.op.gemm_n, g.k = e.op.gemm_k;
        g.padded_m = round_up8(g.m), g.padded_n = round_up8(g.n), g.padded_k = round_up8(g.k);
        g.friendly = !is_reduced_float(g.dtype) || (g.m % 8 == 0 && g.n % 8 == 0 && g.k % 8 == 0);
        r.gemms.push_back(g);
      }
      ++r.gemms[it->second].calls;
      r.gemms[it->second].ms += e.ms();
    }
  }
  std::sort(r.fp32_ops.begin(), r.fp32_ops.end(),
            [](const AmpReport::Fp32Op& a, const AmpReport::Fp32Op& b) { return a.ms > b.ms; });
  for (const profiler::Note& n : profile.notes()) {
    if (n.name == "working_copy") (n.detail == "hit" ? r.working_copy_hits : r.working_copy_misses)++;
    if (n.name == "loss_scale")
      r.loss_scale.push_back({int64_t(r.loss_scale.size()) + 1, n.value, n.detail == "skipped"});
  }
  return r;
}

std::string AmpReport::str() const {
  std::ostringstream os;
  os << "AMP report\n";
  double all = 0;
  for (const auto& [dtype, flops] : gemm_flops) all += flops;
  os << "  matmul/conv/attention FLOPs: " << fixed(all / 1e9, 3) << " GFLOP, " << fixed(100 * reduced_flop_share(), 1)
     << "% in fp16/bf16";
  for (const auto& [dtype, flops] : gemm_flops)
    os << "; " << dtype_name(dtype) << " " << fixed(all > 0 ? 100 * flops / all : 0, 1) << "%";
  os << "\n  ops in fp32 by the autocast policy:\n";
  if (fp32_ops.empty()) os << "    (none)\n";
  for (const Fp32Op& f : fp32_ops) {
    os << "    " << f.op << ": " << f.kernels << " kernels, " << fixed(f.ms, 3) << " ms (";
    for (size_t i = 0; i < f.kernel_names.size(); ++i) os << (i ? ", " : "") << f.kernel_names[i];
    os << ")\n";
  }
  os << "  casts inserted by autocast: " << activation_casts.count << " of activations ("
     << fixed(double(activation_casts.bytes) / 1e6, 3) << " MB, " << fixed(activation_casts.ms, 3) << " ms), "
     << working_copy_casts.count << " of weights into working copies ("
     << fixed(double(working_copy_casts.bytes) / 1e6, 3) << " MB, " << fixed(working_copy_casts.ms, 3) << " ms)\n";
  os << "  working-copy cache: " << working_copy_hits << " hits, " << working_copy_misses << " misses ("
     << fixed(100 * working_copy_hit_rate(), 1) << "% hit rate)\n";
  os << "  forward GEMMs by module (M x N x K):\n";
  for (const Gemm& g : gemms) {
    os << "    " << (g.module.empty() ? "(no module)" : g.module) << " " << g.op << " " << dtype_name(g.dtype) << " "
       << g.m << "x" << g.n << "x" << g.k << ", " << g.calls << " calls, " << fixed(g.ms, 3) << " ms";
    if (!g.friendly)
      os << "  <- not a multiple of 8: pad to " << g.padded_m << "x" << g.padded_n << "x" << g.padded_k
         << " for tensor cores";
    os << "\n";
  }
  if (!loss_scale.empty()) {
    os << "  loss scale after each update (" << skipped_steps() << " skipped steps):";
    for (const ScalePoint& p : loss_scale) os << " " << fixed(p.scale, 0) << (p.skipped ? "*" : "");
    os << "\n";
  }
  return os.str();
}

}  // namespace mantissa::amp
