// The autocast op lists: one table, readable and extensible by users (docs/amp.md). Every
// entry names an op that looks itself up here; tests/test_amp.cpp checks that each is reached.
#include "core/autocast_policy.h"

#include <mutex>
#include <sstream>

namespace mantissa::amp {

namespace {

const std::map<std::string, CastPolicy>& builtin_table() {
  static const std::map<std::string, CastPolicy> t = {
      // Lower precision: GEMM-shaped work that tensor cores run in fp16/bf16 with fp32 accumulation.
      {"matmul", CastPolicy::LowerPrecision},
      {"linear", CastPolicy::LowerPrecision},
      {"conv2d", CastPolicy::LowerPrecision},
      {"scaled_dot_product_attention", CastPolicy::LowerPrecision},  // softmax statistics stay fp32 inside
      // fp32: ranges or accumulations that fp16 cannot hold.
      {"exp", CastPolicy::Fp32},
      {"log", CastPolicy::Fp32},
      {"log1p", CastPolicy::Fp32},
      {"pow", CastPolicy::Fp32},
      {"rsqrt", CastPolicy::Fp32},
      {"reciprocal", CastPolicy::Fp32},
      {"softmax", CastPolicy::Fp32},
      {"log_softmax", CastPolicy::Fp32},
      {"sum", CastPolicy::Fp32},
      {"mean", CastPolicy::Fp32},
      {"prod", CastPolicy::Fp32},
      {"var", CastPolicy::Fp32},
      {"std", CastPolicy::Fp32},
      {"logsumexp", CastPolicy::Fp32},
      {"layer_norm", CastPolicy::Fp32},
      {"batch_norm", CastPolicy::Fp32},
      {"cross_entropy", CastPolicy::Fp32},
      {"nll_loss", CastPolicy::Fp32},
      {"mse_loss", CastPolicy::Fp32},
      {"binary_cross_entropy_with_logits", CastPolicy::Fp32},
      // Promote: ops combining several inputs into one tensor.
      {"cat", CastPolicy::Promote},
      {"stack", CastPolicy::Promote},
      {"where", CastPolicy::Promote},
      {"scatter_add", CastPolicy::Promote},
  };
  return t;
}

std::map<std::string, CastPolicy>& table() {
  static std::map<std::string, CastPolicy> t = builtin_table();
  return t;
}

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

thread_local PolicyLookupLog* t_lookup_log = nullptr;

}  // namespace

const char* policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::LowerPrecision:
      return "lower_precision";
    case CastPolicy::Fp32:
      return "fp32";
    case CastPolicy::Promote:
      return "promote";
    case CastPolicy::PassThrough:
      return "pass_through";
  }
  return "?";
}

AutocastState& autocast_state() {
  thread_local AutocastState s;
  return s;
}

CastPolicy cast_policy(const std::string& op) {
  if (t_lookup_log) t_lookup_log->names_.insert(op);
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(op);
  return it == table().end() ? CastPolicy::PassThrough : it->second;
}

void register_cast_policy(const std::string& op, CastPolicy policy) {
  std::lock_guard<std::mutex> lock(table_mutex());
  table()[op] = policy;
}

const std::map<std::string, CastPolicy>& cast_policy_table() { return table(); }
const std::map<std::string, CastPolicy>& builtin_cast_policy_table() { return builtin_table(); }

PolicyLookupLog::PolicyLookupLog() : prev_(t_lookup_log) { t_lookup_log = this; }
PolicyLookupLog::~PolicyLookupLog() { t_lookup_log = prev_; }

std::string policy_table_str() {
  std::ostringstream os;
  for (CastPolicy p : {CastPolicy::LowerPrecision, CastPolicy::Fp32, CastPolicy::Promote}) {
    os << policy_name(p) << ":";
    for (auto& [op, q] : table())
      if (q == p) os << " " << op;
    os << "\n";
  }
  os << "pass_through: every other op\n";
  return os.str();
}

}  // namespace mantissa::amp
