#include "onnx/graph.h"

#include <cstring>

#include "core/error.h"
#include "core/launch.h"
#include "onnx/tracer.h"

namespace mantissa::onnx {

int onnx_type(DType t) {
  switch (t) {
    case DType::Float32:
      return pb::TensorProto::FLOAT;
    case DType::Float64:
      return pb::TensorProto::DOUBLE;
    case DType::Float16:
      return pb::TensorProto::FLOAT16;
    case DType::BFloat16:
      return pb::TensorProto::BFLOAT16;
    case DType::Int64:
      return pb::TensorProto::INT64;
    case DType::Int32:
      return pb::TensorProto::INT32;
    case DType::UInt8:
      return pb::TensorProto::UINT8;
    case DType::Bool:
      return pb::TensorProto::BOOL;
  }
  return pb::TensorProto::UNDEFINED;
}

Graph::Graph(const std::string& name) {
  model.set_ir_version(8);  // ONNX 1.12 (opset 17)
  model.set_producer_name("mantissa");
  model.set_producer_version("0.1.0");
  pb::OperatorSetIdProto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  graph().set_name(name);
}

std::string Graph::fresh(const std::string& prefix) { return prefix + "_" + std::to_string(counters_[prefix]++); }

namespace {
// Opset 17 ops whose type constraints leave out a half dtype that Mantissa computes them in.
// They run in fp32 between Casts: exact for the inputs, and Mantissa accumulates in fp32 and
// rounds once too.
bool lacks_type(const std::string& op, DType t) {
  static const char* const kNoBf16[] = {
      "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Sin", "Cos", "Softplus", "ArgMax", "ArgMin", "IsInf"};
  if (t == DType::BFloat16)
    for (const char* o : kNoBf16)
      if (op == o) return true;
  return t == DType::Float16 && op == "IsInf";
}
}  // namespace

std::vector<std::string> Graph::node_n(const std::string& op_type, const std::vector<std::string>& inputs,
                                       const std::vector<Attribute>& attributes, int outputs) {
  if (!inputs.empty() && !inputs[0].empty() && lacks_type(op_type, dtype_of(inputs[0]))) {
    const DType half = dtype_of(inputs[0]);
    std::vector<std::string> wide;
    wide.reserve(inputs.size());
    for (const std::string& i : inputs) wide.push_back(i.empty() || dtype_of(i) != half ? i : cast(i, DType::Float32));
    std::vector<std::string> out = node_n(op_type, wide, attributes, outputs);
    for (std::string& o : out)
      if (dtype_of(o) == DType::Float32) o = cast(o, half);
    return out;
  }
  pb::NodeProto* n = graph().add_node();
  n->set_op_type(op_type);
  n->set_name(fresh((scope.empty() ? std::string() : scope + "/") + op_type));
  for (const std::string& i : inputs) n->add_input(i);
  for (const Attribute& a : attributes) {
    pb::AttributeProto* p = n->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
      case Attribute::Kind::Int:
        p->set_type(pb::AttributeProto::INT);
        p->set_i(a.i);
        break;
      case Attribute::Kind::Float:
        p->set_type(pb::AttributeProto::FLOAT);
        p->set_f(a.f);
        break;
      case Attribute::Kind::String:
        p->set_type(pb::AttributeProto::STRING);
        p->set_s(a.s);
        break;
      case Attribute::Kind::Ints:
        p->set_type(pb::AttributeProto::INTS);
        for (int64_t v : a.ints) p->add_ints(v);
        break;
    }
  }
  // The natural output dtype, for dtype_of() and later Cast decisions.
  DType t = inputs.empty() || inputs[0].empty() ? DType::Float32 : dtype_of(inputs[0]);
  static const char* const kBool[] = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                                      "Not",   "And",  "Or",          "IsInf",   "IsNaN"};
  for (const char* b : kBool)
    if (op_type == b) t = DType::Bool;
  if (op_type == "ArgMax" || op_type == "ArgMin" || op_type == "Shape") t = DType::Int64;
  if (op_type == "Where" && inputs.size() > 1) t = dtype_of(inputs[1]);
  std::vector<std::string> out;
  for (int i = 0; i < outputs; ++i) {
    std::string name = fresh(op_type);
    n->add_output(name);
    dtypes_[name] = t;
    out.push_back(name);
  }
  if (op_type == "Cast")
    for (const Attribute& a : attributes)
      if (a.name == "to")
        for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32,
                        DType::UInt8, DType::Bool})
          if (onnx_type(d) == a.i) dtypes_[out[0]] = d;
  return out;
}

std::string Graph::node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<Attribute>& attributes) {
  return node_n(op_type, inputs, attributes, 1)[0];
}

void Graph::fill_tensor(pb::TensorProto& p, const Tensor& t) {
  MT_CHECK(t.device().is_cpu(), "onnx export", "constants must be CPU tensors, got one on ", t.device().str());
  SuspendTracing s;  // copying the values dispatches kernels that are not part of the model
  Tensor c = launch::contiguous(t);
  p.set_data_type(onnx_type(t.dtype()));
  for (int64_t d : t.sizes()) p.add_dims(d);
  p.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), c.nbytes()));
}

std::string Graph::constant(const Tensor& t) {
  std::string name = fresh("const");
  fill_tensor(*graph().add_initializer(), t);
  graph().mutable_initializer(graph().initializer_size() - 1)->set_name(name);
  dtypes_[name] = t.dtype();
  return name;
}

void Graph::initializer(const std::string& name, const Tensor& t) {
  pb::TensorProto* p = graph().add_initializer();
  fill_tensor(*p, t);
  p->set_name(name);
  dtypes_[name] = t.dtype();
}

std::string Graph::scalar(double v, DType dtype) {
  SuspendTracing s;
  return constant(full({}, v, {.dtype = dtype}));
}

std::string Graph::ints(const std::vector<int64_t>& v) {
  SuspendTracing s;
  return constant(from_vector<int64_t>(v, {int64_t(v.size())}));
}

std::string Graph::cast(const std::string& value, DType dtype) {
  if (dtype_of(value) == dtype) return value;
  return node("Cast", {value}, {Attribute::integer("to", onnx_type(dtype))});
}

DType Graph::dtype_of(const std::string& value) const {
  auto it = dtypes_.find(value);
  MT_CHECK(it != dtypes_.end(), "onnx export", "unknown value '", value, "'");
  return it->second;
}

namespace {
void set_type(pb::ValueInfoProto* v, DType dtype, const Shape& shape, bool dynamic_batch) {
  pb::TypeProto_Tensor* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(dtype));
  pb::TensorShapeProto* s = tt->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    pb::TensorShapeProto_Dimension* d = s->add_dim();
    if (i == 0 && dynamic_batch)
      d->set_dim_param("batch");
    else
      d->set_dim_value(shape[i]);
  }
}
}  // namespace

void Graph::input(const std::string& name, DType dtype, const Shape& shape, bool dynamic_batch) {
  pb::ValueInfoProto* v = graph().add_input();
  v->set_name(name);
  set_type(v, dtype, shape, dynamic_batch);
  dtypes_[name] = dtype;
}

void Graph::output(const std::string& name, DType dtype, const Shape& shape, bool dynamic_batch) {
  pb::ValueInfoProto* v = graph().add_output();
  v->set_name(name);
  set_type(v, dtype, shape, dynamic_batch);
}

}  // namespace mantissa::onnx
