#include "onnx/export.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <optional>
#include <thread>

#include "amp/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/profiler.h"
#include "onnx/symbolic_batch.h"
#include "onnx/tracer.h"

namespace mantissa::onnx {

namespace {

constexpr const char* kOp = "onnx export";

// Module paths for error messages: nn::Module::operator() opens a profiler range named after
// its path while a recorder is installed. Calls of other threads are passed on only.
class PathRecorder final : public profiler::Recorder {
 public:
  explicit PathRecorder(KernelTracer& t) : tracer_(t), owner_(std::this_thread::get_id()) {
    prev_ = profiler::set_recorder(this);
  }
  ~PathRecorder() override { profiler::set_recorder(prev_); }
  PathRecorder(const PathRecorder&) = delete;
  PathRecorder& operator=(const PathRecorder&) = delete;

  void begin(const char* name, profiler::Kind kind, const profiler::OpInfo* op) override {
    if (prev_ != nullptr) prev_->begin(name, kind, op);
    if (std::this_thread::get_id() != owner_) return;
    kinds_.push_back(kind);
    if (kind == profiler::Kind::Module) tracer_.module_stack.emplace_back(name);
  }
  void end() override {
    if (prev_ != nullptr) prev_->end();
    if (std::this_thread::get_id() != owner_ || kinds_.empty()) return;
    if (kinds_.back() == profiler::Kind::Module && !tracer_.module_stack.empty()) tracer_.module_stack.pop_back();
    kinds_.pop_back();
  }
  void note(const char* name, const char* detail, double value) override {
    if (prev_ != nullptr) prev_->note(name, detail, value);
  }

 private:
  KernelTracer& tracer_;
  std::thread::id owner_;
  profiler::Recorder* prev_ = nullptr;
  std::vector<profiler::Kind> kinds_;
};

// Restores every module's training flag (train() recurses, so parents go first).
class EvalMode {
 public:
  explicit EvalMode(nn::Module* m) {
    if (m == nullptr) return;
    modes_.emplace_back(m, m->is_training());
    for (auto& [name, sub] : m->named_modules()) modes_.emplace_back(sub, sub->is_training());
    m->eval();
  }
  ~EvalMode() {
    for (auto& [m, on] : modes_) m->train(on);
  }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  std::vector<std::pair<nn::Module*, bool>> modes_;
};

// Half-precision weights: an fp32 initializer read only through Casts to one dtype is stored in
// that dtype instead (the Casts go).
void store_weights_in_half(Graph& g, const std::unordered_map<std::string, Tensor>& initializers) {
  pb::GraphProto& graph = g.graph();
  std::unordered_map<std::string, std::vector<int>> consumers;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string& in : graph.node(i).input()) consumers[in].push_back(i);
  std::unordered_map<std::string, std::string> rename;  // cast output -> initializer
  std::vector<bool> drop(size_t(graph.node_size()), false);
  for (const auto& [name, t] : initializers) {
    if (t.dtype() != DType::Float32) continue;
    const std::vector<int>& uses = consumers[name];
    int to = -1;
    bool only_casts = !uses.empty();
    for (int i : uses) {
      const pb::NodeProto& n = graph.node(i);
      if (n.op_type() != "Cast" || n.attribute_size() != 1) {
        only_casts = false;
        break;
      }
      const int64_t dst = n.attribute(0).i();
      if (dst != pb::TensorProto::FLOAT16 && dst != pb::TensorProto::BFLOAT16) only_casts = false;
      if (to >= 0 && dst != to) only_casts = false;
      to = int(dst);
    }
    if (!only_casts) continue;
    for (pb::TensorProto& p : *graph.mutable_initializer()) {
      if (p.name() != name) continue;
      SuspendTracing s;
      Tensor h = t.to(to == pb::TensorProto::FLOAT16 ? DType::Float16 : DType::BFloat16).contiguous();
      p.set_data_type(to);
      p.set_raw_data(std::string(static_cast<const char*>(h.raw_data()), h.nbytes()));
    }
    for (int i : uses) {
      drop[size_t(i)] = true;
      rename[graph.node(i).output(0)] = name;
    }
  }
  pb::GraphProto kept;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (drop[size_t(i)]) continue;
    pb::NodeProto n = graph.node(i);
    for (std::string& in : *n.mutable_input())
      if (auto it = rename.find(in); it != rename.end()) in = it->second;
    *kept.add_node() = std::move(n);
  }
  for (pb::ValueInfoProto& o : *graph.mutable_output())
    if (rename.count(o.name())) MT_FAIL(kOp, "an output is a weight");
  graph.mutable_node()->Swap(kept.mutable_node());
}

// The model bytes at `path`, through the one atomic writer (core/atomic_file.h) that
// checkpoints use: a failure leaves any previous file unchanged and no temporary behind.
void write_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(kOp, path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

std::string name_at(const std::vector<std::string>& names, size_t i, const char* prefix) {
  return i < names.size() ? names[i] : prefix + std::to_string(i);
}

// One traced forward of fn into g (inputs, nodes, outputs); returns the initializers it reads.
std::unordered_map<std::string, Tensor> trace_into(Graph& g, const TracedFn& fn, nn::Module* module,
                                                   const std::vector<Tensor>& inputs, const ExportOptions& options) {
  KernelTracer tracer(g, options.dynamic_batch);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = name_at(options.input_names, i, "input");
    g.input(name, inputs[i].dtype(), inputs[i].sizes(), options.dynamic_batch);
    tracer.add_input(inputs[i], name, options.dynamic_batch ? 0 : -1);
  }
  if (module != nullptr) {
    for (auto& [name, t] : module->named_parameters()) {
      MT_CHECK(t.device().is_cpu(), kOp, "parameter '", name, "' is on ", t.device().str(),
               ": export traces on the CPU (module.to(mt::Device::cpu()))");
      tracer.add_initializer(t, name);
      t.bump_version();  // so autocast re-casts it (a traced Cast) instead of reusing a cached copy
    }
    for (auto& [name, t] : module->named_buffers()) tracer.add_initializer(t, name);
  }

  std::vector<Tensor> outputs;
  {
    EvalMode eval(module);
    NoGradGuard no_grad;
    std::optional<amp::Autocast> autocast;
    if (options.dtype != DType::Float32) autocast.emplace(options.dtype, true, DeviceType::CPU);
    PathRecorder paths(tracer);
    trace::Guard guard(&tracer);
    outputs = fn(inputs);
  }
  MT_CHECK(!outputs.empty(), kOp, "the forward returned no tensor");
  MT_CHECK(options.output_names.empty() || options.output_names.size() == outputs.size(), kOp, "got ",
           options.output_names.size(), " output names for ", outputs.size(), " outputs");
  g.scope.clear();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string name = name_at(options.output_names, i, "output");
    MT_CHECK(outputs[i].defined(), kOp, "output ", i, " ('", name, "') is not a tensor (undefined)");
    MT_CHECK(tracer.traced(outputs[i]), kOp, "output ", i, " ('", name,
             "') is not computed from the inputs (a constant, or computed outside Mantissa's kernels)");
    Value v = tracer.value_of(outputs[i]);
    pb::NodeProto* n = g.graph().add_node();
    n->set_op_type("Identity");
    n->set_name("output/" + name);
    n->add_input(v.name);
    n->add_output(name);
    g.output(name, outputs[i].dtype(), outputs[i].sizes(), options.dynamic_batch && outputs[i].dim() > 0);
  }
  return tracer.initializers();
}

// The inputs with their first row repeated once more: the same forward at batch + 1.
std::vector<Tensor> one_more_row(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor& x : inputs) out.push_back(cat({x, x.narrow(0, 0, 1)}, 0));
  return out;
}

}  // namespace

void export_function(const TracedFn& fn, nn::Module* module, const std::vector<Tensor>& inputs, const std::string& path,
                     const ExportOptions& options) {
  MT_CHECK(fn != nullptr, kOp, "no function to export");
  MT_CHECK(!path.empty(), kOp, "empty path");
  MT_CHECK(options.dtype == DType::Float32 || options.dtype == DType::Float16 || options.dtype == DType::BFloat16, kOp,
           "dtype must be float32, float16 or bfloat16, got ", dtype_name(options.dtype));
  MT_CHECK(options.input_names.empty() || options.input_names.size() == inputs.size(), kOp, "got ",
           options.input_names.size(), " input names for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    MT_CHECK(inputs[i].defined(), kOp, "input ", i, " is undefined");
    MT_CHECK(inputs[i].device().is_cpu(), kOp, "input ", i, " is on ", inputs[i].device().str(),
             ": export traces on the CPU (move the module and inputs there)");
    MT_CHECK(!options.dynamic_batch || inputs[i].dim() > 0, kOp, "dynamic_batch needs inputs with a batch dim, input ",
             i, " is 0-dim");
    MT_CHECK(!options.dynamic_batch || (inputs[i].size(0) > 0 && inputs[i].size(0) == inputs[0].size(0)), kOp,
             "dynamic_batch needs inputs of one non-zero batch size, input ", i, " has shape ", inputs[i].shape_str());
  }

  // A batch of 1 is traced as 2 (the first row twice): at size 1 the batch dim cannot be told
  // from the other size-1 dims, and a Reshape target would hold that 1.
  const std::vector<Tensor> traced = options.dynamic_batch && inputs[0].size(0) == 1 ? one_more_row(inputs) : inputs;
  Graph g(options.graph_name);
  const std::unordered_map<std::string, Tensor> initializers = trace_into(g, fn, module, traced, options);
  if (options.dynamic_batch) {
    Graph wider(options.graph_name);
    trace_into(wider, fn, module, one_more_row(traced), options);
    make_batch_constants_symbolic(g, wider, traced[0].size(0), name_at(options.input_names, 0, "input"));
  }
  if (options.dtype != DType::Float32) store_weights_in_half(g, initializers);

  try {
    ::onnx::checker::check_model(g.model);
    ::onnx::ShapeInferenceOptions strict(true, 1, true);
    pb::ModelProto inferred = g.model;
    ::onnx::shape_inference::InferShapes(inferred, ::onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    MT_FAIL(kOp, "the exported graph fails ONNX's checks (nothing was written): ", e.what());
  }
  std::string bytes;
  MT_CHECK(g.model.SerializeToString(&bytes), kOp, "cannot serialize the model (over 2 GiB?)");
  write_atomically(path, bytes);
}

void export_model(nn::Module& module, const std::vector<Tensor>& inputs, const std::string& path,
                  const ExportOptions& options) {
  MT_CHECK(inputs.size() == 1, kOp, "nn::Module::forward takes one tensor, got ", inputs.size(),
           " example inputs (export_function traces any function)");
  export_function([&module](const std::vector<Tensor>& in) { return std::vector<Tensor>{module(in[0])}; }, &module,
                  inputs, path, options);
}

}  // namespace mantissa::onnx
