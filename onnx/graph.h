// The ONNX graph being built (a ModelProto), behind the NodeBuilder interface that custom
// exporters see. Internal to mantissa::onnx.
#pragma once
#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "onnx/custom.h"

namespace mantissa::onnx {

namespace pb = ::onnx;

// ONNX's TensorProto element type for a Mantissa dtype.
int onnx_type(DType t);

class Graph final : public NodeBuilder {
 public:
  explicit Graph(const std::string& name);

  std::string node(const std::string& op_type, const std::vector<std::string>& inputs,
                   const std::vector<Attribute>& attributes = {}) override;
  // A node with `outputs` outputs; their dtypes default to the first input's.
  std::vector<std::string> node_n(const std::string& op_type, const std::vector<std::string>& inputs,
                                  const std::vector<Attribute>& attributes, int outputs);
  std::string constant(const Tensor& t) override;
  std::string scalar(double v, DType dtype) override;
  DType dtype_of(const std::string& value) const override;

  // An int64 1-D constant.
  std::string ints(const std::vector<int64_t>& v);
  // A Cast node, or `value` itself when it already has `dtype`.
  std::string cast(const std::string& value, DType dtype);
  // A named initializer (a parameter or buffer); t is any CPU tensor.
  void initializer(const std::string& name, const Tensor& t);
  // A graph input or output; dim 0 is the symbolic "batch" when `dynamic_batch`.
  void input(const std::string& name, DType dtype, const Shape& shape, bool dynamic_batch);
  void output(const std::string& name, DType dtype, const Shape& shape, bool dynamic_batch);
  void set_dtype(const std::string& value, DType dtype) { dtypes_[value] = dtype; }

  // Prefix of node names (the module path that dispatched the kernel).
  std::string scope;
  pb::ModelProto model;
  pb::GraphProto& graph() { return *model.mutable_graph(); }

 private:
  std::string fresh(const std::string& prefix);
  void fill_tensor(pb::TensorProto& p, const Tensor& t);

  std::unordered_map<std::string, DType> dtypes_;
  std::map<std::string, int> counters_;
};

}  // namespace mantissa::onnx
