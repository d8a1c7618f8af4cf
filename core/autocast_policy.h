// The autocast policy: which precision each op runs in under mt::amp::Autocast.
// Each op declares its category where it is defined; print the table with policy_table_str()
// and extend it for your own ops with register_cast_policy().
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/device.h"
#include "core/dtype.h"

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

// The policy of an op name (PassThrough for ops not in the table).
CastPolicy cast_policy(const std::string& op);
// Adds or changes an op's policy; custom ops call this when they are defined.
void register_cast_policy(const std::string& op, CastPolicy policy);
// Every op that is not pass-through, with its policy now.
std::map<std::string, CastPolicy> cast_policy_table();
// The policies the library's ops were declared with, without later registrations.
std::map<std::string, CastPolicy> builtin_cast_policy_table();

// An op's category, declared next to its definition (MT_DECLARE_CAST_POLICY below); it enters
// the table when the program loads. The elementwise ops declare theirs in their lists
// (core/elementwise_math.h).
struct DeclareCastPolicy {
  DeclareCastPolicy(const char* op, CastPolicy policy);
};

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
  friend CastPolicy cast_policy(const std::string& op);
  std::set<std::string> names_;
  PolicyLookupLog* prev_;
};
// The table as text, one "op: policy" line each, grouped by policy.
std::string policy_table_str();

}  // namespace mantissa::amp

// MT_DECLARE_CAST_POLICY(layer_norm, Fp32): at namespace scope in the file defining the op.
#define MT_DECLARE_CAST_POLICY(op, policy)                                               \
  [[maybe_unused]] static const ::mantissa::amp::DeclareCastPolicy mt_cast_policy_##op { \
#op, ::mantissa::amp::CastPolicy::policy                                             \
  }
