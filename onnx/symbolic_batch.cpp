#include "onnx/symbolic_batch.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace mantissa::onnx {

namespace {

constexpr const char* kOp = "onnx export";

std::string dims_str(const pb::TensorProto& t) {
  std::string s = "[";
  for (int i = 0; i < t.dims_size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims(i));
  return s + "]";
}

// The one value every element of t holds (its bytes), or empty when the elements differ.
std::string uniform_value(const pb::TensorProto& t) {
  int64_t count = 1;
  for (int64_t n : t.dims()) count *= n;
  const std::string& raw = t.raw_data();
  if (count <= 0 || raw.empty() || raw.size() % size_t(count) != 0) return {};
  const size_t elem_size = raw.size() / size_t(count);
  for (size_t i = elem_size; i < raw.size(); i += elem_size)
    if (std::memcmp(raw.data() + i, raw.data(), elem_size) != 0) return {};
  return raw.substr(0, elem_size);
}

std::string reader_of(const pb::GraphProto& g, const std::string& value) {
  for (const pb::NodeProto& n : g.node())
    for (const std::string& in : n.input())
      if (in == value) return n.name();
  return "(no node)";
}

// The dim that is `batch` in a and `batch + 1` in b, all others equal; -1 if there is none.
int batch_dim(const pb::TensorProto& a, const pb::TensorProto& b, int64_t batch) {
  if (a.dims_size() != b.dims_size()) return -1;
  int found = -1;
  for (int d = 0; d < a.dims_size(); ++d) {
    if (a.dims(d) == b.dims(d)) continue;
    if (found >= 0 || a.dims(d) != batch || b.dims(d) != batch + 1) return -1;
    found = d;
  }
  return found;
}

}  // namespace

void make_batch_constants_symbolic(Graph& at_batch, const Graph& at_batch_plus_one, int64_t batch,
                                   const std::string& batch_input) {
  pb::GraphProto& g = at_batch.graph();
  const pb::GraphProto& wider = at_batch_plus_one.model.graph();
  MT_CHECK(g.node_size() == wider.node_size() && g.initializer_size() == wider.initializer_size(), kOp,
           "the traced graph changes with the batch size (", g.node_size(), " nodes at batch ", batch, ", ",
           wider.node_size(), " at batch ", batch + 1, "): export with dynamic_batch = false");
  std::vector<int> symbolic;  // initializers of g that become Expand nodes
  std::vector<int> dims;      // their batch dim
  for (int i = 0; i < g.initializer_size(); ++i) {
    const pb::TensorProto& a = g.initializer(i);
    const pb::TensorProto& b = wider.initializer(i);
    MT_CHECK(a.name() == b.name(), kOp, "the traced graph changes with the batch size ('", a.name(), "' at batch ",
             batch, ", '", b.name(), "' at batch ", batch + 1, "): export with dynamic_batch = false");
    if (a.data_type() == b.data_type() && a.dims_size() == b.dims_size() &&
        std::equal(a.dims().begin(), a.dims().end(), b.dims().begin()) && a.raw_data() == b.raw_data())
      continue;
    const int d = batch_dim(a, b, batch);
    const std::string va = uniform_value(a);
    MT_CHECK(d >= 0 && a.data_type() == b.data_type() && !va.empty() && va == uniform_value(b), kOp, "constant '",
             a.name(), "' (shape ", dims_str(a), " at batch ", batch, ", ", dims_str(b), " at batch ", batch + 1,
             "), read by node '", reader_of(g, a.name()),
             "', depends on the batch size in a way a dynamic batch cannot express (only a fill of one value "
             "shaped after the batch can be): build it from the inputs, or export with dynamic_batch = false");
    symbolic.push_back(i);
    dims.push_back(d);
  }
  if (symbolic.empty()) return;

  const int first_new = g.node_size();
  const std::string batch_size =
      at_batch.node("Shape", {batch_input}, {Attribute::integer("start", 0), Attribute::integer("end", 1)});
  at_batch.set_dtype(batch_size, DType::Int64);
  std::vector<std::string> names;
  for (size_t k = 0; k < symbolic.size(); ++k) {
    const pb::TensorProto c = g.initializer(symbolic[k]);  // a copy: the graph grows below
    const std::string& name = c.name();
    std::vector<int64_t> before(c.dims().begin(), c.dims().begin() + dims[k]);
    std::vector<int64_t> after(c.dims().begin() + dims[k] + 1, c.dims().end());
    std::vector<std::string> parts;
    if (!before.empty()) parts.push_back(at_batch.ints(before));
    parts.push_back(batch_size);
    if (!after.empty()) parts.push_back(at_batch.ints(after));
    const std::string shape =
        parts.size() == 1 ? batch_size : at_batch.node("Concat", parts, {Attribute::integer("axis", 0)});
    Tensor v = empty({}, {.dtype = at_batch.dtype_of(name)});
    std::memcpy(v.raw_data(), c.raw_data().data(), v.nbytes());
    at_batch.node("Expand", {at_batch.constant(v), shape});
    *g.mutable_node(g.node_size() - 1)->mutable_output(0) = name;  // the constant's readers read it
    names.push_back(name);
  }
  // Drop the fills' initializers, and move the new nodes (they read only the input and
  // initializers) in front of their readers.
  pb::GraphProto kept;
  for (const pb::TensorProto& t : g.initializer())
    if (std::find(names.begin(), names.end(), t.name()) == names.end()) *kept.add_initializer() = t;
  g.mutable_initializer()->Swap(kept.mutable_initializer());
  for (int i = first_new; i < g.node_size(); ++i) *kept.add_node() = g.node(i);
  for (int i = 0; i < first_new; ++i) *kept.add_node() = g.node(i);
  g.mutable_node()->Swap(kept.mutable_node());
}

}  // namespace mantissa::onnx
