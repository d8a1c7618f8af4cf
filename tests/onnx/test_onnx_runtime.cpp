// Exported models in ONNX Runtime (onnxruntime-node, tools/onnx-runtime.sh) against Mantissa's
// own eval forward on the same input: every model of onnx_models.h, in fp32 and as fp16/bf16
// exports (bf16 with its rounding emulated, see emulate_bfloat16). Skipped where node or ONNX Runtime is not installed.
// Prints both latencies.
#include <gtest/gtest.h>
#include <omp.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "onnx/export.h"
#include "onnx_models.h"

namespace fs = std::filesystem;
namespace mt = mantissa;
using json = nlohmann::json;

namespace {

fs::path ort_dir() {
  if (const char* d = std::getenv("MANTISSA_ORT_DIR")) return d;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/nonexistent") / ".cache" / "mantissa-ort";
}

bool ort_available(std::string& why) {
  if (std::system("command -v node > /dev/null 2>&1") != 0) {
    why = "node is not installed";
    return false;
  }
  if (!fs::exists(ort_dir() / "node_modules" / "onnxruntime-node")) {
    why = "ONNX Runtime is not installed in " + ort_dir().string() + " (run tools/onnx-runtime.sh)";
    return false;
  }
  return true;
}

int threads() {
  const char* t = std::getenv("MANTISSA_ORT_THREADS");
  return t ? std::max(1, std::atoi(t)) : 1;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ONNX Runtime's CPU provider has no bfloat16 kernels for MatMul, Relu, Mul, ... (1.20), so a
// bfloat16 export runs there as its bfloat16 semantics: every bfloat16 value (initializer, op
// output, graph output) is computed in float32 and rounded to bfloat16 right away by a Cast pair,
// as a bfloat16 runtime with float32 accumulation stores it. Nodes, weights and fp32 islands are
// the exported model's own; only the storage type of the bfloat16 values changes.
void emulate_bfloat16(const fs::path& in, const fs::path& out) {
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(read_all(in)));
  ::onnx::ModelProto typed = m;
  ::onnx::shape_inference::InferShapes(typed);
  std::set<std::string> bf16;  // the values stored as bfloat16
  auto note = [&](const ::onnx::ValueInfoProto& v) {
    if (v.type().tensor_type().elem_type() == ::onnx::TensorProto::BFLOAT16) bf16.insert(v.name());
  };
  for (const auto& v : typed.graph().value_info()) note(v);
  for (const auto& v : typed.graph().output()) note(v);
  ::onnx::GraphProto& g = *m.mutable_graph();
  for (auto& t : *g.mutable_initializer()) {
    if (t.data_type() != ::onnx::TensorProto::BFLOAT16) continue;
    ASSERT_FALSE(t.raw_data().empty()) << t.name();
    std::string f(t.raw_data().size() * 2, '\0');  // bfloat16 is the high half of a float32
    for (size_t i = 0; i < t.raw_data().size() / 2; ++i) std::memcpy(&f[4 * i + 2], &t.raw_data()[2 * i], 2);
    t.set_data_type(::onnx::TensorProto::FLOAT);
    t.set_raw_data(f);
  }
  auto cast = [](const std::string& from, const std::string& to, int type) {
    ::onnx::NodeProto c;
    c.set_op_type("Cast");
    c.add_input(from);
    c.add_output(to);
    auto* a = c.add_attribute();
    a->set_name("to");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(type);
    return c;
  };
  ::onnx::GraphProto nodes;
  for (::onnx::NodeProto n : g.node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (n.op_type() == "Cast" && a.name() == "to" && a.i() == ::onnx::TensorProto::BFLOAT16)
        a.set_i(::onnx::TensorProto::FLOAT);  // the rounding follows below
      ASSERT_NE(a.t().data_type(), ::onnx::TensorProto::BFLOAT16) << n.op_type() << " has a bfloat16 attribute";
    }
    std::vector<::onnx::NodeProto> rounding;
    for (auto& o : *n.mutable_output()) {
      if (!bf16.count(o)) continue;
      const std::string name = o;
      o = name + "_f32";
      rounding.push_back(cast(name + "_f32", name + "_bf16", ::onnx::TensorProto::BFLOAT16));
      rounding.push_back(cast(name + "_bf16", name, ::onnx::TensorProto::FLOAT));
    }
    *nodes.add_node() = std::move(n);
    for (auto& c : rounding) *nodes.add_node() = std::move(c);
  }
  g.mutable_node()->Swap(nodes.mutable_node());
  g.clear_value_info();
  for (auto& o : *g.mutable_output())
    if (bf16.count(o.name())) o.mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::FLOAT);
  std::ofstream(out, std::ios::binary) << m.SerializeAsString();
}

struct OrtResult {
  mt::Tensor output;  // float32
  double latency_ms = 0;
  std::string error;  // set when ONNX Runtime could not run the model
};

OrtResult run_ort(const fs::path& model, const mt::Tensor& x, const fs::path& work, int runs) {
  fs::create_directories(work);
  const fs::path xin = work / "x.bin";
  mt::Tensor xc = x.contiguous();
  std::ofstream(xin, std::ios::binary).write(static_cast<const char*>(xc.raw_data()), std::streamsize(xc.nbytes()));
  json spec = {{"inputs", json::array({{{"name", "x"},
                                        {"dtype", x.dtype() == mt::kInt64 ? "int64" : "float32"},
                                        {"shape", x.sizes()},
                                        {"file", xin.string()}}})},
               {"runs", runs},
               {"threads", threads()}};
  std::ofstream(work / "spec.json") << spec.dump();
  const std::string cmd = "NODE_PATH='" + (ort_dir() / "node_modules").string() +
                          "' node '" MANTISSA_SOURCE_DIR "/tools/onnx-run.js' '" + model.string() + "' '" +
                          (work / "spec.json").string() + "' '" + work.string() + "' 2>&1";
  fs::remove(work / "result.json");
  std::string log;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) log += buf;
    if (::pclose(p) != 0) {
      OrtResult failed;
      failed.error = log.empty() ? "onnx-run failed" : log;
      return failed;
    }
  }
  json r = json::parse(read_all(work / "result.json"));
  const json& o = r["outputs"][0];
  mt::Shape shape = o["shape"].get<mt::Shape>();
  const std::string dt = o["dtype"];
  mt::Tensor t = mt::empty(shape, {.dtype = dt == "float16" ? mt::kHalf : mt::kFloat32});
  std::string bytes = read_all(o["file"].get<std::string>());
  EXPECT_EQ(bytes.size(), t.nbytes());
  std::memcpy(t.raw_data(), bytes.data(), std::min(bytes.size(), t.nbytes()));
  return {t.to(mt::kFloat32), r["latency_ms"].is_null() ? 0.0 : r["latency_ms"].get<double>(), {}};
}

double median_ms(const std::function<void()>& f, int runs) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

class OnnxRuntime : public ::testing::TestWithParam<mt::DType> {};

TEST_P(OnnxRuntime, OutputsMatchMantissa) {
  std::string why;
  if (!ort_available(why)) GTEST_SKIP() << why;
  const mt::DType dtype = GetParam();
  omp_set_num_threads(threads());
  // Relative to the largest output magnitude: 1e-5 in fp32; for half exports about 8 units in
  // the last place of the dtype (2^-10 fp16, 2^-7 bf16), since ONNX Runtime rounds between ops
  // where Mantissa fuses (bias epilogues, attention).
  const double tol = dtype == mt::kFloat32 ? 1e-5 : dtype == mt::kHalf ? 8.0 / 1024 : 8.0 / 128;
  const fs::path dir = fs::temp_directory_path() / ("mantissa_ort_" + std::to_string(::getpid()));
  for (auto& c : onnx_test::cases()) {
    SCOPED_TRACE(c.name);
    const fs::path model = dir / (c.name + "_" + mt::dtype_name(dtype) + ".onnx");
    fs::create_directories(dir);
    mt::onnx::export_model(*c.model, {c.input(2)}, model.string(),
                           {.input_names = {"x"}, .output_names = {"y"}, .dynamic_batch = true, .dtype = dtype});
    fs::path run_model = model;
    if (dtype == mt::kBFloat16) {
      run_model = dir / (c.name + "_bf16_emulated.onnx");
      emulate_bfloat16(model, run_model);
    }
    // A batch of 3, not the traced 2: the dynamic batch and the absence of baked-in values.
    mt::Tensor x = c.input(3);
    mt::Tensor ref;
    auto forward = [&] {
      mt::NoGradGuard ng;
      std::optional<mt::amp::Autocast> ac;
      if (dtype != mt::kFloat32) ac.emplace(dtype, true, mt::DeviceType::CPU);
      ref = (*c.model)(x);
    };
    c.model->eval();
    const int runs = 20;
    const double mt_ms = median_ms(forward, runs);
    OrtResult ort = run_ort(run_model, x, dir / (c.name + "_run"), runs);
    ASSERT_TRUE(ort.error.empty()) << ort.error;
    mt::Tensor r = ref.to(mt::kFloat32);
    ASSERT_EQ(ort.output.sizes(), r.sizes());
    const double scale = mt::amax(mt::abs(r)).item<double>();
    const double err = mt::amax(mt::abs(ort.output - r)).item<double>() / std::max(scale, 1e-30);
    std::printf(
        "onnxruntime %-8s %-8s batch 3, %d thread(s): max |ort - mantissa| / max |mantissa| = %.3g (tol %.3g); "
        "latency mantissa %.3f ms, onnxruntime %.3f ms\n",
        c.name.c_str(), mt::dtype_name(dtype), threads(), err, tol, mt_ms, ort.latency_ms);
    EXPECT_LE(err, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OnnxRuntime, ::testing::Values(mt::kFloat32, mt::kHalf, mt::kBFloat16),
                         [](const auto& info) { return std::string(mt::dtype_name(info.param)); });
