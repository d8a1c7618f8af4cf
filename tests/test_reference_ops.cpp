// Checks Mantissa's ops against PyTorch: tests/fixtures/reference_ops.json holds inputs,
// forward outputs, a fixed upstream gradient and the input gradients that torch 1.13 computed
// (tools/gen_reference.py writes it; see that script for the format). Each case is rebuilt
// here through the op table below, whose keys match the script's OPS table.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace mt = mantissa;
using json = nlohmann::json;
using mt::Tensor;
using Tensors = std::vector<Tensor>;

namespace {

const json& fixture() {
  static const json doc = [] {
    std::ifstream in(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_ops.json");
    if (!in) throw std::runtime_error("cannot open tests/fixtures/reference_ops.json");
    return json::parse(in);
  }();
  return doc;
}

mt::DType parse_dtype(const std::string& s) {
  static const std::map<std::string, mt::DType> names = {
      {"float32", mt::kFloat32}, {"float64", mt::kFloat64}, {"float16", mt::kFloat16}, {"bfloat16", mt::kBFloat16},
      {"int64", mt::kInt64},     {"int32", mt::kInt32},     {"uint8", mt::kUInt8},     {"bool", mt::kBool}};
  auto it = names.find(s);
  if (it == names.end()) throw std::runtime_error("unknown dtype " + s);
  return it->second;
}

Tensor to_tensor(const json& j) {
  const mt::Shape shape = j.at("shape").get<mt::Shape>();
  const mt::DType dt = parse_dtype(j.at("dtype"));
  const mt::Shape build = shape.empty() ? mt::Shape{1} : shape;  // from_vector reads {} as 1-D
  Tensor t;
  if (mt::is_floating(dt)) {
    t = mt::from_vector(j.at("data").get<std::vector<double>>(), build, {.dtype = dt});
  } else {
    std::vector<int64_t> v;
    for (const json& e : j.at("data")) v.push_back(e.is_boolean() ? int64_t(e.get<bool>()) : e.get<int64_t>());
    t = mt::from_vector(v, build, {.dtype = dt});
  }
  if (shape.empty()) t = t.reshape({});
  if (j.value("grad", false)) t.requires_grad_();
  return t;
}

mt::Scalar to_scalar(const json& v) {
  return v.is_number_integer() ? mt::Scalar(v.get<int64_t>()) : mt::Scalar(v.get<double>());
}
std::optional<mt::Scalar> opt_scalar(const json& a, const char* key) {
  return a.contains(key) ? std::optional<mt::Scalar>(to_scalar(a[key])) : std::nullopt;
}
mt::Shape dims(const json& a) { return a.at("dims").get<mt::Shape>(); }
int64_t geti(const json& a, const char* key) { return a.at(key).get<int64_t>(); }
bool keep(const json& a) { return a.at("keepdim").get<bool>(); }

// Mirrors OPS in tools/gen_reference.py: inputs and non-tensor args -> outputs.
using OpFn = std::function<Tensors(const Tensors&, const json&)>;

Tensor inplace_copy(const Tensor& x) { return x * 1; }  // a non-leaf the in-place op may rebase

const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    auto unary = [&](const char* name, Tensor (*f)(const Tensor&)) {
      t[name] = [f](const Tensors& in, const json&) { return Tensors{f(in[0])}; };
    };
    auto binary = [&](const char* name, Tensor (*f)(const Tensor&, const Tensor&)) {
      t[name] = [f](const Tensors& in, const json&) { return Tensors{f(in[0], in[1])}; };
    };
    // Every entry of MT_UNARY_OPS (core/elementwise_math.h) called as mt::name(x); the ones
    // with more arguments (Args) follow.
#define MT_REFERENCE_UNARY(Enum, name, F, domain, policy, gradcheck, op) \
  MT_UNARY_IF_ONE_TENSOR(op, unary(#name, mt::name);)
    MT_UNARY_OPS(MT_REFERENCE_UNARY)
#undef MT_REFERENCE_UNARY
    t["gelu"] = [](const Tensors& in, const json& a) { return Tensors{mt::gelu(in[0], a.at("approximate"))}; };
    t["softplus"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::softplus(in[0], a.at("beta"), a.at("threshold"))};
    };
    t["pow_scalar"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::pow(in[0], to_scalar(a["exponent"]))};
    };
    t["pow"] = [](const Tensors& in, const json&) { return Tensors{mt::pow(in[0], in[1])}; };
    t["clamp"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::clamp(in[0], opt_scalar(a, "min"), opt_scalar(a, "max"))};
    };

    t["add"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::add(in[0], in[1], to_scalar(a.value("alpha", json(1))))};
    };
    t["sub"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::sub(in[0], in[1], to_scalar(a.value("alpha", json(1))))};
    };
    binary("mul", mt::mul);
    binary("div", mt::div);
    auto scalar_op = [&](const char* name, Tensor (*fwd)(const Tensor&, const mt::Scalar&),
                         Tensor (*rev)(const mt::Scalar&, const Tensor&)) {
      t[name] = [fwd, rev](const Tensors& in, const json& a) {
        mt::Scalar s = to_scalar(a.at("scalar"));
        return Tensors{a.value("reverse", false) ? rev(s, in[0]) : fwd(in[0], s)};
      };
    };
    scalar_op("add_scalar", mt::operator+, mt::operator+);
    scalar_op("sub_scalar", mt::operator-, mt::operator-);
    scalar_op("mul_scalar", mt::operator*, mt::operator*);
    scalar_op("div_scalar", mt::operator/, mt::operator/);
    binary("maximum", mt::maximum);
    binary("minimum", mt::minimum);
    binary("eq", mt::eq);
    binary("ne", mt::ne);
    binary("lt", mt::lt);
    binary("le", mt::le);
    binary("gt", mt::gt);
    binary("ge", mt::ge);
    binary("logical_and", mt::logical_and);
    binary("logical_or", mt::logical_or);
    t["cmp_scalar"] = [](const Tensors& in, const json& a) {
      const std::string c = a.at("cmp");
      mt::Scalar s = to_scalar(a.at("scalar"));
      const Tensor& x = in[0];
      if (c == "eq") return Tensors{x == s};
      if (c == "ne") return Tensors{x != s};
      if (c == "lt") return Tensors{x < s};
      if (c == "le") return Tensors{x <= s};
      if (c == "gt") return Tensors{x > s};
      if (c == "ge") return Tensors{x >= s};
      throw std::runtime_error("unknown comparison " + c);
    };
    t["where"] = [](const Tensors& in, const json&) { return Tensors{mt::where(in[0], in[1], in[2])}; };
    t["masked_fill"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::masked_fill(in[0], in[1], to_scalar(a.at("value")))};
    };

    t["add_"] = [](const Tensors& in, const json& a) {
      Tensor y = inplace_copy(in[0]);
      y.add_(in[1], to_scalar(a.value("alpha", json(1))));
      return Tensors{y};
    };
    t["sub_"] = [](const Tensors& in, const json&) {
      Tensor y = inplace_copy(in[0]);
      y.sub_(in[1]);
      return Tensors{y};
    };
    t["mul_"] = [](const Tensors& in, const json&) {
      Tensor y = inplace_copy(in[0]);
      y.mul_(in[1]);
      return Tensors{y};
    };
    t["div_"] = [](const Tensors& in, const json&) {
      Tensor y = inplace_copy(in[0]);
      y.div_(in[1]);
      return Tensors{y};
    };
    t["mul_scalar_"] = [](const Tensors& in, const json& a) {
      Tensor y = inplace_copy(in[0]);
      y.mul_(to_scalar(a.at("scalar")));
      return Tensors{y};
    };
    t["clamp_"] = [](const Tensors& in, const json& a) {
      Tensor y = inplace_copy(in[0]);
      y.clamp_(to_scalar(a.at("min")), to_scalar(a.at("max")));
      return Tensors{y};
    };
    t["masked_fill_"] = [](const Tensors& in, const json& a) {
      Tensor y = inplace_copy(in[0]);
      y.masked_fill_(in[1], to_scalar(a.at("value")));
      return Tensors{y};
    };

    t["sum"] = [](const Tensors& in, const json& a) { return Tensors{mt::sum(in[0], dims(a), keep(a))}; };
    t["mean"] = [](const Tensors& in, const json& a) { return Tensors{mt::mean(in[0], dims(a), keep(a))}; };
    t["prod"] = [](const Tensors& in, const json& a) { return Tensors{mt::prod(in[0], geti(a, "dim"), keep(a))}; };
    t["amax"] = [](const Tensors& in, const json& a) { return Tensors{mt::amax(in[0], dims(a), keep(a))}; };
    t["amin"] = [](const Tensors& in, const json& a) { return Tensors{mt::amin(in[0], dims(a), keep(a))}; };
    t["max_all"] = [](const Tensors& in, const json&) { return Tensors{mt::max(in[0])}; };
    t["min_all"] = [](const Tensors& in, const json&) { return Tensors{mt::min(in[0])}; };
    t["max_dim"] = [](const Tensors& in, const json& a) {
      auto r = mt::max(in[0], geti(a, "dim"), keep(a));
      return Tensors{r.values, r.indices};
    };
    t["min_dim"] = [](const Tensors& in, const json& a) {
      auto r = mt::min(in[0], geti(a, "dim"), keep(a));
      return Tensors{r.values, r.indices};
    };
    t["argmax"] = [](const Tensors& in, const json& a) { return Tensors{mt::argmax(in[0], geti(a, "dim"), keep(a))}; };
    t["argmin"] = [](const Tensors& in, const json& a) { return Tensors{mt::argmin(in[0], geti(a, "dim"), keep(a))}; };
    t["var"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::var(in[0], dims(a), geti(a, "correction"), keep(a))};
    };
    t["std"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::std(in[0], dims(a), geti(a, "correction"), keep(a))};
    };
    t["logsumexp"] = [](const Tensors& in, const json& a) { return Tensors{mt::logsumexp(in[0], dims(a), keep(a))}; };
    t["softmax"] = [](const Tensors& in, const json& a) { return Tensors{mt::softmax(in[0], geti(a, "dim"))}; };
    t["log_softmax"] = [](const Tensors& in, const json& a) { return Tensors{mt::log_softmax(in[0], geti(a, "dim"))}; };

    t["matmul"] = [](const Tensors& in, const json& a) {
      Tensor x = a.value("ta", false) ? in[0].transpose(-1, -2) : in[0];
      Tensor y = a.value("tb", false) ? in[1].transpose(-1, -2) : in[1];
      return Tensors{mt::matmul(x, y)};
    };

    t["cat"] = [](const Tensors& in, const json& a) { return Tensors{mt::cat(in, geti(a, "dim"))}; };
    t["stack"] = [](const Tensors& in, const json& a) { return Tensors{mt::stack(in, geti(a, "dim"))}; };
    t["split"] = [](const Tensors& in, const json& a) {
      const json& s = a.at("split");
      return s.is_array() ? mt::split(in[0], s.get<std::vector<int64_t>>(), geti(a, "dim"))
                          : mt::split(in[0], s.get<int64_t>(), geti(a, "dim"));
    };
    t["chunk"] = [](const Tensors& in, const json& a) { return mt::chunk(in[0], geti(a, "chunks"), geti(a, "dim")); };
    t["index_select"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::index_select(in[0], geti(a, "dim"), in[1])};
    };
    t["gather"] = [](const Tensors& in, const json& a) { return Tensors{mt::gather(in[0], geti(a, "dim"), in[1])}; };
    t["scatter_add"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::scatter_add(in[0], geti(a, "dim"), in[1], in[2])};
    };
    t["one_hot"] = [](const Tensors& in, const json& a) { return Tensors{mt::one_hot(in[0], geti(a, "num_classes"))}; };
    t["embedding"] = [](const Tensors& in, const json&) {
      return Tensors{mt::nn::functional::embedding(in[1], in[0])};
    };

    t["permute"] = [](const Tensors& in, const json& a) { return Tensors{in[0].permute(dims(a))}; };
    t["transpose"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].transpose(geti(a, "d0"), geti(a, "d1"))};
    };
    t["t"] = [](const Tensors& in, const json&) { return Tensors{in[0].t()}; };
    t["narrow"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].narrow(geti(a, "dim"), geti(a, "start"), geti(a, "length"))};
    };
    t["slice"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].slice(geti(a, "dim"), geti(a, "start"), geti(a, "end"), geti(a, "step"))};
    };
    t["select"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].select(geti(a, "dim"), geti(a, "index"))};
    };
    t["expand"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].expand(a.at("shape").get<mt::Shape>())};
    };
    t["squeeze"] = [](const Tensors& in, const json& a) {
      return Tensors{a.contains("dim") ? in[0].squeeze(geti(a, "dim")) : in[0].squeeze()};
    };
    t["unsqueeze"] = [](const Tensors& in, const json& a) { return Tensors{in[0].unsqueeze(geti(a, "dim"))}; };
    t["flatten"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].flatten(geti(a, "start"), geti(a, "end"))};
    };
    t["reshape"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].reshape(a.at("shape").get<mt::Shape>())};
    };
    t["view"] = [](const Tensors& in, const json& a) { return Tensors{in[0].view(a.at("shape").get<mt::Shape>())}; };
    t["exp_of_t"] = [](const Tensors& in, const json&) { return Tensors{mt::exp(in[0].t())}; };
    t["add_of_t"] = [](const Tensors& in, const json&) { return Tensors{in[0].t() + in[1]}; };
    t["sum_of_permute"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].permute({2, 0, 1}).sum(dims(a))};
    };
    t["softmax_of_transpose"] = [](const Tensors& in, const json& a) {
      return Tensors{mt::softmax(in[0].transpose(0, 2), geti(a, "dim"))};
    };
    t["reshape_of_t"] = [](const Tensors& in, const json& a) {
      return Tensors{in[0].t().reshape(a.at("shape").get<mt::Shape>())};
    };
    t["slice_of_t"] = [](const Tensors& in, const json&) {
      return Tensors{in[0].t().slice(0, 1, INT64_MAX).slice(1, 0, INT64_MAX, 2) * 2};
    };
    return t;
  }();
  return table;
}

// Appends a description of the first difference between `got` and `want` to *err.
bool same_tensor(const Tensor& got, const json& want_j, const std::string& what, std::string* err) {
  std::ostringstream os;
  const Tensor want = to_tensor(want_j);
  if (!got.defined()) {
    os << what << ": undefined, expected " << want.shape_str() << " " << want.dtype();
  } else if (got.sizes() != want.sizes() || got.dtype() != want.dtype()) {
    os << what << ": got " << got.shape_str() << " " << got.dtype() << ", expected " << want.shape_str() << " "
       << want.dtype();
  } else if (mt::is_floating(want.dtype())) {
    // float64 results should match torch to rounding; float32 kernels may sum in another order.
    const bool f32 = want.dtype() != mt::kFloat64;
    const double rtol = f32 ? 1e-5 : 1e-10, atol = f32 ? 1e-6 : 1e-12;
    auto g = got.to_vector<double>(), w = want.to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i)
      if (!(std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]))) {
        os.precision(17);
        os << what << " element " << i << ": got " << g[i] << ", expected " << w[i];
        break;
      }
  } else {
    auto g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] != w[i]) {
        os << what << " element " << i << ": got " << g[i] << ", expected " << w[i];
        break;
      }
  }
  *err = os.str();
  return err->empty();
}

// Runs one case; returns "" on success, else why it failed (prefixed by the case name).
std::string run_case(const json& c) {
  const std::string name = c.at("name");
  try {
    auto it = op_table().find(c.at("op"));
    if (it == op_table().end()) return name + ": op '" + c.at("op").get<std::string>() + "' is not in the op table";
    Tensors in;
    for (const json& j : c.at("inputs")) in.push_back(to_tensor(j));
    Tensors out = it->second(in, c.at("args"));
    const json& want = c.at("outputs");
    if (out.size() != want.size())
      return name + ": " + std::to_string(out.size()) + " outputs, expected " + std::to_string(want.size());
    std::string err;
    for (size_t i = 0; i < out.size(); ++i)
      if (!same_tensor(out[i], want[i], "output " + std::to_string(i), &err)) return name + ": " + err;
    if (!c.contains("grads")) return "";

    Tensors roots, seeds, wrt;
    for (size_t i = 0; i < out.size(); ++i) {
      const json& g = c.at("grad_outputs")[i];
      if (g.is_null()) continue;
      roots.push_back(out[i]);
      seeds.push_back(to_tensor(g));
    }
    for (const Tensor& x : in)
      if (x.requires_grad()) wrt.push_back(x);
    Tensors grads = mt::autograd::grad(roots, wrt, seeds, false, false, /*allow_unused=*/true);
    const json& want_g = c.at("grads");
    if (grads.size() != want_g.size()) return name + ": gradient count mismatch";
    for (size_t i = 0; i < grads.size(); ++i) {
      const std::string what = "gradient of input " + std::to_string(i);
      if (want_g[i].is_null()) {  // torch: unused input; accept undefined or zeros
        if (grads[i].defined() && mt::abs(grads[i]).sum().item<double>() != 0.0)
          return name + ": " + what + " should be zero";
        continue;
      }
      if (!same_tensor(grads[i], want_g[i], what, &err)) return name + ": " + err;
    }
    return "";
  } catch (const std::exception& e) {
    return name + ": threw " + e.what();
  }
}

const std::vector<std::string> kFamilies = {"unary",  "binary", "compare", "inplace", "reduce",
                                            "matmul", "shape",  "view",    "float32", "integer"};

class ReferenceOps : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceOps, MatchesPyTorch) {
  int ran = 0;
  for (const json& c : fixture().at("cases")) {
    if (c.at("family") != GetParam()) continue;
    ++ran;
    std::string why = run_case(c);
    EXPECT_TRUE(why.empty()) << why;
  }
  EXPECT_GT(ran, 0) << "no cases for family " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Families, ReferenceOps, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return info.param; });

TEST(ReferenceFixture, EveryCaseIsRun) {
  // A case in a family nobody runs, or naming an unknown op, would silently test nothing.
  std::set<std::string> fams(kFamilies.begin(), kFamilies.end());
  const json& cases = fixture().at("cases");
  EXPECT_GT(cases.size(), 300u);
  for (const json& c : cases) {
    EXPECT_TRUE(fams.count(c.at("family"))) << c.at("name") << ": family " << c.at("family");
    EXPECT_TRUE(op_table().count(c.at("op"))) << c.at("name") << ": op " << c.at("op");
  }
}

// torch.result_type for tensor/0-dim tensor/Python scalar operands, and torch.div's result.
TEST(ReferencePromotion, MatchesTorch) {
  int checked = 0;
  for (const json& e : fixture().at("promotion")) {
    std::ostringstream what;
    what << e.at("op").get<std::string>() << "(" << e.at("a").get<std::string>() << (e.at("a_dim") == 0 ? " 0-dim" : "")
         << ", " << e.at("b").get<std::string>() << (e.at("b_dim") == 0 ? " 0-dim" : "") << ")";
    auto make = [](const std::string& dt, int64_t dim) {
      return mt::ones(dim ? mt::Shape{2} : mt::Shape{}, {.dtype = parse_dtype(dt)});
    };
    try {
      Tensor a = make(e.at("a"), e.at("a_dim"));
      const std::string b = e.at("b");
      Tensor y;
      if (b == "int")
        y = a + 2;
      else if (b == "float")
        y = a + 2.5;
      else if (e.at("op") == "div")
        y = mt::div(a, make(b, e.at("b_dim")));
      else
        y = mt::add(a, make(b, e.at("b_dim")));
      EXPECT_EQ(y.dtype(), parse_dtype(e.at("result"))) << what.str();
    } catch (const std::exception& ex) {
      ADD_FAILURE() << what.str() << " threw " << ex.what();
    }
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
