// The autocast table, readable and extensible by users (docs/amp.md). Its built-in entries are
// declared with their ops as typed OpPolicy constants: the elementwise lists of
// core/elementwise_math.h, and a MT_DECLARE_CAST_POLICY next to every other op's definition.
// tests/test_amp.cpp checks that each entry is reached by its op and that names are unique.
#include "amp/autocast_policy.h"

#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/backend.h"
#include "core/elementwise_math.h"

namespace mantissa::amp {

namespace {

// Every entry by name: the built-in ones (static OpPolicy objects, registered as the program
// loads) and the custom ones made by policy_entry()/register_cast_policy() (owned here).
struct Registry {
  std::mutex mutex;
  std::map<std::string, OpPolicy*> by_name;
  std::vector<std::unique_ptr<OpPolicy>> custom;
  std::vector<std::string> duplicates;
};

Registry& registry() {
  static Registry r;
  return r;
}

thread_local PolicyLookupLog* t_lookup_log = nullptr;

// The list entries, in enumerator order (core/backend.h makes the enums from the same lists).
#define MT_LIST_ENTRY(Enum, name, F, domain, policy, ...) {#name, CastPolicy::policy},
OpPolicy g_unary_policies[] = {MT_UNARY_OPS(MT_LIST_ENTRY)};
OpPolicy g_binary_policies[] = {MT_BINARY_OPS(MT_LIST_ENTRY)};
#undef MT_LIST_ENTRY
#define MT_LIST_ENTRY(Enum, name, policy) {#name, CastPolicy::policy},
OpPolicy g_reduce_policies[] = {MT_REDUCE_OPS(MT_LIST_ENTRY)};
#undef MT_LIST_ENTRY

}  // namespace

OpPolicy::OpPolicy(const char* name, CastPolicy declared)
    : name_(name), declared_(declared), current_(uint8_t(declared)) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto [it, inserted] = r.by_name.emplace(name, this);
  if (!inserted) {
    if (it->second->declared_) {
      r.duplicates.emplace_back(name);
    } else {
      // A custom entry made before this one loaded: the declared entry takes over its override.
      set_policy(it->second->policy());
      it->second = this;
    }
  }
}

OpPolicy::OpPolicy(std::string name)
    : owned_name_(std::move(name)), name_(owned_name_.c_str()), current_(uint8_t(CastPolicy::PassThrough)) {}

OpPolicy& policy_entry(const char* name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_name.find(name);
  if (it != r.by_name.end()) return *it->second;
  r.custom.push_back(std::unique_ptr<OpPolicy>(new OpPolicy(std::string(name))));
  OpPolicy* e = r.custom.back().get();
  r.by_name.emplace(e->name(), e);
  return *e;
}

const OpPolicy& list_policy(UnaryOp op) { return g_unary_policies[size_t(op)]; }
const OpPolicy& list_policy(BinaryOp op) { return g_binary_policies[size_t(op)]; }
const OpPolicy& list_policy(ReduceOp op) { return g_reduce_policies[size_t(op)]; }

void note_policy_lookup(const char* op) {
  if (t_lookup_log) t_lookup_log->names_.insert(op);
}

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
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_name.find(op);
  return it == r.by_name.end() ? CastPolicy::PassThrough : it->second->policy();
}

void register_cast_policy(const std::string& op, CastPolicy policy) { policy_entry(op.c_str()).set_policy(policy); }

std::map<std::string, CastPolicy> cast_policy_table() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::map<std::string, CastPolicy> out;
  for (const auto& [op, e] : r.by_name)
    if (e->policy() != CastPolicy::PassThrough) out[op] = e->policy();
  return out;
}

std::map<std::string, CastPolicy> builtin_cast_policy_table() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::map<std::string, CastPolicy> out;
  for (const auto& [op, e] : r.by_name)
    if (e->declared() && *e->declared() != CastPolicy::PassThrough) out[op] = *e->declared();
  return out;
}

std::vector<std::string> duplicate_policy_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.duplicates;
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
