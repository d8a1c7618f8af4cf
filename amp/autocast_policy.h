// The autocast policy: which precision each op runs in under mt::amp::Autocast.
// Each op declares its category where it is defined; print the table with policy_table_str()
// and extend it for your own ops with register_cast_policy().
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace mantissa {
enum class UnaryOp : uint8_t;  // core/backend.h: the elementwise and reduction lists
enum class BinaryOp : uint8_t;
enum class ReduceOp : uint8_t;
}  // namespace mantissa

namespace mantissa::amp {

enum class CastPolicy : uint8_t {
  LowerPrecision,  // inputs cast to the autocast dtype (fp16/bf16); tensor-core friendly
  Fp32,            // inputs cast up to float32: numerically sensitive (exp, reductions, losses)
  Promote,         // inputs cast to the widest floating type among them
  PassThrough,     // run in the input types
};

const char* policy_name(CastPolicy p);

// Thread-local autocast state, set by the RAII amp::Autocast guard.
struct AutocastState {
  bool enabled = false;
  DType dtype = DType::Float16;
  std::optional<DeviceType> device;  // empty: every device (the inputs' own)
};
AutocastState& autocast_state();
// Whether the current autocast state casts an op's inputs that live on `device`.
inline bool autocast_applies(DeviceType device) {
  const AutocastState& s = autocast_state();
  return s.enabled && (!s.device || *s.device == device);
}

// One op's autocast entry: declared once next to the op as a typed constant
// (MT_DECLARE_CAST_POLICY below, or the op's line in an elementwise list) and passed to
// autocast_many(), so reading the policy is one relaxed load and a misspelt op does not compile.
// register_cast_policy() overrides the current policy through the same atomic slot.
class OpPolicy {
 public:
  // Registers the entry under `name` (a string literal: it must outlive the program). Names are
  // unique: a second built-in entry of the same name is recorded in duplicate_policy_names().
  OpPolicy(const char* name, CastPolicy declared);
  OpPolicy(const OpPolicy&) = delete;
  OpPolicy& operator=(const OpPolicy&) = delete;

  const char* name() const { return name_; }
  // The policy the op was declared with; nullopt for a custom op's entry.
  std::optional<CastPolicy> declared() const { return declared_; }
  CastPolicy policy() const { return CastPolicy(current_.load(std::memory_order_relaxed)); }
  void set_policy(CastPolicy p) { current_.store(uint8_t(p), std::memory_order_relaxed); }

 private:
  friend OpPolicy& policy_entry(const char* name);
  OpPolicy(std::string name);  // a custom op's entry, made on first use (owns its name)
  std::string owned_name_;
  const char* name_;
  std::optional<CastPolicy> declared_;
  std::atomic<uint8_t> current_;
};

// The entry of an op name, made (pass-through, undeclared) when no op declared one: custom ops
// look theirs up once and keep the reference (autograd/function.h).
OpPolicy& policy_entry(const char* name);
// The current policy of an op name (PassThrough for ops not in the table): a locked map search,
// for tests, reports and user code; ops read their OpPolicy instead.
CastPolicy cast_policy(const std::string& op);
// Sets an op's current policy (built-in or custom); custom ops call this when they are defined.
void register_cast_policy(const std::string& op, CastPolicy policy);
// Every op that is not pass-through, with its policy now.
std::map<std::string, CastPolicy> cast_policy_table();
// The policies the library's ops were declared with, without later registrations.
std::map<std::string, CastPolicy> builtin_cast_policy_table();
// Names declared by more than one built-in entry (empty unless an op list is wrong).
std::vector<std::string> duplicate_policy_names();

// The entries of the elementwise and reduction lists (core/elementwise_math.h), by enumerator.
const OpPolicy& list_policy(UnaryOp op);
const OpPolicy& list_policy(BinaryOp op);
const OpPolicy& list_policy(ReduceOp op);

// Records `op` in the innermost live PolicyLookupLog of this thread (no-op without one).
void note_policy_lookup(const char* op);

// While alive, records on this thread the name of every op that looks up its policy (ops do so
// only under an enabled autocast). Tests use it to prove each table entry is reached by an op.
class PolicyLookupLog {
 public:
  PolicyLookupLog();
  ~PolicyLookupLog();
  PolicyLookupLog(const PolicyLookupLog&) = delete;
  PolicyLookupLog& operator=(const PolicyLookupLog&) = delete;
  const std::set<std::string>& names() const { return names_; }

 private:
  friend void note_policy_lookup(const char* op);
  std::set<std::string> names_;
  PolicyLookupLog* prev_;
};
// The table as text, one "op: policy" line each, grouped by policy.
std::string policy_table_str();

}  // namespace mantissa::amp

// MT_DECLARE_CAST_POLICY(layer_norm, Fp32): at namespace scope in the file defining the op;
// defines the typed constant `autocast_layer_norm` that the op passes to amp::autocast_many().
#define MT_DECLARE_CAST_POLICY(op, policy) \
  static ::mantissa::amp::OpPolicy autocast_##op { #op, ::mantissa::amp::CastPolicy::policy }
