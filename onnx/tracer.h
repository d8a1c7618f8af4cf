// The kernel tracer behind onnx::export_model: installed on the exporting thread
// (core/trace.h), it hands out twins of the CPU kernel tables whose entries run the real
// kernel, then add the ONNX nodes that compute the kernel's outputs from its inputs.
//
// Values are tracked by storage: a graph input, a parameter or a kernel output owns its storage;
// a kernel argument that is a view of it (reshape, transpose, slice, select, expand) becomes
// Reshape/Slice/Transpose/Expand nodes from the strides. A tensor whose storage no traced kernel
// wrote (an arange, a mask built from constants) is a constant of the graph.
// Internal to mantissa::onnx.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"
#include "core/nn_kernels.h"
#include "core/trace.h"
#include "onnx/graph.h"

namespace mantissa::onnx {

// While one lives on this thread, the twin tables only run the real kernels (the exporter's own
// copies, a custom Function's inner kernels).
// The exporter registered for a custom Function, or null (onnx/custom.cpp).
const FunctionExporter* find_function_exporter(const std::string& name);

class SuspendTracing {
 public:
  SuspendTracing();
  ~SuspendTracing();
  SuspendTracing(const SuspendTracing&) = delete;
  SuspendTracing& operator=(const SuspendTracing&) = delete;
};

// A graph value standing for a tensor: its name, shape and the dim that holds the batch
// (-1: none), which turns into -1 in Reshape targets when the batch is dynamic.
struct Value {
  std::string name;
  Shape shape;
  int batch_dim = -1;
};

class KernelTracer final : public trace::Tracer {
 public:
  KernelTracer(Graph& g, bool dynamic_batch);
  ~KernelTracer() override;

  const Backend& backend() override;
  const NnKernels& nn_kernels() override;
  bool function_begin(const char* name) override;
  void function_end(const char* name, const std::vector<Tensor>& inputs, const autograd::Context& ctx,
                    const Tensor& output) override;

  // A graph input (its storage becomes value `name`).
  void add_input(const Tensor& t, const std::string& name, int batch_dim);
  // A parameter or buffer: an initializer named `name`, added when first used.
  void add_initializer(const Tensor& t, const std::string& name);
  // The graph value for `x` with x's shape (or, with `broadcast_ok`, with size 1 where x is
  // broadcast, for ops that broadcast themselves). Constants for tensors no kernel wrote.
  Value value_of(const Tensor& x, bool broadcast_ok = false);
  // Whether x's storage holds a traced value (not a constant).
  bool traced(const Tensor& x) const;
  // The tensors used as initializers, by name (for the half-precision weight pass).
  const std::unordered_map<std::string, Tensor>& initializers() const { return used_initializers_; }

  // The kernel handlers (called by the twin tables after the real kernel ran).
  void copy(const Tensor& src, const Tensor& dst);
  void fill(const Tensor& dst);
  void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b);
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double s0, double s1);
  void where(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& out);
  void reduce(ReduceOp op, const Tensor& in, const Tensor& out);
  void var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction);
  void softmax(const Tensor& in, const Tensor& out, bool log);
  void scan(const Tensor& in, const Tensor& out, bool product, bool reverse);
  void matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);
  void index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out);
  void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out);
  void conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g);
  void max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g);
  void avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g, bool adaptive);
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y, const Tensor& mean,
                  const Tensor& rstd);
  void group_norm(const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, double eps, const Tensor& y,
                  const Tensor& mean, const Tensor& rstd);
  void batch_norm_apply(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y);
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                 const Tensor& lse, const AttentionGeometry& g);
  void triangle(const Tensor& in, const Tensor& out, int64_t diagonal, bool upper);
  // A kernel without an ONNX mapping: throws when any tensor argument is traced.
  void unsupported(const char* kernel, const std::vector<const Tensor*>& args);

  // Whether kernels are recorded now (not suspended, not inside a custom Function's forward).
  bool recording() const;
  // The module whose forward dispatched the current kernel (from the profiler's module ranges).
  std::string module_path() const;
  std::vector<std::string> module_stack;  // filled by the exporter's profiler recorder
  // Names the next nodes after the current module.
  void sync_scope() { g_.scope = module_stack.empty() ? std::string() : module_stack.back(); }

 private:
  struct Entry {
    Tensor base;         // keeps the storage alive: its address is never reused while tracing
    Value value;         // empty name: not exportable (poison says why)
    std::string poison;  // why a later use must fail
    bool initializer = false;
  };
  // A piece of a storage that kernels fill slice by slice (cat writes each input into one).
  struct Piece {
    Tensor view;  // the slice written
    Value value;
  };
  void define(const Tensor& out, Value v);
  void define(const Tensor& out, const std::string& name, int batch_dim);
  // The pieces of x's storage joined into one value, when x is that whole storage: a Concat
  // along the dim the slices divide, unwritten gaps as constants of the values they hold.
  void join_pieces(const Tensor& x);
  void poison(const Tensor& out, const std::string& why);
  bool any_traced(std::initializer_list<const Tensor*> ts) const;
  // Reshape with the batch dim as -1 when dynamic.
  Value reshape(const Value& v, const Shape& target);
  Value expand(const Value& v, const Shape& target);
  Value as(const Value& v, DType dtype);
  // Output batch dim: the first input's that has one, when it fits out's rank.
  static int batch_of(std::initializer_list<const Value*> vs, size_t out_rank);
  [[noreturn]] void fail(const char* kernel, const std::string& why) const;

  Graph& g_;
  bool dynamic_batch_;
  std::unordered_map<const Storage*, Entry> entries_;
  std::unordered_map<const Storage*, std::vector<Piece>> pieces_;  // storages written in parts
  std::unordered_map<const Storage*, std::pair<Tensor, std::string>> pending_initializers_;
  std::unordered_map<std::string, Tensor> used_initializers_;
  int function_depth_ = 0;
};

}  // namespace mantissa::onnx
