// ONNX export: every exported model passes ONNX's checker and strict shape inference, carries
// the state-dict names and the user's input/output names, and failures leave no file behind.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "onnx/custom.h"
#include "onnx/export.h"
#include "onnx_models.h"

namespace fs = std::filesystem;
namespace mt = mantissa;
namespace F = mantissa::nn::functional;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("mantissa_onnx_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

::onnx::ModelProto load(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ss.str())) << p;
  return m;
}

// The checks the brief asks of every exported file, on the bytes as written.
void check_file(const fs::path& p) {
  ::onnx::ModelProto m = load(p);
  ASSERT_NO_THROW(::onnx::checker::check_model(m));
  ::onnx::ShapeInferenceOptions strict(true, 1, true);
  ASSERT_NO_THROW(::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(), strict));
  // Every node output got a type and shape.
  std::set<std::string> typed;
  for (const auto& v : m.graph().value_info()) typed.insert(v.name());
  for (const auto& v : m.graph().output()) typed.insert(v.name());
  for (const auto& n : m.graph().node())
    for (const std::string& o : n.output()) EXPECT_TRUE(typed.count(o)) << p << ": no inferred type for " << o;
}

std::set<std::string> op_types(const ::onnx::ModelProto& m) {
  std::set<std::string> s;
  for (const auto& n : m.graph().node()) s.insert(n.op_type());
  return s;
}

}  // namespace

class OnnxExport : public ::testing::TestWithParam<mt::DType> {};

TEST_P(OnnxExport, ModelsPassCheckerAndShapeInference) {
  const mt::DType dtype = GetParam();
  for (auto& c : onnx_test::cases()) {
    SCOPED_TRACE(c.name + " " + mt::dtype_name(dtype));
    const fs::path p = temp_dir() / (c.name + "_" + mt::dtype_name(dtype) + ".onnx");
    mt::onnx::export_model(*c.model, {c.input(2)}, p.string(),
                           {.input_names = {"x"}, .output_names = {"logits"}, .dynamic_batch = true, .dtype = dtype});
    check_file(p);
    ::onnx::ModelProto m = load(p);
    ASSERT_EQ(m.graph().input_size(), 1);
    EXPECT_EQ(m.graph().input(0).name(), "x");
    EXPECT_EQ(m.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
    ASSERT_EQ(m.graph().output_size(), 1);
    EXPECT_EQ(m.graph().output(0).name(), "logits");
    EXPECT_EQ(m.opset_import(0).version(), 17);
    // Initializers named by the state dict: every parameter is one (tied weights once).
    std::set<std::string> inits;
    for (const auto& t : m.graph().initializer()) inits.insert(t.name());
    for (auto& [name, t] : c.model->named_parameters()) EXPECT_TRUE(inits.count(name)) << name;
    if (dtype != mt::kFloat32) {
      // Weights of the GEMMs in half precision, norm parameters in fp32.
      const int want = dtype == mt::kHalf ? ::onnx::TensorProto::FLOAT16 : ::onnx::TensorProto::BFLOAT16;
      int half = 0;
      for (const auto& t : m.graph().initializer()) {
        const bool gemm_weight = t.name().size() > 7 && t.name().substr(t.name().size() - 7) == ".weight" &&
                                 t.dims_size() >= 2 && t.name().find("emb") == std::string::npos;
        if (gemm_weight) {
          EXPECT_EQ(t.data_type(), want) << t.name();
          ++half;
        }
        if (t.name().find("ln") != std::string::npos && t.dims_size() == 1) {
          EXPECT_EQ(t.data_type(), ::onnx::TensorProto::FLOAT) << t.name();
        }
      }
      EXPECT_GT(half, 0);
    }
    std::set<std::string> ops = op_types(m);
    if (c.name == "cnn" || c.name == "resnet20") {
      EXPECT_TRUE(ops.count("Conv"));
    }
    if (c.name == "gpt") {
      EXPECT_TRUE(ops.count("Softmax") && ops.count("Where") && ops.count("LayerNormalization") && ops.count("Gather"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OnnxExport, ::testing::Values(mt::kFloat32, mt::kHalf, mt::kBFloat16),
                         [](const auto& info) { return std::string(mt::dtype_name(info.param)); });

TEST(OnnxExportErrors, FusedResNetExports) {
  mt::manual_seed(1);
  mt::nn::Conv2d conv(3, 8, 3, {.padding = 1, .bias = false});
  mt::nn::BatchNorm2d bn(8);
  bn.eval();
  mt::nn::Conv2d fused = mt::nn::fuse_conv_bn(conv, bn);
  const fs::path p = temp_dir() / "fused.onnx";
  mt::onnx::export_model(fused, {mt::randn({1, 3, 8, 8})}, p.string());
  check_file(p);
  EXPECT_TRUE(op_types(load(p)).count("Conv"));
}

// An op without an ONNX mapping: unfold's im2col kernel.
struct Unfolds : mt::nn::Module {
  mt::nn::Linear fc{27, 4};
  Unfolds() { register_module("fc", fc); }
  mt::Tensor forward(const mt::Tensor& x) override { return fc(F::unfold(x, {3, 3}).transpose(1, 2)); }
};

struct Outer : mt::nn::Module {
  Unfolds inner;
  Outer() { register_module("features", inner); }
  mt::Tensor forward(const mt::Tensor& x) override { return inner(x); }
};

TEST(OnnxExportErrors, UnsupportedOpNamesOpAndModuleAndLeavesNoFile) {
  Outer m;
  const fs::path p = temp_dir() / "unsupported.onnx";
  fs::remove(p);
  try {
    mt::onnx::export_model(m, {mt::randn({1, 3, 5, 5})}, p.string());
    FAIL() << "no error";
  } catch (const mt::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("im2col"), std::string::npos) << w;
    EXPECT_NE(w.find("'features'"), std::string::npos) << w;
  }
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
}

// arange(x.size(0)) is a constant whose values follow the batch: no dynamic-batch graph holds it.
struct RowIndex : mt::nn::Module {
  mt::Tensor forward(const mt::Tensor& x) override {
    return x + mt::arange(0, double(x.size(0)), 1, {.dtype = mt::kFloat32}).unsqueeze(1);
  }
};

TEST(OnnxExportErrors, BatchDependentConstantsAreSymbolicOrRejected) {
  const fs::path p = temp_dir() / "batch.onnx";
  fs::remove(p);
  onnx_test::BatchFills fills;
  mt::onnx::ExportOptions dynamic;
  dynamic.dynamic_batch = true;
  mt::onnx::export_model(fills, {mt::randn({2, 8})}, p.string(), dynamic);
  ::onnx::ModelProto m;
  std::ifstream f(p, std::ios::binary);
  ASSERT_TRUE(m.ParseFromIstream(&f));
  int expands = 0;
  for (const auto& n : m.graph().node()) expands += n.op_type() == "Expand";
  EXPECT_EQ(expands, 3);                           // zeros [batch, 2], full [batch, 8], full [8, batch]
  for (const auto& t : m.graph().initializer()) {  // the fills are 0-dim values, Expanded at run time
    if (t.dims_size() > 1) {
      EXPECT_EQ(t.name(), "fc.weight") << t.name() << " holds the traced batch";
    }
  }
  // An example batch of 1 (as the examples export) is traced as 2: its Reshape targets hold -1.
  mt::onnx::export_model(fills, {mt::randn({1, 8})}, p.string(), dynamic);
  // A static export keeps the constants as they are.
  mt::onnx::export_model(fills, {mt::randn({2, 8})}, p.string());
  RowIndex rows;
  fs::remove(p);
  try {
    mt::onnx::export_model(rows, {mt::randn({2, 3})}, p.string(), dynamic);
    FAIL() << "no error";
  } catch (const mt::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("depends on the batch size"), std::string::npos) << w;
    EXPECT_NE(w.find("[2, 1]"), std::string::npos) << w;
  }
  EXPECT_FALSE(fs::exists(p));
  mt::onnx::export_model(rows, {mt::randn({2, 3})}, p.string());  // a fixed batch of 2 is fine
  // cumprod along a dynamic batch: its shifted products would be sized by the traced batch.
  struct BatchCumprod : mt::nn::Module {
    mt::Tensor forward(const mt::Tensor& x) override { return mt::cumprod(x, 0); }
  } cumprod;
  fs::remove(p);
  try {
    mt::onnx::export_model(cumprod, {mt::randn({4, 3})}, p.string(), dynamic);
    FAIL() << "no error";
  } catch (const mt::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("cumprod along the dynamic batch"), std::string::npos) << w;
  }
  EXPECT_FALSE(fs::exists(p));
  mt::onnx::export_model(cumprod, {mt::randn({4, 3})}, p.string());
}

TEST(OnnxExportErrors, NonTensorOrConstantOutputFails) {
  mt::nn::Linear fc(3, 2);
  const fs::path p = temp_dir() / "bad_output.onnx";
  fs::remove(p);
  auto undefined = [&](const std::vector<mt::Tensor>& in) { return std::vector<mt::Tensor>{fc(in[0]), mt::Tensor()}; };
  EXPECT_THROW(
      {
        try {
          mt::onnx::export_function(undefined, &fc, {mt::randn({2, 3})}, p.string());
        } catch (const mt::Error& e) {
          EXPECT_NE(std::string(e.what()).find("not a tensor"), std::string::npos) << e.what();
          throw;
        }
      },
      mt::Error);
  auto constant = [](const std::vector<mt::Tensor>&) { return std::vector<mt::Tensor>{mt::ones({2})}; };
  EXPECT_THROW(mt::onnx::export_function(constant, nullptr, {mt::randn({2, 3})}, p.string()), mt::Error);
  EXPECT_FALSE(fs::exists(p));
}

TEST(OnnxExportErrors, UnwritablePathFailsAndPreviousFileIsKept) {
  mt::nn::Linear fc(3, 2);
  EXPECT_THROW(mt::onnx::export_model(fc, {mt::randn({2, 3})}, "/nonexistent-dir/model.onnx"), mt::Error);
  EXPECT_FALSE(fs::exists("/nonexistent-dir/model.onnx"));
  // A failing export over an existing file keeps the old bytes.
  const fs::path p = temp_dir() / "keep.onnx";
  { std::ofstream(p) << "previous"; }
  Outer bad;
  EXPECT_THROW(mt::onnx::export_model(bad, {mt::randn({1, 3, 5, 5})}, p.string()), mt::Error);
  std::ifstream f(p);
  std::string s;
  f >> s;
  EXPECT_EQ(s, "previous");
}

// A custom Function with its own exporter is one ONNX node, not the kernels of its forward.
struct Cube : mt::autograd::Function<Cube> {
  static constexpr const char* name = "onnx_test_cube";
  static mt::Tensor forward(mt::autograd::Context& ctx, const mt::Tensor& x) {
    ctx.save_for_backward({x});
    return x * x * x;
  }
  static std::vector<mt::Tensor> backward(mt::autograd::Context& ctx, const mt::Tensor& g) {
    mt::Tensor x = ctx.saved()[0];
    return {g * 3 * x * x};
  }
};

TEST(OnnxExport, CustomFunctionUsesItsExporter) {
  mt::nn::Linear fc(4, 3);
  auto fn = [&](const std::vector<mt::Tensor>& in) { return std::vector<mt::Tensor>{Cube::apply(fc(in[0]))}; };
  const fs::path plain = temp_dir() / "cube_plain.onnx", custom = temp_dir() / "cube_custom.onnx";
  mt::onnx::export_function(fn, &fc, {mt::randn({2, 4})}, plain.string());
  EXPECT_FALSE(op_types(load(plain)).count("Pow"));  // traced as its forward's Muls
  mt::onnx::register_function_exporter(
      Cube::name, [](mt::onnx::NodeBuilder& g, const std::vector<std::string>& in, const mt::autograd::Context&) {
        return g.node("Pow", {in[0], g.scalar(3, g.dtype_of(in[0]))});
      });
  mt::onnx::export_function(fn, &fc, {mt::randn({2, 4})}, custom.string());
  check_file(custom);
  EXPECT_TRUE(op_types(load(custom)).count("Pow"));
}

TEST(OnnxExport, TrainingModeAndGradModeAreRestored) {
  mnist::Mlp m;
  m.train();
  mt::onnx::export_model(m, {mt::randn({1, 784})}, (temp_dir() / "mode.onnx").string());
  EXPECT_TRUE(m.is_training());
  EXPECT_TRUE(m.fc1.is_training());
  EXPECT_TRUE(mt::GradMode::is_enabled());
}
