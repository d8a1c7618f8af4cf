// Every differentiable op against central finite differences in float64
// (mt::autograd::gradcheck), and second derivatives (gradgradcheck, backward built with
// create_graph) for the elementwise ops, reductions that feed losses, and matmul.
// Inputs stay away from points where an op is not differentiable (relu/abs at 0, ties of
// max/min, clamp bounds).
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <functional>
#include <string>

namespace mt = mantissa;
using mt::Tensor;
using Tensors = std::vector<Tensor>;
using Fn = std::function<Tensor(const Tensors&)>;

namespace {

constexpr auto kF64 = mt::kFloat64;

// Leaf inputs that require grad.
Tensor leaf(Tensor t) { return t.contiguous().detach().requires_grad_(); }
Tensor U(const mt::Shape& s, double lo = -2, double hi = 2) { return leaf(mt::uniform(s, lo, hi, {.dtype = kF64})); }
Tensor Pos(const mt::Shape& s) { return U(s, 0.3, 2.5); }
// |x| >= 0.2: away from the kinks of abs/relu and the pole of reciprocal.
Tensor Away(const mt::Shape& s) {
  Tensor x = mt::uniform(s, -1.8, 1.8, {.dtype = kF64});
  return leaf(x + mt::where(x >= 0.0, mt::full({}, 0.2, {.dtype = kF64}), mt::full({}, -0.2, {.dtype = kF64})));
}
// Pairwise distinct values 0.3 apart, so extrema have no ties.
Tensor Distinct(const mt::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return leaf((mt::randperm(n).to(kF64) * 0.3 - 0.15 * double(n)).reshape(s));
}
Tensor I64(const std::vector<int64_t>& v, const mt::Shape& s) { return mt::from_vector(v, s, {.dtype = mt::kInt64}); }
std::string str(const mt::Shape& s) { return mt::zeros(s).shape_str(); }
// A single tensor made of several outputs, so multi-output ops are checked through one function.
Tensor join(const Tensors& ts) {
  Tensors flat;
  for (const Tensor& t : ts) flat.push_back(t.reshape({-1}));
  return mt::cat(flat, 0);
}

// A throwing op fails its own check (named) instead of ending the whole test.
void check(const std::string& name, const Fn& fn, const Tensors& in) {
  std::string why;
  try {
    EXPECT_TRUE(mt::autograd::gradcheck(fn, in, {}, &why)) << name << ": " << why;
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": threw " << e.what();
  }
}
void check2(const std::string& name, const Fn& fn, const Tensors& in) {
  check(name, fn, in);
  std::string why;
  try {
    EXPECT_TRUE(mt::autograd::gradgradcheck(fn, in, {}, &why)) << name << " (second order): " << why;
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << " (second order): threw " << e.what();
  }
}

class Gradcheck : public ::testing::Test {
 protected:
  void SetUp() override { mt::manual_seed(1234); }
};

TEST_F(Gradcheck, Unary) {
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    Tensor (*make)(const mt::Shape&);
  };
  auto any = [](const mt::Shape& s) { return U(s); };
  // Every entry of MT_UNARY_OPS (core/elementwise_math.h) on the inputs its gradcheck column names.
#define MT_GRADCHECK_Any(name) {#name, mt::name, any},
#define MT_GRADCHECK_Pos(name) {#name, mt::name, Pos},
#define MT_GRADCHECK_Away(name) {#name, mt::name, Away},
#define MT_GRADCHECK_NoGradcheck(name)
#define MT_GRADCHECK_CASE(Enum, name, F, domain, policy, gradcheck, op) MT_GRADCHECK_##gradcheck(name)
  const Case cases[] = {MT_UNARY_OPS(MT_GRADCHECK_CASE)};
#undef MT_GRADCHECK_CASE
#undef MT_GRADCHECK_NoGradcheck
#undef MT_GRADCHECK_Away
#undef MT_GRADCHECK_Pos
#undef MT_GRADCHECK_Any
  for (const Case& c : cases) check2(c.name, [&](const Tensors& in) { return c.op(in[0]); }, {c.make({2, 3})});
  check2("log1p near -1", [](const Tensors& in) { return mt::log1p(in[0]); }, {U({4}, -0.7, -0.2)});
  check2("softplus", [](const Tensors& in) { return mt::softplus(in[0]); }, {U({2, 4}, -3, 3)});
  // The activations with a parameter: a fused backward kernel, the composed formula when a graph
  // of the backward is built (second order here).
  check2("leaky_relu", [](const Tensors& in) { return mt::leaky_relu(in[0], 0.3); }, {U({2, 4}, -3, 3)});
  check2("elu", [](const Tensors& in) { return mt::elu(in[0], 1.2); }, {U({2, 4}, -3, 3)});
  check2("hardtanh", [](const Tensors& in) { return mt::hardtanh(in[0], -0.8, 1.1); }, {U({2, 4}, -3, 3)});
  check2(
      "smooth_l1_loss",
      [](const Tensors& in) { return mt::nn::functional::smooth_l1_loss(in[0], in[1], mt::nn::Reduction::Sum, 0.8); },
      {U({2, 4}, -3, 3), U({2, 4}, -3, 3)});
  // Their composed formulas (create_graph) give the fused kernels' gradients, kinks and NaN included.
  const Tensor x = mt::from_vector<double>({-2.5, -1.1, -0.8, -0.3, 0.0, 0.4, 1.1, 2.0, NAN}).requires_grad_();
  const Tensor t = mt::full({9}, 0.1, {.dtype = kF64});
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> fused = {
      {"leaky_relu", [](const Tensor& v) { return mt::leaky_relu(v, 0.3); }},
      {"elu", [](const Tensor& v) { return mt::elu(v, 1.2); }},
      {"hardtanh", [](const Tensor& v) { return mt::hardtanh(v, -0.8, 1.1); }},
      {"smooth_l1_loss",
       [&](const Tensor& v) { return mt::nn::functional::smooth_l1_loss(v, t, mt::nn::Reduction::None, 0.8); }}};
  const Tensor up = mt::from_vector<double>({0.5, -1.5, 2.0, 1.0, -0.25, 3.0, -2.0, 0.75, 1.0});
  for (const auto& [name, f] : fused) {
    const Tensor plain = mt::autograd::grad({f(x)}, {x}, {up})[0];
    const Tensor graph = mt::autograd::grad({f(x)}, {x}, {up}, false, true)[0];
    const std::vector<double> p = plain.to_vector<double>(), q = graph.to_vector<double>();
    for (size_t i = 0; i < p.size(); ++i) {
      if (std::isnan(p[i])) {
        EXPECT_TRUE(std::isnan(q[i])) << name << " element " << i;
      } else {
        EXPECT_NEAR(q[i], p[i], 1e-15 * (1 + std::abs(p[i]))) << name << " element " << i;
      }
    }
  }
  // beta x crosses the threshold inside the range: both branches of the gradient.
  check2("softplus beta threshold", [](const Tensors& in) { return mt::softplus(in[0], 2, 1.5); },
         {leaf(mt::arange(-12, 12, 1, {.dtype = kF64}).reshape({4, 6}) * 0.25 + 0.03)});
  for (const char* approx : {"none", "tanh"})
    check2(std::string("gelu ") + approx, [&](const Tensors& in) { return mt::gelu(in[0], approx); },
           {U({2, 4}, -3, 3)});
}

TEST_F(Gradcheck, PowAndClamp) {
  for (double e : {2.0, 3.0, -1.0, 0.5, -1.5, 0.0, 1.0, 4.0})
    check2("pow " + std::to_string(e), [e](const Tensors& in) { return mt::pow(in[0], e); }, {Pos({2, 3})});
  for (double e : {1.0, 2.0, 3.0, 4.0, 5.0, -3.0})
    check2("pow int exponent " + std::to_string(e) + ", negative base",
           [e](const Tensors& in) { return mt::pow(in[0], e); }, {Away({2, 3})});
  check2("pow tensor", [](const Tensors& in) { return mt::pow(in[0], in[1]); }, {Pos({2, 3}), U({2, 3})});
  check2("pow tensor broadcast", [](const Tensors& in) { return mt::pow(in[0], in[1]); }, {Pos({2, 3}), U({3})});
  // Values on a 0.1 grid never sit on the bounds -0.55 / 0.65.
  Tensor grid = leaf(mt::arange(-12, 12, 1, {.dtype = kF64}).reshape({4, 6}) * 0.1 + 0.03);
  check2("clamp", [](const Tensors& in) { return mt::clamp(in[0], -0.55, 0.65); }, {grid});
  check2("clamp min", [](const Tensors& in) { return mt::clamp(in[0], -0.55, std::nullopt); }, {grid});
  check2("clamp max", [](const Tensors& in) { return mt::clamp(in[0], std::nullopt, 0.65); }, {grid});
}

TEST_F(Gradcheck, Binary) {
  const std::pair<mt::Shape, mt::Shape> shapes[] = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1, 3}, {4, 1}}, {{3}, {}}, {{}, {2, 2}}};
  for (auto& [sa, sb] : shapes) {
    const std::string tag = str(sa) + " " + str(sb);
    check2("add " + tag, [](const Tensors& in) { return in[0] + in[1]; }, {U(sa), U(sb)});
    check2("add alpha " + tag, [](const Tensors& in) { return mt::add(in[0], in[1], 2.5); }, {U(sa), U(sb)});
    check2("sub " + tag, [](const Tensors& in) { return in[0] - in[1]; }, {U(sa), U(sb)});
    check2("sub alpha " + tag, [](const Tensors& in) { return mt::sub(in[0], in[1], -0.5); }, {U(sa), U(sb)});
    check2("mul " + tag, [](const Tensors& in) { return in[0] * in[1]; }, {U(sa), U(sb)});
    check2("div " + tag, [](const Tensors& in) { return in[0] / in[1]; }, {U(sa), Away(sb)});
  }
  check2("scalar ops", [](const Tensors& in) { return (in[0] + 1.5) * 2 - 0.25 / in[0] + (3 - in[0]) / 4.0; },
         {Away({2, 3})});
  // maximum/minimum: b = a + offset with |offset| >= 0.1 keeps every pair apart.
  Tensor a = U({2, 3});
  Tensor b = leaf(a.detach() + Away({2, 3}).detach() * 0.5);
  check2("maximum", [](const Tensors& in) { return mt::maximum(in[0], in[1]); }, {a, b});
  check2("minimum", [](const Tensors& in) { return mt::minimum(in[0], in[1]); }, {a, b});
  Tensor col = leaf(mt::from_vector<double>({-1.05, 0.35, 1.45}, {3, 1}, {.dtype = kF64}));
  Tensor row = leaf(mt::from_vector<double>({-0.5, 0.0, 0.9, 2.0}, {4}, {.dtype = kF64}));
  check2("maximum broadcast", [](const Tensors& in) { return mt::maximum(in[0], in[1]); }, {col, row});
  check2("minimum broadcast", [](const Tensors& in) { return mt::minimum(in[0], in[1]); }, {col, row});

  Tensor cond = mt::from_vector<double>({1, 0, 1, 0, 0, 1}, {2, 3}).to(mt::kBool);
  check2("where", [&](const Tensors& in) { return mt::where(cond, in[0], in[1]); }, {U({2, 3}), U({3})});
  check2("where 0-dim", [&](const Tensors& in) { return mt::where(cond, in[0], in[1]); }, {U({}), U({2, 3})});
  check2("masked_fill", [&](const Tensors& in) { return mt::masked_fill(in[0], cond, -1.5); }, {U({2, 3})});
  Tensor row_mask = mt::from_vector<double>({0, 1, 1}, {3}).to(mt::kBool);
  check2("masked_fill broadcast mask", [&](const Tensors& in) { return mt::masked_fill(in[0] * in[0], row_mask, 2); },
         {U({2, 3})});
}

TEST_F(Gradcheck, Reductions) {
  Tensor x = U({2, 3, 4});
  check2("sum all", [](const Tensors& in) { return mt::sum(in[0]); }, {x});
  for (bool keep : {false, true}) {
    const std::string k = keep ? " keepdim" : "";
    check2("sum dim1" + k, [=](const Tensors& in) { return mt::sum(in[0], {1}, keep); }, {x});
    check2("sum dims 0,2" + k, [=](const Tensors& in) { return mt::sum(in[0], {0, -1}, keep); }, {x});
    check2("mean dim1" + k, [=](const Tensors& in) { return mt::mean(in[0], {1}, keep); }, {x});
    check2("mean dims 0,2" + k, [=](const Tensors& in) { return mt::mean(in[0], {2, 0}, keep); }, {x});
    check("prod" + k, [=](const Tensors& in) { return mt::prod(in[0], 1, keep); }, {Away({2, 3})});
    check("amax dim1" + k, [=](const Tensors& in) { return mt::amax(in[0], {1}, keep); }, {Distinct({2, 3, 4})});
    check("amin dims 0,2" + k, [=](const Tensors& in) { return mt::amin(in[0], {0, 2}, keep); }, {Distinct({2, 3, 4})});
    check("max dim values" + k, [=](const Tensors& in) { return mt::max(in[0], 1, keep).values; }, {Distinct({3, 4})});
    check("min dim values" + k, [=](const Tensors& in) { return mt::min(in[0], -1, keep).values; },
          {Distinct({2, 3, 4})});
    for (int64_t c : {0, 1}) {
      const std::string cs = " correction " + std::to_string(c) + k;
      check2("var all" + cs, [=](const Tensors& in) { return mt::var(in[0], {}, c, keep); }, {U({3, 4})});
      check2("var dim1" + cs, [=](const Tensors& in) { return mt::var(in[0], {1}, c, keep); }, {x});
      check2("std dims 0,2" + cs, [=](const Tensors& in) { return mt::std(in[0], {0, 2}, c, keep); }, {x});
    }
    check2("logsumexp dim1" + k, [=](const Tensors& in) { return mt::logsumexp(in[0], {1}, keep); }, {x});
    check2("logsumexp dims 0,2" + k, [=](const Tensors& in) { return mt::logsumexp(in[0], {0, 2}, keep); }, {x});
  }
  check("amax all", [](const Tensors& in) { return mt::amax(in[0]); }, {Distinct({3, 4})});
  check("max all", [](const Tensors& in) { return mt::max(in[0]); }, {Distinct({3, 4})});
  check("min all", [](const Tensors& in) { return mt::min(in[0]); }, {Distinct({3, 4})});
  for (int64_t d : {0, 1, 2, -1}) {
    check2("softmax dim " + std::to_string(d), [=](const Tensors& in) { return mt::softmax(in[0], d); }, {x});
    check2("log_softmax dim " + std::to_string(d), [=](const Tensors& in) { return mt::log_softmax(in[0], d); }, {x});
  }
  check2("softmax of transpose", [](const Tensors& in) { return mt::softmax(in[0].transpose(0, 2), 1); }, {x});
}

TEST_F(Gradcheck, Matmul) {
  const std::pair<mt::Shape, mt::Shape> layouts[] = {
      {{3}, {3}},
      {{2, 3}, {3}},
      {{3}, {3, 4}},
      {{2, 3}, {3, 4}},
      {{2, 2, 3}, {2, 3, 4}},
      {{2, 2, 3}, {3, 4}},
      {{2, 3}, {2, 3, 4}},
      {{2, 1, 2, 3}, {3, 3, 2}},
      {{3}, {2, 3, 4}},
      {{2, 4, 3}, {3}},
  };
  for (auto& [sa, sb] : layouts)
    check2("matmul " + str(sa) + " @ " + str(sb), [](const Tensors& in) { return mt::matmul(in[0], in[1]); },
           {U(sa), U(sb)});
  // Transposed (strided) operands reach the GEMM without a copy.
  check2("matmul a^T b", [](const Tensors& in) { return mt::matmul(in[0].t(), in[1]); }, {U({3, 2}), U({3, 4})});
  check2("matmul a b^T", [](const Tensors& in) { return mt::matmul(in[0], in[1].t()); }, {U({2, 3}), U({4, 3})});
  check2("matmul a^T b^T", [](const Tensors& in) { return mt::matmul(in[0].t(), in[1].t()); }, {U({3, 2}), U({4, 3})});
  check2("bmm a^T b^T", [](const Tensors& in) { return mt::matmul(in[0].transpose(1, 2), in[1].transpose(-1, -2)); },
         {U({2, 3, 2}), U({2, 4, 3})});
  check2("matmul broadcast batch, transposed",
         [](const Tensors& in) { return mt::matmul(in[0].transpose(-1, -2), in[1]); }, {U({3, 1, 3, 2}), U({2, 3, 2})});
  check2("matmul same operand", [](const Tensors& in) { return mt::matmul(in[0], in[0].t()); }, {U({2, 3})});
}

TEST_F(Gradcheck, Views) {
  Tensor x = U({2, 3, 4});
  const std::pair<const char*, Fn> cases[] = {
      {"permute",
       [](const Tensors& in) {
         return in[0].permute({2, 0, 1});
       }},
      {"transpose", [](const Tensors& in) { return in[0].transpose(0, 2); }},
      {"narrow", [](const Tensors& in) { return in[0].narrow(2, 1, 2); }},
      {"slice step", [](const Tensors& in) { return in[0].slice(2, 1, 4, 2); }},
      {"slice negative start", [](const Tensors& in) { return in[0].slice(1, -2, 100); }},
      {"select", [](const Tensors& in) { return in[0].select(1, -1); }},
      {"expand",
       [](const Tensors& in) {
         return in[0].select(2, 0).unsqueeze(0).expand({3, 2, 3});
       }},
      {"unsqueeze", [](const Tensors& in) { return in[0].unsqueeze(-1); }},
      {"squeeze", [](const Tensors& in) { return in[0].narrow(1, 1, 1).squeeze(); }},
      {"squeeze dim", [](const Tensors& in) { return in[0].narrow(1, 1, 1).squeeze(1); }},
      {"flatten", [](const Tensors& in) { return in[0].flatten(1, 2); }},
      {"flatten all", [](const Tensors& in) { return in[0].flatten(); }},
      {"reshape",
       [](const Tensors& in) {
         return in[0].reshape({4, -1});
       }},
      {"view",
       [](const Tensors& in) {
         return in[0].view({6, 4});
       }},
      {"reshape of transpose (copies)",
       [](const Tensors& in) {
         return in[0].transpose(0, 1).reshape({3, 8});
       }},
      {"contiguous of permute",
       [](const Tensors& in) {
         return in[0].permute({1, 2, 0}).contiguous();
       }},
      {"slice of transpose", [](const Tensors& in) { return in[0].transpose(1, 2).slice(1, 0, 4, 3) * 2; }},
      {"select of slice", [](const Tensors& in) { return in[0].slice(2, 1, 4, 2).select(0, 1); }},
      {"overlapping views", [](const Tensors& in) { return in[0].narrow(2, 0, 3) * in[0].narrow(2, 1, 3); }},
  };
  for (auto& [name, fn] : cases) check2(name, fn, {x});
  check2("t", [](const Tensors& in) { return in[0].t(); }, {U({3, 4})});
  check2("t 1-D", [](const Tensors& in) { return in[0].t(); }, {U({3})});
  check2("expand new dims", [](const Tensors& in) { return in[0].expand({2, 3, 4}); }, {U({3, 1})});
  check2("clone", [](const Tensors& in) { return in[0].clone(); }, {U({3})});
}

TEST_F(Gradcheck, JoinAndSplit) {
  for (int64_t d : {0, 1, -1})
    check("cat dim " + std::to_string(d), [=](const Tensors& in) { return mt::cat(in, d); },
          {U({2, 3}), U({2, 3}), U({2, 3})});
  check("cat different sizes", [](const Tensors& in) { return mt::cat(in, 1); }, {U({2, 1}), U({2, 3})});
  check("cat same tensor twice", [](const Tensors& in) { return mt::cat({in[0], in[0] * 2}, 0); }, {U({2, 3})});
  for (int64_t d : {0, 1, 2})
    check("stack dim " + std::to_string(d), [=](const Tensors& in) { return mt::stack(in, d); },
          {U({2, 3}), U({2, 3})});
  // Each piece is weighted differently so a piece routed to the wrong place shows up.
  check("split int",
        [](const Tensors& in) {
          auto p = mt::split(in[0], 2, 0);
          return join({p[0], p[1] * 2, p[2] * 3});
        },
        {U({5, 3})});
  check("split sizes",
        [](const Tensors& in) {
          auto p = mt::split(in[0], std::vector<int64_t>{1, 2}, 1);
          return join({p[1] * -1, p[0]});
        },
        {U({4, 3})});
  check("split unused piece", [](const Tensors& in) { return mt::split(in[0], 2, 1)[1]; }, {U({3, 4})});
  check("chunk",
        [](const Tensors& in) {
          auto p = mt::chunk(in[0], 3, 0);
          return join({p[2], p[0] * 0.5, p[1]});
        },
        {U({5, 2})});
}

TEST_F(Gradcheck, Indexing) {
  Tensor rows = I64({2, 0, 2, 3, 2}, {5});
  check2("index_select dim 0", [&](const Tensors& in) { return mt::index_select(in[0], 0, rows); }, {U({4, 3})});
  check2("index_select dim 1",
         [&](const Tensors& in) {
           return mt::index_select(in[0], 1, I64({3, 3, 0}, {3}));
         },
         {U({2, 4, 3})});
  Tensor g0 = I64({0, 2, 1, 2, 1, 1, 0, 0, 2, 2, 2, 2}, {3, 4});
  check2("gather dim 0", [&](const Tensors& in) { return mt::gather(in[0], 0, g0); }, {U({3, 4})});
  Tensor g1 = I64({3, 3, 0, 1, 2, 0, 0, 0, 1}, {3, 3});
  check2("gather dim 1", [&](const Tensors& in) { return mt::gather(in[0], 1, g1); }, {U({3, 4})});
  check2("scatter_add dim 0", [&](const Tensors& in) { return mt::scatter_add(in[0], 0, g0, in[1]); },
         {U({4, 4}), U({3, 4})});
  check2("scatter_add dim 1", [&](const Tensors& in) { return mt::scatter_add(in[0], 1, g1, in[1]); },
         {U({3, 4}), U({3, 3})});
  check2("scatter_add of a product",
         [&](const Tensors& in) { return mt::scatter_add(in[0] * in[0], 1, g1, in[1] * in[0].narrow(1, 0, 3)); },
         {U({3, 4}), U({3, 3})});
  Tensor ids = I64({1, 4, 1, 0, 1, 4}, {2, 3});
  check2("embedding", [&](const Tensors& in) { return mt::nn::functional::embedding(ids, in[0]); }, {U({5, 3})});
}

TEST_F(Gradcheck, InPlaceRebase) {
  // y = x * 1 is a non-leaf; its in-place update must move y's history onto the new node.
  check("add_",
        [](const Tensors& in) {
          Tensor y = in[0] * 1;
          y.add_(in[1]);
          return y;
        },
        {U({2, 3}), U({2, 3})});
  check("add_ alpha broadcast",
        [](const Tensors& in) {
          Tensor y = in[0] * 1;
          y.add_(in[1], -2);
          return y * in[0];
        },
        {U({2, 3}), U({3})});
  check("sub_ / mul_ / div_ chain",
        [](const Tensors& in) {
          Tensor y = in[0] * 1;
          y.sub_(in[1]);
          y.mul_(in[1]);
          y.div_(in[2]);
          return y;
        },
        {U({2, 3}), U({2, 3}), Away({3})});
  check("scalar in-place",
        [](const Tensors& in) {
          Tensor y = mt::sin(in[0]);  // saves its input, not y (exp would save y: rewriting it is an error)
          y.mul_(3);
          y.add_(1.5);
          y.sub_(2);
          y.div_(-4);
          return y;
        },
        {U({2, 3})});
  Tensor grid = leaf(mt::arange(-6, 6, 1, {.dtype = kF64}).reshape({3, 4}) * 0.1 + 0.03);
  check("clamp_",
        [](const Tensors& in) {
          Tensor y = in[0] * 2;
          y.clamp_(-0.55, 0.65);
          return y;
        },
        {grid});
  Tensor mask = mt::from_vector<double>({1, 0, 0, 1, 1, 0}, {2, 3}).to(mt::kBool);
  check("masked_fill_",
        [&](const Tensors& in) {
          Tensor y = in[0] * in[0];
          y.masked_fill_(mask, 0.5);
          return y;
        },
        {U({2, 3})});
  check("copy_",
        [](const Tensors& in) {
          Tensor y = in[0] * 1;
          y.copy_(in[1]);
          return y * in[0];
        },
        {U({2, 3}), U({3})});
  // Rewriting a tensor that a node saved (exp saves its output) is an error, at the write
  // or at backward (PyTorch reports it at backward).
  Tensor x = U({3});
  Tensor e = mt::exp(x);
  EXPECT_THROW(
      {
        e.mul_(2);
        e.sum().backward();
      },
      mt::Error);
  // Second order through a rebased node.
  check2("mul_ of a square",
         [](const Tensors& in) {
           Tensor y = in[0] * in[0];
           y.mul_(in[1]);
           return y;
         },
         {U({2, 3}), U({2, 3})});
}

// gradcheck itself must be able to fail: a deliberately wrong backward is caught.
TEST_F(Gradcheck, DetectsWrongGradient) {
  auto wrong = [](const Tensors& in) {
    // Forward x*x, but the gradient only sees one factor: d/dx = x instead of 2x.
    return in[0] * in[0].detach();
  };
  std::string why;
  EXPECT_FALSE(mt::autograd::gradcheck(wrong, {U({3})}, {}, &why));
  EXPECT_NE(why.find("Jacobian mismatch"), std::string::npos) << why;
}

}  // namespace
