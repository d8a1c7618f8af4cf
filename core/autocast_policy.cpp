// The autocast table, readable and extensible by users (docs/amp.md). Its built-in entries are
// declared with their ops: the elementwise lists of core/elementwise_math.h, and a
// MT_DECLARE_CAST_POLICY next to every other op's definition. tests/test_amp.cpp checks that
// each entry is reached by its op.
#include "core/autocast_policy.h"

#include <mutex>
#include <optional>
#include <sstream>

#include "core/elementwise_math.h"

namespace mantissa::amp {

namespace {

// Each op's policy now (builtin or registered) and the one it was declared with, if any.
struct Entry {
  CastPolicy policy = CastPolicy::PassThrough;
  std::optional<CastPolicy> declared;
};

// The elementwise ops carry their category in their list (core/elementwise_math.h); pass-through
// ops are not entries.
std::map<std::string, Entry> listed_ops() {
  std::map<std::string, Entry> t;
#define MT_LISTED(Enum, name, F, domain, policy) \
  if (CastPolicy::policy != CastPolicy::PassThrough) t[name] = Entry{CastPolicy::policy, CastPolicy::policy};
  MT_UNARY_OPS(MT_LISTED)
  MT_BINARY_OPS(MT_LISTED)
#undef MT_LISTED
#define MT_LISTED(Enum, name, policy) \
  if (CastPolicy::policy != CastPolicy::PassThrough) t[name] = Entry{CastPolicy::policy, CastPolicy::policy};
  MT_REDUCE_OPS(MT_LISTED)
#undef MT_LISTED
  return t;
}

std::map<std::string, Entry>& table() {
  static std::map<std::string, Entry> t = listed_ops();
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
  return it == table().end() ? CastPolicy::PassThrough : it->second.policy;
}

void register_cast_policy(const std::string& op, CastPolicy policy) {
  std::lock_guard<std::mutex> lock(table_mutex());
  table()[op].policy = policy;
}

DeclareCastPolicy::DeclareCastPolicy(const char* op, CastPolicy policy) {
  std::lock_guard<std::mutex> lock(table_mutex());
  table()[op] = Entry{policy, policy};
}

std::map<std::string, CastPolicy> cast_policy_table() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::map<std::string, CastPolicy> out;
  for (const auto& [op, e] : table())
    if (e.policy != CastPolicy::PassThrough) out[op] = e.policy;
  return out;
}

std::map<std::string, CastPolicy> builtin_cast_policy_table() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::map<std::string, CastPolicy> out;
  for (const auto& [op, e] : table())
    if (e.declared && *e.declared != CastPolicy::PassThrough) out[op] = *e.declared;
  return out;
}

PolicyLookupLog::PolicyLookupLog() : prev_(t_lookup_log) { t_lookup_log = this; }
PolicyLookupLog::~PolicyLookupLog() { t_lookup_log = prev_; }

std::string policy_table_str() {
  std::ostringstream os;
  for (CastPolicy p : {CastPolicy::LowerPrecision, CastPolicy::Fp32, CastPolicy::Promote}) {
    os << policy_name(p) << ":";
    for (const auto& [op, q] : cast_policy_table())
      if (q == p) os << " " << op;
    os << "\n";
  }
  os << "pass_through: every other op\n";
  return os.str();
}

}  // namespace mantissa::amp
