// ONNX's own backend node tests (Debian's libonnx-testdata: a one-node model with input and
// output protobufs per case) run through Mantissa's ops, not through the exporter. Every case
// whose op Mantissa implements runs; the per-op pass counts and totals are printed. A case
// that fails must be listed with its reason in tests/onnx/node_suite_failures.txt (and
// docs/onnx.md); a listed case that passes, or an unlisted failure, fails the test.
#include <gtest/gtest.h>
#include <mantissa.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
namespace mt = mantissa;
namespace F = mantissa::nn::functional;
namespace pb = ::onnx;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

mt::DType dtype_of(int t) {
  switch (t) {
    case pb::TensorProto::FLOAT:
      return mt::kFloat32;
    case pb::TensorProto::DOUBLE:
      return mt::kFloat64;
    case pb::TensorProto::FLOAT16:
      return mt::kHalf;
    case pb::TensorProto::BFLOAT16:
      return mt::kBFloat16;
    case pb::TensorProto::INT64:
      return mt::kInt64;
    case pb::TensorProto::INT32:
      return mt::kInt32;
    case pb::TensorProto::UINT8:
      return mt::kUInt8;
    case pb::TensorProto::BOOL:
      return mt::kBool;
    default:
      throw mt::Error("tensor element type " + std::to_string(t) + " has no Mantissa dtype");
  }
}

mt::Tensor to_tensor(const pb::TensorProto& p) {
  mt::Shape shape(p.dims().begin(), p.dims().end());
  mt::Tensor t = mt::empty(shape, {.dtype = dtype_of(p.data_type())});
  const size_t n = size_t(t.numel()), es = t.nbytes() / std::max<size_t>(n, 1);
  if (!p.raw_data().empty()) {
    if (p.raw_data().size() != t.nbytes()) throw mt::Error("raw data size mismatch");
    std::memcpy(t.raw_data(), p.raw_data().data(), t.nbytes());
  } else if (p.float_data_size() && t.dtype() == mt::kFloat32) {
    std::memcpy(t.raw_data(), p.float_data().data(), n * 4);
  } else if (p.double_data_size()) {
    std::memcpy(t.raw_data(), p.double_data().data(), n * 8);
  } else if (p.int64_data_size()) {
    std::memcpy(t.raw_data(), p.int64_data().data(), n * 8);
  } else if (p.int32_data_size()) {  // int32, bool, uint8, fp16 and bf16 values widened to int32
    for (size_t i = 0; i < n; ++i) {
      const int32_t v = p.int32_data(int(i));
      std::memcpy(static_cast<char*>(t.raw_data()) + i * es, &v, es);
    }
  } else if (n != 0) {
    throw mt::Error("tensor without data");
  }
  return t;
}

using Attrs = std::map<std::string, const pb::AttributeProto*>;
int64_t attr_i(const Attrs& a, const std::string& n, int64_t d) { return a.count(n) ? a.at(n)->i() : d; }
float attr_f(const Attrs& a, const std::string& n, float d) { return a.count(n) ? a.at(n)->f() : d; }
std::vector<int64_t> attr_ints(const Attrs& a, const std::string& n) {
  if (!a.count(n)) return {};
  return {a.at(n)->ints().begin(), a.at(n)->ints().end()};
}
void refuse(const Attrs& a, const std::string& n, const std::string& why) {
  if (a.count(n)) {
    const auto* p = a.at(n);
    if (p->type() == pb::AttributeProto::STRING && (p->s() == "NOTSET" || p->s().empty())) return;
    throw mt::Error("attribute " + n + ": " + why);
  }
}

using In = std::vector<mt::Tensor>;
using Op = std::function<std::vector<mt::Tensor>(const In&, const Attrs&)>;

int64_t wrap(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }
mt::Shape reduce_axes(const In& in, const Attrs& a, bool axes_input) {
  std::vector<int64_t> axes =
      axes_input ? (in.size() > 1 && in[1].defined() ? in[1].to_vector<int64_t>() : std::vector<int64_t>{})
                 : attr_ints(a, "axes");
  for (auto& d : axes) d = wrap(d, in[0].dim());
  return axes;
}
std::vector<mt::Tensor> one(const mt::Tensor& t) { return {t}; }

// Mantissa's op for each ONNX op type it implements.
const std::map<std::string, Op>& ops() {
  static const std::map<std::string, Op> m = [] {
    std::map<std::string, Op> m;
    auto unary = [&](const char* name, mt::Tensor (*f)(const mt::Tensor&)) {
      m[name] = [f](const In& in, const Attrs&) { return one(f(in[0])); };
    };
    unary("Abs", mt::abs);
    unary("Neg", mt::neg);
    unary("Exp", mt::exp);
    unary("Log", mt::log);
    unary("Sqrt", mt::sqrt);
    unary("Sin", mt::sin);
    unary("Cos", mt::cos);
    unary("Tanh", mt::tanh);
    unary("Sigmoid", mt::sigmoid);
    unary("Relu", mt::relu);
    unary("Erf", mt::erf);
    unary("Reciprocal", mt::reciprocal);
    unary("Sign", mt::sign);
    unary("Not", mt::logical_not);
    m["Softplus"] = [](const In& in, const Attrs&) { return one(mt::softplus(in[0])); };
    auto binary = [&](const char* name, mt::Tensor (*f)(const mt::Tensor&, const mt::Tensor&)) {
      m[name] = [f](const In& in, const Attrs&) { return one(f(in[0], in[1])); };
    };
    binary("Mul", mt::mul);
    binary("Div", mt::div);
    binary("Equal", mt::eq);
    binary("Less", mt::lt);
    binary("Greater", mt::gt);
    binary("LessOrEqual", mt::le);
    binary("GreaterOrEqual", mt::ge);
    binary("And", mt::logical_and);
    binary("Or", mt::logical_or);
    binary("MatMul", mt::matmul);
    m["Add"] = [](const In& in, const Attrs&) { return one(mt::add(in[0], in[1])); };
    m["Sub"] = [](const In& in, const Attrs&) { return one(mt::sub(in[0], in[1])); };
    m["Pow"] = [](const In& in, const Attrs&) { return one(mt::pow(in[0], in[1])); };
    m["Max"] = [](const In& in, const Attrs&) {
      mt::Tensor r = in[0];
      for (size_t i = 1; i < in.size(); ++i) r = mt::maximum(r, in[i]);
      return one(in.size() == 1 ? r.clone() : r);
    };
    m["Min"] = [](const In& in, const Attrs&) {
      mt::Tensor r = in[0];
      for (size_t i = 1; i < in.size(); ++i) r = mt::minimum(r, in[i]);
      return one(in.size() == 1 ? r.clone() : r);
    };
    m["Sum"] = [](const In& in, const Attrs&) {
      mt::Tensor r = in[0];
      for (size_t i = 1; i < in.size(); ++i) r = r + in[i];
      return one(in.size() == 1 ? r.clone() : r);
    };
    m["Where"] = [](const In& in, const Attrs&) { return one(mt::where(in[0], in[1], in[2])); };
    m["Identity"] = [](const In& in, const Attrs&) { return one(in[0].clone()); };
    m["Softmax"] = [](const In& in, const Attrs& a) { return one(mt::softmax(in[0], attr_i(a, "axis", -1))); };
    m["LogSoftmax"] = [](const In& in, const Attrs& a) { return one(mt::log_softmax(in[0], attr_i(a, "axis", -1))); };
    m["Transpose"] = [](const In& in, const Attrs& a) {
      std::vector<int64_t> perm = attr_ints(a, "perm");
      if (perm.empty())
        for (int64_t d = in[0].dim() - 1; d >= 0; --d) perm.push_back(d);
      return one(in[0].permute(perm).contiguous());
    };
    m["Reshape"] = [](const In& in, const Attrs& a) {
      std::vector<int64_t> s = in[1].to_vector<int64_t>();
      if (!attr_i(a, "allowzero", 0))
        for (size_t i = 0; i < s.size(); ++i)
          if (s[i] == 0) s[i] = in[0].size(int64_t(i));
      return one(in[0].reshape(s).contiguous());
    };
    m["Flatten"] = [](const In& in, const Attrs& a) {
      const int64_t axis = wrap(attr_i(a, "axis", 1), in[0].dim());
      int64_t outer = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= in[0].size(d);
      return one(in[0].reshape({outer, outer ? in[0].numel() / outer : 0}).contiguous());
    };
    m["Concat"] = [](const In& in, const Attrs& a) {
      return one(mt::cat(in, wrap(attr_i(a, "axis", 0), in[0].dim())));
    };
    m["Gather"] = [](const In& in, const Attrs& a) {
      const int64_t axis = wrap(attr_i(a, "axis", 0), in[0].dim());
      mt::Tensor idx = in[1].to(mt::kInt64);
      mt::Shape out = in[0].sizes();
      out.erase(out.begin() + axis);
      out.insert(out.begin() + axis, idx.sizes().begin(), idx.sizes().end());
      return one(mt::index_select(in[0], axis, idx.reshape({-1})).reshape(out).contiguous());
    };
    auto reduce = [&](const char* name, mt::Tensor (*f)(const mt::Tensor&, const mt::Shape&, bool), bool axes_input) {
      m[name] = [f, axes_input](const In& in, const Attrs& a) {
        mt::Shape axes = reduce_axes(in, a, axes_input);
        if (axes.empty() && attr_i(a, "noop_with_empty_axes", 0)) return one(in[0].clone());
        return one(f(in[0], axes, attr_i(a, "keepdims", 1) != 0));
      };
    };
    reduce("ReduceSum", mt::sum, true);
    reduce("ReduceMean", mt::mean, false);
    reduce("ReduceMax", mt::amax, false);
    reduce("ReduceMin", mt::amin, false);
    auto arg = [&](const char* name, mt::Tensor (*f)(const mt::Tensor&, int64_t, bool)) {
      m[name] = [f](const In& in, const Attrs& a) {
        if (attr_i(a, "select_last_index", 0)) throw mt::Error("select_last_index=1 is not supported");
        return one(f(in[0], wrap(attr_i(a, "axis", 0), in[0].dim()), attr_i(a, "keepdims", 1) != 0));
      };
    };
    arg("ArgMax", mt::argmax);
    arg("ArgMin", mt::argmin);
    m["Clip"] = [](const In& in, const Attrs&) {
      std::optional<mt::Scalar> lo, hi;
      if (in.size() > 1 && in[1].defined() && in[1].numel()) lo = in[1].item<double>();
      if (in.size() > 2 && in[2].defined() && in[2].numel()) hi = in[2].item<double>();
      return one(lo || hi ? mt::clamp(in[0], lo, hi) : in[0].clone());
    };
    m["Trilu"] = [](const In& in, const Attrs& a) {
      const int64_t k = in.size() > 1 && in[1].defined() ? in[1].item<int64_t>() : 0;
      return one(attr_i(a, "upper", 1) ? mt::triu(in[0], k) : mt::tril(in[0], k));
    };
    m["Conv"] = [](const In& in, const Attrs& a) {
      refuse(a, "auto_pad", "auto_pad is not supported (explicit pads only)");
      if (in[0].dim() != 4) throw mt::Error("only 2-D convolution (4-D input)");
      std::vector<int64_t> p = attr_ints(a, "pads"), s = attr_ints(a, "strides"), d = attr_ints(a, "dilations");
      if (p.size() == 4 && (p[0] != p[2] || p[1] != p[3])) throw mt::Error("asymmetric pads");
      F::Conv2dFuncOptions o{.stride = s.empty() ? mt::nn::Size2(1) : mt::nn::Size2(s[0], s[1]),
                             .padding = p.empty() ? mt::nn::Size2(0) : mt::nn::Size2(p[0], p[1]),
                             .dilation = d.empty() ? mt::nn::Size2(1) : mt::nn::Size2(d[0], d[1]),
                             .groups = attr_i(a, "group", 1)};
      return one(F::conv2d(in[0], in[1], in.size() > 2 ? in[2] : mt::Tensor(), o));
    };
    auto pool_geom = [](const Attrs& a, mt::nn::Size2& k, mt::nn::Size2& s, mt::nn::Size2& p) {
      refuse(a, "auto_pad", "auto_pad is not supported (explicit pads only)");
      std::vector<int64_t> kk = attr_ints(a, "kernel_shape"), ss = attr_ints(a, "strides"), pp = attr_ints(a, "pads");
      if (kk.size() != 2) throw mt::Error("only 2-D pooling");
      if (pp.size() == 4 && (pp[0] != pp[2] || pp[1] != pp[3])) throw mt::Error("asymmetric pads");
      k = mt::nn::Size2(kk[0], kk[1]);
      s = ss.empty() ? mt::nn::Size2(1) : mt::nn::Size2(ss[0], ss[1]);
      p = pp.empty() ? mt::nn::Size2(0) : mt::nn::Size2(pp[0], pp[1]);
    };
    m["MaxPool"] = [pool_geom](const In& in, const Attrs& a) {
      mt::nn::Size2 k, s, p;
      pool_geom(a, k, s, p);
      if (attr_i(a, "storage_order", 0)) throw mt::Error("storage_order=1 is not supported");
      std::vector<int64_t> d = attr_ints(a, "dilations");
      F::MaxPool2dFuncOptions o{.stride = s,
                                .padding = p,
                                .dilation = d.empty() ? mt::nn::Size2(1) : mt::nn::Size2(d[0], d[1]),
                                .ceil_mode = attr_i(a, "ceil_mode", 0) != 0};
      return one(F::max_pool2d(in[0], k, o));
    };
    m["AveragePool"] = [pool_geom](const In& in, const Attrs& a) {
      mt::nn::Size2 k, s, p;
      pool_geom(a, k, s, p);
      F::AvgPool2dFuncOptions o{.stride = s,
                                .padding = p,
                                .ceil_mode = attr_i(a, "ceil_mode", 0) != 0,
                                .count_include_pad = attr_i(a, "count_include_pad", 0) != 0};
      return one(F::avg_pool2d(in[0], k, o));
    };
    m["GlobalAveragePool"] = [](const In& in, const Attrs&) { return one(F::adaptive_avg_pool2d(in[0], {1, 1})); };
    m["LayerNormalization"] = [](const In& in, const Attrs& a) {
      const int64_t axis = wrap(attr_i(a, "axis", -1), in[0].dim());
      mt::Shape norm(in[0].sizes().begin() + axis, in[0].sizes().end());
      if (attr_i(a, "stash_type", 1) != 1) throw mt::Error("stash_type other than float is not supported");
      mt::Tensor w = in[1].sizes() == norm ? in[1] : in[1].expand(norm).contiguous();
      mt::Tensor b = in.size() > 2 && in[2].defined()
                         ? (in[2].sizes() == norm ? in[2] : in[2].expand(norm).contiguous())
                         : mt::Tensor();
      const double eps = attr_f(a, "epsilon", 1e-5f);
      // Outputs 1 and 2: the statistics over the normalized dims, kept as size-1 dims.
      mt::Shape dims;
      for (int64_t d = axis; d < in[0].dim(); ++d) dims.push_back(d);
      mt::Tensor x32 = in[0].to(mt::kFloat32);
      return std::vector<mt::Tensor>{F::layer_norm(in[0], norm, w, b, eps), mt::mean(x32, dims, true),
                                     mt::rsqrt(mt::var(x32, dims, 0, true) + eps)};
    };
    return m;
  }();
  return m;
}

// "" when `got` equals `want` (ONNX's backend tolerances: rtol 1e-3, atol 1e-7), else why not.
std::string compare(const mt::Tensor& got, const mt::Tensor& want) {
  if (got.sizes() != want.sizes()) return "shape " + got.shape_str() + " instead of " + want.shape_str();
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + mt::dtype_name(got.dtype()) + " instead of " + mt::dtype_name(want.dtype());
  std::vector<double> g = got.to(mt::kFloat64).to_vector<double>(), w = want.to(mt::kFloat64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (g[i] == w[i]) continue;
    if (!(std::abs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::abs(w[i])))
      return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " instead of " + std::to_string(w[i]);
  }
  return "";
}

}  // namespace

TEST(OnnxNodeSuite, MantissaOpsPassOnnxBackendNodeTests) {
  const char* env = std::getenv("MANTISSA_ONNX_TESTDATA");
  const fs::path root = env ? fs::path(env) : fs::path("/usr/share/libonnx-testdata/data/node");
  if (!fs::exists(root)) GTEST_SKIP() << root << " not found (apt-get install libonnx-testdata)";
  std::map<std::string, std::string> expected;  // case -> reason
  {
    std::ifstream f(MANTISSA_SOURCE_DIR "/tests/onnx/node_suite_failures.txt");
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.find(' ');
      expected[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
    }
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  struct Count {
    int passed = 0, total = 0;
  };
  std::map<std::string, Count> per_op;
  std::vector<std::string> unexpected, fixed;
  int skipped_ops = 0;
  for (const fs::path& dir : dirs) {
    pb::ModelProto model;
    if (!model.ParseFromString(read_all(dir / "model.onnx")) || model.graph().node_size() != 1) continue;
    const pb::NodeProto& node = model.graph().node(0);
    auto it = ops().find(node.op_type());
    if (!node.domain().empty() || it == ops().end()) {
      ++skipped_ops;
      continue;
    }
    const std::string name = dir.filename().string();
    std::string why;
    try {
      Attrs attrs;
      for (const auto& a : node.attribute()) attrs[a.name()] = &a;
      for (const auto& sets : fs::directory_iterator(dir)) {
        if (!sets.is_directory()) continue;
        In in;
        // The files are numbered over the inputs that are present (an omitted optional input has
        // an empty name and no file).
        int file = 0;
        for (int i = 0; i < node.input_size(); ++i) {
          pb::TensorProto t;
          const fs::path f = sets.path() / ("input_" + std::to_string(file) + ".pb");
          if (!node.input(i).empty()) ++file;
          if (node.input(i).empty() || !fs::exists(f)) {
            in.emplace_back();
            continue;
          }
          t.ParseFromString(read_all(f));
          in.push_back(to_tensor(t));
        }
        std::vector<mt::Tensor> out = it->second(in, attrs);
        for (int o = 0; o < node.output_size() && why.empty(); ++o) {
          pb::TensorProto t;
          t.ParseFromString(read_all(sets.path() / ("output_" + std::to_string(o) + ".pb")));
          if (size_t(o) >= out.size()) {
            why = "output " + std::to_string(o) + " is not computed";
            break;
          }
          why = compare(out[size_t(o)], to_tensor(t));
        }
        if (!why.empty()) break;
      }
    } catch (const std::exception& e) {
      why = e.what();
    }
    Count& c = per_op[node.op_type()];
    ++c.total;
    if (why.empty()) ++c.passed;
    const bool listed = expected.count(name) > 0;
    if (!why.empty()) std::printf("  FAIL %s (%s): %s\n", name.c_str(), node.op_type().c_str(), why.c_str());
    if (!why.empty() && !listed) unexpected.push_back(name + ": " + why);
    if (why.empty() && listed) fixed.push_back(name);
  }
  int passed = 0, total = 0;
  for (const auto& [op, c] : per_op) {
    std::printf("%-20s %3d / %3d\n", op.c_str(), c.passed, c.total);
    passed += c.passed;
    total += c.total;
  }
  std::printf("onnx node tests: %zu ops covered, %d of %d cases passed (%d cases of ops Mantissa lacks not run)\n",
              per_op.size(), passed, total, skipped_ops);
  EXPECT_GT(total, 0);
  for (const std::string& u : unexpected) ADD_FAILURE() << "unlisted failure: " << u;
  for (const std::string& f : fixed) ADD_FAILURE() << f << " passes now: remove it from node_suite_failures.txt";
}
