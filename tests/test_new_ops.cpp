// cumsum / cumprod, the extra losses, norm, all / any, sort / argsort / topk: PyTorch 1.13
// values and gradients (tests/fixtures/reference_new_ops.json from
// tools/gen_reference_new_ops.py), float64 gradcheck, the edges (0-dim, empty, non-contiguous,
// NaN, integer promotion), autocast dtypes and errors. The fixture cases also run on a GPU
// when one is present.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "gpu_test.h"
#include "test_util.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using json = nlohmann::json;
using mt::autograd::gradcheck;
using testing::HasSubstr;

namespace {

const json& fixture() {
  static const json j = [] {
    std::ifstream f(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_new_ops.json");
    EXPECT_TRUE(f.good()) << "missing tests/fixtures/reference_new_ops.json (run tools/gen_reference_new_ops.py)";
    return json::parse(f);
  }();
  return j;
}

double number(const json& v) {
  if (v.is_string()) {
    const std::string s = v;
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    return s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  }
  return v.get<double>();
}

mt::DType dtype_of(const std::string& s) {
  if (s == "float64") return mt::kFloat64;
  if (s == "float32") return mt::kFloat32;
  if (s == "int64") return mt::kInt64;
  if (s == "int32") return mt::kInt32;
  if (s == "uint8") return mt::kUInt8;
  return mt::kBool;
}

// The fixture tensor in its own dtype (floating ones as `fdt`), on `device`.
mt::Tensor tensor_of(const json& t, mt::DType fdt, mt::Device device) {
  const mt::Shape shape = t.at("shape").get<mt::Shape>();
  std::vector<double> v;
  for (const json& e : t.at("data")) v.push_back(number(e));
  mt::DType dt = dtype_of(t.at("dtype"));
  if (mt::is_floating(dt)) dt = fdt;
  mt::Tensor r = mt::from_vector(v, shape.empty() ? mt::Shape{1} : shape, {.dtype = dt});
  if (shape.empty()) r = r.reshape({});
  return device.is_cpu() ? r : r.to(device);
}

// Same shape and dtype kind; every element within tol (relative), NaN where PyTorch has NaN.
void expect_matches(const mt::Tensor& got, const json& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.at("shape").get<mt::Shape>()) << what;
  const mt::DType wdt = dtype_of(want.at("dtype"));
  if (!mt::is_floating(wdt)) {
    EXPECT_EQ(got.dtype(), wdt) << what;
  }
  const std::vector<double> g = got.to(mt::Device::cpu()).to_vector<double>();
  const json& w = want.at("data");
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = number(w[i]);
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " element " << i << ": " << g[i] << ", want nan";
    } else if (std::isinf(e)) {
      EXPECT_EQ(g[i], e) << what << " element " << i;
    } else {
      EXPECT_NEAR(g[i], e, tol * (1 + std::fabs(e))) << what << " element " << i;
    }
  }
}

mt::nn::Reduction reduction_of(const json& p) {
  const std::string r = p.value("reduction", "mean");
  return r == "none" ? mt::nn::Reduction::None : (r == "sum" ? mt::nn::Reduction::Sum : mt::nn::Reduction::Mean);
}

mt::Shape dims_of(const json& p) { return p.contains("dims") ? p.at("dims").get<mt::Shape>() : mt::Shape{}; }

// Runs one fixture case's op on `in` (views already applied): the outputs, first one differentiated.
std::vector<mt::Tensor> run_case(const std::string& op, const json& p, const std::vector<mt::Tensor>& in) {
  const mt::Tensor& x = in[0];
  if (op == "cumsum") return {mt::cumsum(x, p.at("dim"))};
  if (op == "cumprod") return {mt::cumprod(x, p.at("dim"))};
  if (op == "l1_loss") return {F::l1_loss(x, in[1], reduction_of(p))};
  if (op == "smooth_l1_loss") return {F::smooth_l1_loss(x, in[1], reduction_of(p), p.at("beta"))};
  if (op == "huber_loss") return {F::huber_loss(x, in[1], reduction_of(p), p.at("delta"))};
  if (op == "binary_cross_entropy")
    return {F::binary_cross_entropy(x, in[1],
                                    {.weight = in.size() > 2 ? in[2] : mt::Tensor(), .reduction = reduction_of(p)})};
  if (op == "kl_div") {
    const std::string r = p.at("reduction");
    F::KlDivOptions o{.log_target = p.value("log_target", false)};
    o.reduction = r == "none"  ? F::KlDivReduction::None
                  : r == "sum" ? F::KlDivReduction::Sum
                               : (r == "batchmean" ? F::KlDivReduction::BatchMean : F::KlDivReduction::Mean);
    return {F::kl_div(x, in[1], o)};
  }
  if (op == "margin_ranking_loss") return {F::margin_ranking_loss(x, in[1], in[2], p.at("margin"), reduction_of(p))};
  if (op == "cosine_embedding_loss")
    return {F::cosine_embedding_loss(x, in[1], in[2], p.at("margin"), reduction_of(p))};
  if (op == "norm") {
    const bool keep = p.value("keepdim", false);
    const json& pv = p.at("p");
    if (pv.is_string() && pv == "fro") return {mt::norm(x, std::string("fro"), dims_of(p), keep)};
    const double pn = pv.is_string() ? std::numeric_limits<double>::infinity() : pv.get<double>();
    return {x.dim() == 2 && !p.contains("dims") && pn != 2 ? mt::norm(x, pn) : mt::norm(x, pn, dims_of(p), keep)};
  }
  if (op == "all") return {mt::all(x, dims_of(p), p.value("keepdim", false))};
  if (op == "any") return {mt::any(x, dims_of(p), p.value("keepdim", false))};
  if (op == "sort") {
    auto r = mt::sort(x, p.at("dim"), p.value("descending", false), true);
    return {r.values, r.indices};
  }
  if (op == "argsort") return {mt::argsort(x, p.at("dim"), p.value("descending", false), true)};
  if (op == "topk") {
    auto r = mt::topk(x, p.at("k"), p.at("dim"), p.at("largest"));
    return {r.values, r.indices};
  }
  if (op == "leaky_relu") return {mt::leaky_relu(x, p.at("negative_slope"))};
  if (op == "elu") return {mt::elu(x, p.at("alpha"))};
  if (op == "hardtanh") return {mt::hardtanh(x, p.at("min_val"), p.at("max_val"))};
  if (op == "prelu") return {mt::prelu(x, in[1])};
  auto arg = [&](size_t i) { return i < in.size() ? in[i] : mt::Tensor(); };
  if (op == "group_norm") return {F::group_norm(x, p.at("num_groups"), arg(1), arg(2), p.at("eps"))};
  if (op == "rms_norm") {
    std::optional<double> eps;
    if (p.contains("eps")) eps = p.at("eps").get<double>();
    return {F::rms_norm(x, p.at("normalized_shape").get<mt::Shape>(), arg(1), eps)};
  }
  if (op == "instance_norm") return {F::instance_norm(x, arg(1), arg(2), p.at("eps"))};
  auto i64 = [&](const char* k, int64_t dflt) { return p.contains(k) ? p.at(k).get<int64_t>() : dflt; };
  auto size2 = [&](const char* k) { return mt::nn::Size2(p.at(k)[0].get<int64_t>(), p.at(k)[1].get<int64_t>()); };
  if (op == "conv1d")
    return {F::conv1d(x, in[1], arg(2),
                      {.stride = i64("stride", 1),
                       .padding = i64("padding", 0),
                       .dilation = i64("dilation", 1),
                       .groups = i64("groups", 1)})};
  if (op == "conv_transpose2d")
    return {F::conv_transpose2d(x, in[1], arg(2),
                                {.stride = size2("stride"),
                                 .padding = size2("padding"),
                                 .output_padding = size2("output_padding"),
                                 .dilation = size2("dilation"),
                                 .groups = i64("groups", 1)})};
  if (op == "conv_transpose1d")
    return {F::conv_transpose1d(x, in[1], arg(2),
                                {.stride = i64("stride", 1),
                                 .padding = i64("padding", 0),
                                 .output_padding = i64("output_padding", 0),
                                 .dilation = i64("dilation", 1),
                                 .groups = i64("groups", 1)})};
  if (op == "max_pool1d")
    return {F::max_pool1d(
        x, p.at("kernel_size"),
        {.stride = i64("stride", 0), .padding = i64("padding", 0), .ceil_mode = p.value("ceil_mode", false)})};
  if (op == "avg_pool1d")
    return {F::avg_pool1d(x, p.at("kernel_size"),
                          {.stride = i64("stride", 0),
                           .padding = i64("padding", 0),
                           .count_include_pad = p.value("count_include_pad", true)})};
  if (op == "adaptive_avg_pool1d") return {F::adaptive_avg_pool1d(x, p.at("output_size"))};
  ADD_FAILURE() << "no mapping for op " << op;
  return {};
}

// Every fixture case in dtype `fdt` on `device`: outputs and gradients of a random upstream gradient.
void run_fixture(mt::DType fdt, mt::Device device, double tol) {
  int n = 0;
  for (const json& c : fixture().at("cases")) {
    const std::string name = c.at("name"), op = c.at("op");
    const json& p = c.at("params");
    SCOPED_TRACE(name + " (" + mt::dtype_name(fdt) + ", " + device.str() + ")");
    std::vector<mt::Tensor> leaves, in;
    for (const json& a : c.at("args")) {
      mt::Tensor t = tensor_of(a, fdt, device);
      if (a.at("grad").get<bool>()) t.requires_grad_();
      leaves.push_back(t);
      in.push_back(p.value("view", "") == "t" && in.empty() ? t.t() : t);
    }
    std::vector<mt::Tensor> out = run_case(op, p, in);
    ASSERT_EQ(out.size(), c.at("out").size());
    for (size_t i = 0; i < out.size(); ++i) expect_matches(out[i], c.at("out")[i], tol, name + " output");
    if (!c.contains("grads")) continue;
    mt::Tensor gy = tensor_of(c.at("gy"), fdt, device);
    out[0].backward(gy);
    for (size_t i = 0; i < leaves.size(); ++i) {
      const json& want = c.at("grads")[i];
      if (want.is_null()) continue;
      expect_matches(leaves[i].grad(), want, tol, name + " gradient of argument " + std::to_string(i));
    }
    ++n;
  }
  EXPECT_GT(n, 40);  // the differentiable cases were all reached
}

}  // namespace

TEST(NewOpsReference, Float64MatchesPyTorch) { run_fixture(mt::kFloat64, mt::Device::cpu(), 1e-9); }
TEST(NewOpsReference, Float32MatchesPyTorch) { run_fixture(mt::kFloat32, mt::Device::cpu(), 2e-5); }
TEST(NewOpsReference, CudaMatchesPyTorch) {
  REQUIRE_GPU();
  run_fixture(mt::kFloat64, mt::Device::cuda(), 1e-9);
  run_fixture(mt::kFloat32, mt::Device::cuda(), 2e-5);
}

// ---------------------------------------------------------------- float64 gradcheck

#define EXPECT_GRADCHECK(fn, ...)                               \
  do {                                                          \
    std::string why;                                            \
    EXPECT_TRUE(gradcheck(fn, {__VA_ARGS__}, {}, &why)) << why; \
  } while (0)

namespace {
mt::Tensor leaf(const mt::Shape& s, double lo = -1, double hi = 1) {
  mt::Tensor t = (mt::rand(s, {.dtype = mt::kFloat64}) * (hi - lo) + lo).detach();
  return t.requires_grad_();
}
}  // namespace

TEST(NewOpsGradcheck, Cumulative) {
  mt::manual_seed(1);
  auto x = leaf({3, 5});
  EXPECT_GRADCHECK([](auto& in) { return mt::cumsum(in[0], 1); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::cumsum(in[0].t(), 1); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::cumprod(in[0], 1); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::cumprod(in[0], 0); }, x);
  // Zeros in the input (two in a row, one in the first place), along both dims (the kernel's
  // rows and columns).
  auto z = mt::from_vector<double>({0.5, 0.0, 2.0, 0.0, -1.5, 3.0, 0.0, 1.25}, {2, 4}).requires_grad_();
  EXPECT_GRADCHECK([](auto& in) { return mt::cumprod(in[0], 0); }, z);
  EXPECT_GRADCHECK([](auto& in) { return mt::cumprod(in[0], 1); }, z);
  std::string why;
  EXPECT_TRUE(mt::autograd::gradgradcheck([](auto& in) { return mt::cumprod(in[0], 1); }, {z}, {}, &why)) << why;
  EXPECT_TRUE(mt::autograd::gradgradcheck([](auto& in) { return mt::cumsum(in[0], 0); }, {x}, {}, &why)) << why;
}

TEST(NewOpsGradcheck, Losses) {
  mt::manual_seed(2);
  auto a = leaf({3, 4}, -2, 2), b = leaf({3, 4}, -2, 2);
  using R = mt::nn::Reduction;
  EXPECT_GRADCHECK([](auto& in) { return F::l1_loss(in[0], in[1], R::Sum); }, a, b);
  EXPECT_GRADCHECK([](auto& in) { return F::smooth_l1_loss(in[0], in[1], R::Mean, 0.8); }, a, b);
  EXPECT_GRADCHECK([](auto& in) { return F::huber_loss(in[0], in[1], R::None, 0.6); }, a, b);
  auto p = leaf({3, 4}, 0.05, 0.95), t = leaf({3, 4}, 0, 1);
  auto w = mt::rand({4}, {.dtype = mt::kFloat64}) + 0.5;
  EXPECT_GRADCHECK([w](auto& in) { return F::binary_cross_entropy(in[0], in[1], {.weight = w}); }, p, t);
  auto logp = mt::log_softmax(mt::randn({3, 5}, {.dtype = mt::kFloat64}), 1).detach().requires_grad_();
  auto q = mt::softmax(mt::randn({3, 5}, {.dtype = mt::kFloat64}), 1).detach().requires_grad_();
  EXPECT_GRADCHECK([](auto& in) { return F::kl_div(in[0], in[1], {.reduction = F::KlDivReduction::BatchMean}); }, logp,
                   q);
  EXPECT_GRADCHECK([](auto& in) { return F::kl_div(in[0], in[1], {.log_target = true}); }, logp, logp.detach() * 0.5);
  auto y = mt::from_vector<double>({1, -1, 1, -1, 1}, {5});
  auto u = leaf({5}), v = leaf({5});
  EXPECT_GRADCHECK([y](auto& in) { return F::margin_ranking_loss(in[0], in[1], y, 0.1); }, u, v);
  auto e1 = leaf({4, 3}), e2 = leaf({4, 3});
  auto ye = mt::from_vector<double>({1, -1, -1, 1}, {4});
  EXPECT_GRADCHECK([ye](auto& in) { return F::cosine_embedding_loss(in[0], in[1], ye, -0.9); }, e1, e2);
}

TEST(NewOpsGradcheck, NormAndSort) {
  mt::manual_seed(3);
  auto x = leaf({3, 4});
  EXPECT_GRADCHECK([](auto& in) { return mt::norm(in[0]); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::norm(in[0], 1.0, {1}); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::norm(in[0], 3.0, {0}, true); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::norm(in[0], std::numeric_limits<double>::infinity(), {1}); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::sort(in[0], 1, true).values; }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::topk(in[0], 2, 0, false).values; }, x);
}

// ---------------------------------------------------------------- edges

// topk sorts only its k (a partial sort): its values and indices must be the first k of the
// stable sort, ties in input order and NaN first (largest) or last (smallest), on long rows with
// many ties, along the last dim and a leading one.
// Signed zeros compare equal (input order), NaN of either sign sorts above inf, denormals in
// order: sort and topk against std::stable_sort with the plain comparison.
TEST(NewOpsEdges, SortOrdersSpecialValuesAsPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> special = {0.0, -0.0, nan, 1.0, -inf, inf, -nan, 1e-40, -1e-40, 1.0, 0.0, -0.0, -2.5, 3e38};
  // A row of 14 (std::sort) and one of 700 (radix sort of the keys): the special values spread
  // among integers, many of them equal.
  std::vector<double> long_row;
  mt::manual_seed(5);
  for (double r : (mt::randn({700}) * 20).to(mt::kInt64).to(mt::kFloat64).to_vector<double>())
    long_row.push_back(long_row.size() % 50 < special.size() ? special[long_row.size() % 50] : r);
  for (const std::vector<double>& v : {special, long_row})
    for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kBFloat16})
      for (bool descending : {false, true}) {
        const mt::Tensor x = mt::from_vector<double>(v, {int64_t(v.size())}).to(dt);
        const std::vector<double> xv = x.to_vector<double>();
        std::vector<int64_t> want(v.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = int64_t(i);
        std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) {
          const double p = xv[size_t(a)], q = xv[size_t(b)];
          if (std::isnan(p) || std::isnan(q))
            return descending ? std::isnan(p) && !std::isnan(q) : std::isnan(q) && !std::isnan(p);
          return descending ? p > q : p < q;
        });
        const std::string what = std::string(mt::dtype_name(dt)) + (descending ? " descending" : " ascending") +
                                 " of " + std::to_string(v.size());
        EXPECT_EQ(mt::sort(x, 0, descending).indices.to_vector<int64_t>(), want) << what;
        EXPECT_EQ(mt::topk(x, 5, 0, descending).indices.to_vector<int64_t>(),
                  std::vector<int64_t>(want.begin(), want.begin() + 5))
            << what;
      }
}

// int64 rows of 14 and 700: negative, huge and repeated values, sorted by std::sort and by radix.
TEST(NewOpsEdges, SortOrdersInt64AsStableSort) {
  mt::manual_seed(6);
  std::vector<int64_t> v = (mt::randn({700}) * 20).to(mt::kInt64).to_vector<int64_t>();
  const std::vector<int64_t> edges = {std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int64_t>::max(),
                                      int64_t(1) << 62,
                                      -(int64_t(1) << 62),
                                      -1,
                                      0,
                                      1};
  for (size_t i = 0; i < edges.size(); ++i) v[i * 97] = edges[i];
  for (size_t len : {size_t(14), v.size()})
    for (bool descending : {false, true}) {
      const std::vector<int64_t> row(v.begin(), v.begin() + std::ptrdiff_t(len));
      std::vector<int64_t> want(len);
      for (size_t i = 0; i < len; ++i) want[i] = int64_t(i);
      std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) {
        return descending ? row[size_t(a)] > row[size_t(b)] : row[size_t(a)] < row[size_t(b)];
      });
      const mt::Tensor x = mt::from_vector<int64_t>(row, {int64_t(len)});
      EXPECT_EQ(mt::sort(x, 0, descending).indices.to_vector<int64_t>(), want) << len << descending;
    }
}

TEST(NewOpsEdges, TopkIsTheStableSortsFirstK) {
  mt::manual_seed(11);
  mt::Tensor x = (mt::randn({7, 300}) * 3).to(mt::kInt64).to(mt::kFloat32);  // a dozen values per row
  x.select(1, 5).fill_(std::numeric_limits<double>::quiet_NaN());
  x.select(0, 2).select(0, 17).fill_(std::numeric_limits<double>::quiet_NaN());
  // k = 1, 5 (and 6 along dim 0) walk the row keeping k in order; 40 along dim 1 goes through
  // std::partial_sort; k = n sorts.
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64, mt::kInt64})
    for (bool largest : {true, false})
      for (int64_t dim : {1, 0})
        for (int64_t k : {int64_t(1), int64_t(5), std::min<int64_t>(40, x.size(dim) - 1), x.size(dim)}) {
          const mt::Tensor v = x.to(dt);
          const auto top = mt::topk(v, k, dim, largest);
          const auto all = mt::sort(v, dim, largest, true);
          const std::string what = std::string(mt::dtype_name(dt)) + " k " + std::to_string(k) + " dim " +
                                   std::to_string(dim) + (largest ? " largest" : " smallest");
          EXPECT_EQ(top.indices.to_vector<int64_t>(), all.indices.narrow(dim, 0, k).contiguous().to_vector<int64_t>())
              << what;
          const auto got = top.values.to(mt::kFloat64).to_vector<double>();
          const auto want = all.values.narrow(dim, 0, k).contiguous().to(mt::kFloat64).to_vector<double>();
          ASSERT_EQ(got.size(), want.size()) << what;
          for (size_t i = 0; i < got.size(); ++i)
            EXPECT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) << what << " at " << i;
        }
}

TEST(NewOpsEdges, CumulativeDtypesAndShapes) {
  // Integer and bool inputs give int64; int32 overflow is not wrapped.
  auto i = mt::cumsum(mt::from_vector<int32_t>({1 << 30, 1 << 30, 5}, {3}), 0);
  EXPECT_EQ(i.dtype(), mt::kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1 << 30, int64_t(1) << 31, (int64_t(1) << 31) + 5}));
  // fp16 accumulates in fp32 and rounds once: 2048 + 1 + 1 would stay 2048 step by step in fp16.
  auto h = mt::cumsum(mt::from_vector<float>({2048, 1, 1}, {3}, {.dtype = mt::kHalf}), 0);
  EXPECT_EQ(h.dtype(), mt::kHalf);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{2048, 2048, 2050}));
  // Empty along another dim, 0-dim, a dim out of range.
  EXPECT_EQ(mt::cumprod(mt::zeros({0, 3}), 1).sizes(), (mt::Shape{0, 3}));
  EXPECT_EQ(mt::cumsum(mt::scalar_tensor(2.5), -1).item<double>(), 2.5);
  EXPECT_ERROR(mt::cumsum(mt::zeros({2, 3}), 2), HasSubstr("cumsum"));
  // A stepped (non-contiguous) slice.
  auto s = mt::arange(0, 8, 1, {.dtype = mt::kFloat32}).slice(0, 1, 8, 2);  // 1 3 5 7
  EXPECT_EQ(mt::cumsum(s, 0).to_vector<float>(), (std::vector<float>{1, 4, 9, 16}));
  EXPECT_EQ(mt::cumprod(s, 0).to_vector<float>(), (std::vector<float>{1, 3, 15, 105}));
}

// The plain loop along dim of x ([outer, n, inner] around dim), each line accumulated in order
// in Acc from its start (or its end when `reverse`).
template <typename Acc>
std::vector<Acc> sequential_scan(const std::vector<Acc>& x, const mt::Shape& shape, int64_t dim, bool product,
                                 bool reverse) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[size_t(dim)];
  std::vector<Acc> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < inner; ++c) {
      Acc acc = product ? Acc(1) : Acc(0);
      for (int64_t s = 0; s < n; ++s) {
        const size_t at = size_t((o * n + (reverse ? n - 1 - s : s)) * inner + c);
        acc = product ? acc * x[at] : acc + x[at];
        y[at] = acc;
      }
    }
  return y;
}

// x's scan as the loop computes it: fp32 accumulated in fp64, bf16 in fp32 (one rounding each),
// fp64 in fp64, int64 as wrapping uint64.
mt::Tensor expected_scan(const mt::Tensor& x, int64_t dim, bool product, bool reverse) {
  const mt::Shape& shape = x.sizes();
  if (x.dtype() == mt::kInt64) {
    std::vector<uint64_t> v;
    for (int64_t e : x.to_vector<int64_t>()) v.push_back(uint64_t(e));
    std::vector<int64_t> y;
    for (uint64_t e : sequential_scan(v, shape, dim, product, reverse)) y.push_back(int64_t(e));
    return mt::from_vector<int64_t>(y, shape);
  }
  if (x.dtype() == mt::kBFloat16)
    return mt::from_vector<float>(sequential_scan(x.to_vector<float>(), shape, dim, product, reverse), shape)
        .to(mt::kBFloat16);
  return mt::from_vector<double>(sequential_scan(x.to_vector<double>(), shape, dim, product, reverse), shape)
      .to(x.dtype());
}

// The scan kernel's row groups (8 rows, 64-element chunks) and their remainders, its column
// blocks (256 columns) and a single long row, bit for bit against the loop; the backward (the
// scan from the end) too.
TEST(NewOpsEdges, CumulativeEqualsTheSequentialLoop) {
  mt::manual_seed(3);
  const std::vector<std::pair<mt::Shape, int64_t>> geometries = {
      {{19, 150}, 1}, {{19, 150}, 0}, {{3, 70, 300}, 1}, {{2, 5, 7}, 2}, {{1000}, 0}};
  for (const auto& [shape, dim] : geometries)
    for (bool product : {false, true})
      for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kFloat64, mt::kInt64}) {
        const std::string what = std::string(product ? "cumprod " : "cumsum ") + mt::dtype_name(dt) + " of " +
                                 mt::Tensor(mt::zeros(shape)).shape_str() + " along " + std::to_string(dim);
        mt::Tensor x = dt == mt::kInt64 ? mt::randint(product ? -3 : -1000, product ? 4 : 1000, shape)
                                        : (product ? mt::rand(shape) * 0.2 + 0.9 : mt::randn(shape)).to(dt);
        EXPECT_EQ((product ? mt::cumprod(x, dim) : mt::cumsum(x, dim)).to_vector<double>(),
                  expected_scan(x, dim, product, false).to_vector<double>())
            << what;
        if (product || dt == mt::kInt64) continue;
        mt::Tensor leaf = x.detach().requires_grad_(true), w = mt::randn(shape).to(dt);
        (mt::cumsum(leaf, dim) * w).sum().backward();
        EXPECT_EQ(leaf.grad().to_vector<double>(), expected_scan(w, dim, false, true).to_vector<double>()) << what;
      }
}

// cumprod's first-order gradient (the backend's kernel) at zeros, infinities and NaN, as torch
// 1.13 gives it (values printed by torch.cumprod(x, -1).backward(g) on the CPU, float32): before
// a line's first zero the reverse sums of g y divided by x (inf / inf is NaN), at it y_{z-1} times
// g's products of what follows (inf - inf is NaN), after it 0. A column layout ([n, 1] lines
// along dim 0) gives the same values.
TEST(NewOpsEdges, CumprodGradientAtSpecialValuesAsPyTorch) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::vector<double> x, g, want;
  };
  const std::vector<Case> cases = {
      {{2, 0, inf}, {0.5, -1, 2}, {0.5, inf, 0}},
      {{2, 0, 3}, {0.5, -1, 2}, {0.5, 10, 0}},
      {{2, inf, 0, 5}, {0.5, -1, 2, 0.25}, {-inf, nan, inf, 0}},
      {{0.5, inf, 3}, {0.5, -1, 2}, {nan, nan, inf}},
      {{2, 0, 0, 4}, {0.5, -1, 2, 0.25}, {0.5, -2, 0, 0}},
      {{nan, 2, 0}, {0.5, -1, 2}, {nan, nan, nan}},
      {{inf, 0, 2}, {0.5, -1, 2}, {nan, inf, 0}},
      {{-0.0, inf, 3}, {-0.75, -0.25, 0.25}, {nan, 0, 0}},
  };
  for (const Case& c : cases)
    for (int64_t dim : {0, 1}) {
      const int64_t n = int64_t(c.x.size());
      const mt::Shape shape = dim == 1 ? mt::Shape{1, n} : mt::Shape{n, 1};
      mt::Tensor x = mt::from_vector<double>(c.x, shape).to(mt::kFloat32).requires_grad_();
      mt::cumprod(x, dim).backward(mt::from_vector<double>(c.g, shape).to(mt::kFloat32));
      const std::vector<double> got = x.grad().to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(c.want[size_t(i)]))
          EXPECT_TRUE(std::isnan(got[size_t(i)])) << "x[0] = " << c.x[0] << ", element " << i << ": " << got[size_t(i)];
        else
          EXPECT_EQ(got[size_t(i)], c.want[size_t(i)]) << "x[0] = " << c.x[0] << ", element " << i;
      }
    }
}

TEST(NewOpsEdges, NormZeroGradientAndErrors) {
  auto z = mt::zeros({3}, {.dtype = mt::kFloat64, .requires_grad = true});
  mt::norm(z).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));  // PyTorch: 0, not NaN
  EXPECT_ERROR(mt::norm(mt::from_vector<int64_t>({1, 2})), HasSubstr("norm"), HasSubstr("int64"));
  EXPECT_ERROR(mt::norm(mt::ones({2}), "nuc"), HasSubstr("nuc"));
  EXPECT_ERROR(mt::norm(mt::ones({2}), -1.0), HasSubstr("p must be"));
  EXPECT_ERROR(mt::topk(mt::ones({2, 3}), 4), HasSubstr("topk"), HasSubstr("k = 4"));
  EXPECT_EQ(mt::any(mt::scalar_tensor(0.0)).item<bool>(), false);
  EXPECT_EQ(mt::all(mt::from_vector<int64_t>({1, -3}).reshape({2, 1}).t(), {1}).to_vector<bool>(),
            (std::vector<bool>{true}));
}

TEST(NewOpsEdges, LossErrorsAndClamp) {
  using R = mt::nn::Reduction;
  EXPECT_ERROR(F::l1_loss(mt::ones({2, 3}), mt::ones({3, 2})), HasSubstr("l1_loss"), HasSubstr("[3, 2]"));
  EXPECT_ERROR(F::huber_loss(mt::ones({2}), mt::ones({2}), R::Mean, 0.0), HasSubstr("delta"));
  EXPECT_ERROR(F::smooth_l1_loss(mt::ones({2}), mt::ones({2}), R::Mean, -1.0), HasSubstr("beta"));
  EXPECT_ERROR(F::binary_cross_entropy(mt::tensor({0.5f, 1.5f}), mt::tensor({0, 1})), HasSubstr("between 0 and 1"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_ERROR(F::binary_cross_entropy(mt::tensor({0.5f, nan}), mt::tensor({0, 1})), HasSubstr("NaN"));
  EXPECT_ERROR(F::cosine_embedding_loss(mt::ones({2, 3}), mt::ones({2, 3}), mt::ones({3})),
               HasSubstr("cosine_embedding_loss"));
  // p = 0 and 1 with hard targets: the clamped logs give exactly 0 and 100 (PyTorch's values).
  auto l = F::binary_cross_entropy(mt::tensor({0, 1, 0, 1}), mt::tensor({0, 1, 1, 0}), {.reduction = R::None});
  EXPECT_EQ(l.to_vector<float>(), (std::vector<float>{0, 0, 100, 100}));
  // Empty inputs: none gives empty, sum 0, mean NaN (as PyTorch).
  EXPECT_EQ(F::l1_loss(mt::zeros({0}), mt::zeros({0}), R::Sum).item<float>(), 0.0f);
  EXPECT_TRUE(std::isnan(F::l1_loss(mt::zeros({0}), mt::zeros({0})).item<float>()));
}

TEST(NewOpsAutocast, LossesRunInFp32AndBceIsRefusedUnderFp16) {
  mt::Tensor h = (mt::rand({4}) * 0.8 + 0.1).to(mt::kHalf), t = mt::rand({4}).to(mt::kHalf);
  {
    mt::amp::Autocast ac(mt::kHalf);
    EXPECT_EQ(F::l1_loss(h, t).dtype(), mt::kFloat32);
    EXPECT_EQ(F::smooth_l1_loss(h, t).dtype(), mt::kFloat32);
    EXPECT_EQ(F::huber_loss(h, t).dtype(), mt::kFloat32);
    EXPECT_EQ(mt::cumsum(h, 0).dtype(), mt::kFloat32);
    EXPECT_EQ(mt::norm(h).dtype(), mt::kFloat32);
    EXPECT_EQ(mt::sort(h).values.dtype(), mt::kHalf);  // not in PyTorch's lists: runs in its input type
    EXPECT_ERROR(F::binary_cross_entropy(h, t), HasSubstr("unsafe to autocast"),
                 HasSubstr("binary_cross_entropy_with_logits"));
  }
  {
    // PyTorch's CPU autocast (bf16) runs it in fp32.
    mt::amp::Autocast ac(mt::kBFloat16);
    EXPECT_EQ(F::binary_cross_entropy(h.to(mt::kBFloat16), t.to(mt::kBFloat16)).dtype(), mt::kFloat32);
  }
  // Outside autocast, fp16 stays fp16.
  EXPECT_EQ(F::binary_cross_entropy(h, t).dtype(), mt::kHalf);
}

// ---------------------------------------------------------------- activations and modules

namespace {
// Same shape, and every element within 1e-6 (relative) or both NaN.
bool allclose(const mt::Tensor& a, const mt::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::fabs(x[i] - y[i]) <= 1e-6 * (1 + std::fabs(y[i]))) && !(std::isnan(x[i]) && std::isnan(y[i])))
      return false;
  return true;
}
}  // namespace

TEST(NewOpsGradcheck, Activations) {
  mt::manual_seed(4);
  auto x = leaf({3, 4}, -2, 2);
  EXPECT_GRADCHECK([](auto& in) { return mt::leaky_relu(in[0], 0.3); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::elu(in[0], 0.7); }, x);
  EXPECT_GRADCHECK([](auto& in) { return mt::hardtanh(in[0], -0.8, 1.1); }, x);
  auto xc = leaf({2, 3, 2}, -2, 2), w = leaf({3}, -1, 1);
  EXPECT_GRADCHECK([](auto& in) { return mt::prelu(in[0], in[1]); }, xc, w);
  std::string why;
  EXPECT_TRUE(mt::autograd::gradgradcheck([](auto& in) { return mt::elu(in[0], 0.7); }, {x}, {}, &why)) << why;
}

TEST(NewOpsModules, ActivationsAndShapes) {
  mt::manual_seed(5);
  mt::Tensor x = mt::randn({2, 3, 4});
  mt::nn::Sequential net(mt::nn::LeakyReLU(0.2), mt::nn::ELU(), mt::nn::Hardtanh(-0.5, 0.5), mt::nn::Identity(),
                         mt::nn::Softplus(2.0), mt::nn::Functional([](const mt::Tensor& t) { return t * 2.0; }),
                         mt::nn::Softmax(-1), mt::nn::LogSoftmax(1), mt::nn::PReLU(3));
  mt::Tensor want = mt::softplus(mt::hardtanh(mt::elu(mt::leaky_relu(x, 0.2)), -0.5, 0.5), 2.0) * 2.0;
  want = mt::log_softmax(mt::softmax(want, -1), 1);
  want = mt::where(want > 0.0, want, want * 0.25);
  EXPECT_TRUE(allclose(net(x), want));
  ASSERT_EQ(net.parameters().size(), 1u);  // PReLU's weight [3], initialised to 0.25
  EXPECT_EQ(net.parameters()[0].to_vector<float>(), (std::vector<float>{0.25f, 0.25f, 0.25f}));
  EXPECT_EQ(mt::nn::Unflatten(1, {2, -1})(mt::zeros({5, 6})).sizes(), (mt::Shape{5, 2, 3}));
  EXPECT_ERROR(mt::nn::Unflatten(1, {4, 2})(mt::zeros({5, 6})), HasSubstr("Unflatten"), HasSubstr("[5, 6]"));
  EXPECT_ERROR(mt::prelu(mt::zeros({2, 3}), mt::ones({4})), HasSubstr("prelu"), HasSubstr("[4]"));
  EXPECT_ERROR(mt::leaky_relu(mt::from_vector<int64_t>({1, -2})), HasSubstr("leaky_relu"));
  // The PReLU weight trains: d/dw of sum(prelu(x)) is the sum of the negative x of its channel.
  mt::nn::PReLU p(2);
  mt::Tensor xi = mt::from_vector<float>({-1, 2, -3, -4}, {2, 2});
  p(xi).sum().backward();
  EXPECT_EQ(p.weight.grad().to_vector<float>(), (std::vector<float>{-4, -4}));
}

TEST(NewOpsModules, LossModulesMatchTheirFunctions) {
  mt::manual_seed(6);
  using R = mt::nn::Reduction;
  mt::Tensor a = mt::randn({4, 3}), b = mt::randn({4, 3}), p = mt::rand({4, 3}) * 0.9 + 0.05;
  mt::Tensor labels = mt::randint(0, 3, {4});
  EXPECT_TRUE(allclose(mt::nn::MSELoss()(a, b), F::mse_loss(a, b)));
  EXPECT_TRUE(allclose(mt::nn::L1Loss(R::Sum)(a, b), F::l1_loss(a, b, R::Sum)));
  EXPECT_TRUE(allclose(mt::nn::SmoothL1Loss(R::Mean, 0.5)(a, b), F::smooth_l1_loss(a, b, R::Mean, 0.5)));
  EXPECT_TRUE(allclose(mt::nn::HuberLoss(R::None, 0.3)(a, b), F::huber_loss(a, b, R::None, 0.3)));
  EXPECT_TRUE(allclose(mt::nn::BCELoss()(p, p.detach() * 0.5), F::binary_cross_entropy(p, p * 0.5)));
  EXPECT_TRUE(allclose(mt::nn::BCEWithLogitsLoss()(a, p), F::binary_cross_entropy_with_logits(a, p)));
  EXPECT_TRUE(allclose(mt::nn::CrossEntropyLoss({.label_smoothing = 0.1})(a, labels),
                       F::cross_entropy(a, labels, {.label_smoothing = 0.1})));
  mt::Tensor lp = mt::log_softmax(a, 1);
  EXPECT_TRUE(allclose(mt::nn::NLLLoss()(lp, labels), F::nll_loss(lp, labels)));
  EXPECT_TRUE(allclose(mt::nn::KLDivLoss({.reduction = F::KlDivReduction::BatchMean})(lp, mt::softmax(b, 1)),
                       F::kl_div(lp, mt::softmax(b, 1), {.reduction = F::KlDivReduction::BatchMean})));
  EXPECT_EQ(mt::nn::HuberLoss(R::Sum, 0.3).extra_repr(), "reduction=sum, delta=0.3");
}

TEST(NewOpsEdges, ActivationsInEveryFloatDtype) {
  // fp16 / bf16 / fp32 inputs against the float64 values of the same (rounded) inputs.
  mt::Tensor x = mt::from_vector<double>({-3, -0.5, -1e-4, 0, 0.25, 2}, {6});
  for (mt::DType t : {mt::kFloat32, mt::kHalf, mt::kBFloat16}) {
    const double tol = t == mt::kFloat32 ? 1e-6 : (t == mt::kHalf ? 1e-3 : 8e-3);
    auto check = [&](const mt::Tensor& got, const mt::Tensor& want, const char* what) {
      EXPECT_EQ(got.dtype(), t) << what;
      const auto g = got.to_vector<double>(), w = want.to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " " << mt::dtype_name(t) << " " << i;
    };
    check(mt::leaky_relu(x.to(t), 0.2), mt::leaky_relu(x.to(t).to(mt::kFloat64), 0.2), "leaky_relu");
    check(mt::elu(x.to(t), 1.5), mt::elu(x.to(t).to(mt::kFloat64), 1.5), "elu");
    check(mt::hardtanh(x.to(t), -1, 1), mt::hardtanh(x.to(t).to(mt::kFloat64), -1, 1), "hardtanh");
  }
  // elu keeps expm1's relative accuracy near 0 (exp(x) - 1 would not, in float32).
  EXPECT_NEAR(mt::elu(mt::tensor({-1e-6f})).item<float>(), std::expm1(-1e-6), 1e-13);
}
