// Tensor behaviour: view geometry and storage sharing, copies, casts, factories,
// element access, random factories, in-place ops and printing.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>
#include <vector>

namespace mt = mantissa;

namespace {

// [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] as float32.
mt::Tensor grid() { return mt::arange(0, 12, 1, {.dtype = mt::kFloat}).reshape({3, 4}); }

std::vector<float> vals(const mt::Tensor& t) { return t.to_vector<float>(); }

std::string str(const mt::Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

bool shares_storage(const mt::Tensor& a, const mt::Tensor& b) { return a.impl()->storage == b.impl()->storage; }

}  // namespace

// ---------------------------------------------------------------- views

TEST(TensorView, ViewSharesStorageBothWays) {
  mt::Tensor base = grid();
  mt::Tensor v = base.view({4, 3});
  EXPECT_TRUE(shares_storage(base, v));
  EXPECT_EQ(v.sizes(), (mt::Shape{4, 3}));
  EXPECT_EQ(v.strides(), (mt::Shape{3, 1}));
  v.data_ptr<float>()[5] = 100;
  EXPECT_EQ(vals(base)[5], 100);
  base.data_ptr<float>()[0] = -1;
  EXPECT_EQ(vals(v)[0], -1);
  // -1 infers a dimension.
  EXPECT_EQ(base.view({2, -1}).sizes(), (mt::Shape{2, 6}));
  EXPECT_EQ(base.view({12}).sizes(), (mt::Shape{12}));
}

TEST(TensorView, WritesThroughEveryKindOfView) {
  mt::Tensor base = grid();
  base.select(0, 1).fill_(-1);  // row 1
  EXPECT_EQ(vals(base), (std::vector<float>{0, 1, 2, 3, -1, -1, -1, -1, 8, 9, 10, 11}));
  base.t().select(0, 2).fill_(-2);  // column 2
  EXPECT_EQ(vals(base), (std::vector<float>{0, 1, -2, 3, -1, -1, -2, -1, 8, 9, -2, 11}));
  base.slice(1, 1, 4, 2).mul_(10);  // columns 1 and 3
  EXPECT_EQ(vals(base), (std::vector<float>{0, 10, -2, 30, -1, -10, -2, -10, 8, 90, -2, 110}));
  base.narrow(0, 2, 1).zero_();
  EXPECT_EQ(vals(base), (std::vector<float>{0, 10, -2, 30, -1, -10, -2, -10, 0, 0, 0, 0}));
  base.permute({1, 0}).narrow(0, 0, 1).add_(5);  // column 0 via a permuted view
  EXPECT_EQ(vals(base), (std::vector<float>{5, 10, -2, 30, 4, -10, -2, -10, 5, 0, 0, 0}));
  base.unsqueeze(0).squeeze(0).flatten().select(0, 11).fill_(7);
  EXPECT_EQ(vals(base)[11], 7);
  base.detach().select(1, 1).fill_(1);
  EXPECT_EQ(vals(base.select(1, 1)), (std::vector<float>{1, 1, 1}));
}

TEST(TensorView, GeometryOfViews) {
  mt::Tensor base = grid();  // [3, 4], strides [4, 1]
  mt::Tensor t = base.t();
  EXPECT_EQ(t.sizes(), (mt::Shape{4, 3}));
  EXPECT_EQ(t.strides(), (mt::Shape{1, 4}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(vals(t), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));

  mt::Tensor s = base.slice(1, 1, 4, 2);
  EXPECT_EQ(s.sizes(), (mt::Shape{3, 2}));
  EXPECT_EQ(s.strides(), (mt::Shape{4, 2}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(vals(s), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  // Negative and out-of-range bounds clamp like Python slicing.
  EXPECT_EQ(vals(base.slice(1, -2, 100)), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(base.slice(0, 2, 1).sizes(), (mt::Shape{0, 4}));
  EXPECT_EQ(base.slice(1, 0, 4, 3).sizes(), (mt::Shape{3, 2}));  // indices 0 and 3

  mt::Tensor n = base.narrow(0, 1, 2);
  EXPECT_EQ(n.sizes(), (mt::Shape{2, 4}));
  EXPECT_EQ(n.strides(), (mt::Shape{4, 1}));
  EXPECT_EQ(n.offset(), 4);
  EXPECT_TRUE(n.is_contiguous());

  mt::Tensor sel = base.select(1, -1);
  EXPECT_EQ(sel.sizes(), (mt::Shape{3}));
  EXPECT_EQ(sel.strides(), (mt::Shape{4}));
  EXPECT_EQ(sel.offset(), 3);
  EXPECT_EQ(vals(sel), (std::vector<float>{3, 7, 11}));
  mt::Tensor sel2 = base.slice(1, 1, 4, 2).select(0, 2);  // a select of a view adds offsets
  EXPECT_EQ(sel2.offset(), 9);
  EXPECT_EQ(vals(sel2), (std::vector<float>{9, 11}));

  mt::Tensor x = mt::arange(0, 24, 1, {.dtype = mt::kFloat}).reshape({2, 3, 4});
  mt::Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (mt::Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (mt::Shape{1, 12, 4}));
  EXPECT_EQ(vals(p).at(1), 4);  // p[0][0][1] = x[0][1][0]
  mt::Tensor tr = x.transpose(0, 2);
  EXPECT_EQ(tr.sizes(), (mt::Shape{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (mt::Shape{1, 4, 12}));
  EXPECT_EQ(x.transpose(-1, -3).strides(), tr.strides());

  mt::Tensor col = mt::from_vector<float>({1, 2, 3}, {3, 1});
  mt::Tensor e = col.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), (mt::Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (mt::Shape{0, 1, 0}));
  EXPECT_TRUE(shares_storage(e, col));
  EXPECT_EQ(vals(e.select(0, 1).select(0, 2)), (std::vector<float>{3, 3, 3, 3}));
  EXPECT_EQ(col.expand({-1, 5}).sizes(), (mt::Shape{3, 5}));

  mt::Tensor ones4 = mt::zeros({1, 3, 1, 4});
  EXPECT_EQ(ones4.squeeze().sizes(), (mt::Shape{3, 4}));
  EXPECT_EQ(ones4.squeeze().strides(), (mt::Shape{4, 1}));
  EXPECT_EQ(ones4.squeeze(2).sizes(), (mt::Shape{1, 3, 4}));
  EXPECT_EQ(ones4.squeeze(1).sizes(), (mt::Shape{1, 3, 1, 4}));  // not size 1: unchanged
  EXPECT_EQ(ones4.squeeze(-4).sizes(), (mt::Shape{3, 1, 4}));

  EXPECT_EQ(base.unsqueeze(0).sizes(), (mt::Shape{1, 3, 4}));
  EXPECT_EQ(base.unsqueeze(1).sizes(), (mt::Shape{3, 1, 4}));
  EXPECT_EQ(base.unsqueeze(1).strides(), (mt::Shape{4, 4, 1}));
  EXPECT_EQ(base.unsqueeze(-1).sizes(), (mt::Shape{3, 4, 1}));
  EXPECT_EQ(base.unsqueeze(-1).strides(), (mt::Shape{4, 1, 1}));

  EXPECT_EQ(x.flatten().sizes(), (mt::Shape{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (mt::Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (mt::Shape{6, 4}));
  EXPECT_TRUE(shares_storage(x.flatten(1), x));
  EXPECT_EQ(mt::scalar_tensor(3.0).flatten().sizes(), (mt::Shape{1}));
}

TEST(TensorView, ViewRejectsIncompatibleStridesAndReshapeCopies) {
  mt::Tensor base = grid();
  mt::Tensor t = base.t();
  EXPECT_THROW(t.view({12}), mt::Error);
  EXPECT_THROW(t.view({2, 6}), mt::Error);
  mt::Tensor r = t.reshape({12});
  EXPECT_FALSE(shares_storage(r, base));
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(vals(r), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  r.fill_(0);
  EXPECT_EQ(vals(base)[1], 1);  // the copy is independent
  // reshape of a contiguous tensor is a view.
  mt::Tensor r2 = base.reshape({6, 2});
  EXPECT_TRUE(shares_storage(r2, base));
  // A view that only splits a dimension of a non-contiguous tensor is allowed.
  mt::Tensor cols = base.slice(1, 0, 2);  // [3, 2], strides [4, 1]
  mt::Tensor split = cols.view({3, 2, 1});
  EXPECT_TRUE(shares_storage(split, base));
  EXPECT_EQ(split.strides(), (mt::Shape{4, 1, 1}));
  EXPECT_THROW(cols.view({6}), mt::Error);
  EXPECT_EQ(vals(cols.reshape({6})), (std::vector<float>{0, 1, 4, 5, 8, 9}));
  // A transposed [4, 3] viewed as [2, 2, 3] splits the outer (stride-1) dim: allowed.
  mt::Tensor tv = t.view({2, 2, 3});
  EXPECT_EQ(tv.strides(), (mt::Shape{2, 1, 4}));
  EXPECT_EQ(vals(tv), vals(t));
}

TEST(TensorView, ContiguousCloneDetach) {
  mt::Tensor base = grid();
  EXPECT_TRUE(base.contiguous().is_same(base));
  mt::Tensor t = base.t();
  mt::Tensor c = t.contiguous();
  EXPECT_FALSE(c.is_same(t));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (mt::Shape{3, 1}));
  EXPECT_EQ(vals(c), vals(t));
  EXPECT_FALSE(shares_storage(c, base));

  mt::Tensor cl = base.clone();
  EXPECT_FALSE(shares_storage(cl, base));
  EXPECT_EQ(vals(cl), vals(base));
  cl.fill_(3);
  EXPECT_EQ(vals(base)[0], 0);
  mt::Tensor clt = t.clone();  // a clone of a view is contiguous
  EXPECT_TRUE(clt.is_contiguous());
  EXPECT_EQ(vals(clt), vals(t));

  mt::Tensor w = mt::ones({2}, {.requires_grad = true});
  mt::Tensor y = w * 2;
  mt::Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_TRUE(shares_storage(d, y));
  EXPECT_EQ(d.version(), y.version());  // the version counter is shared too
  d.fill_(5);
  EXPECT_EQ(vals(y), (std::vector<float>{5, 5}));
  // clone keeps history, detach does not.
  EXPECT_TRUE(w.clone().requires_grad());
  EXPECT_FALSE(w.clone().is_leaf());
}

TEST(TensorView, ToDtype) {
  mt::Tensor x = mt::from_vector<float>({1.7f, -1.7f, 0.0f, 2.5f});
  EXPECT_TRUE(x.to(mt::kFloat).is_same(x));
  mt::Tensor i = x.to(mt::kInt64);
  EXPECT_EQ(i.dtype(), mt::kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, -1, 0, 2}));  // truncation toward zero
  EXPECT_EQ(x.to(mt::kBool).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  mt::Tensor d = x.to(mt::kDouble);
  EXPECT_EQ(d.dtype(), mt::kDouble);
  EXPECT_EQ(d.to_vector<double>()[0], double(1.7f));
  EXPECT_EQ(x.to(mt::kHalf).to_vector<float>(), (std::vector<float>{1.7001953125f, -1.7001953125f, 0.0f, 2.5f}));
  EXPECT_EQ(mt::from_vector<int64_t>({300, -1}).to(mt::kInt32).to_vector<int32_t>(), (std::vector<int32_t>{300, -1}));
  // A cast of a non-contiguous view follows the view's element order.
  EXPECT_EQ(grid().t().to(mt::kInt32).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  mt::Tensor c = x.to(mt::kDouble);
  c.fill_(0);  // a cast is a copy
  EXPECT_EQ(vals(x)[0], 1.7f);
}

// ---------------------------------------------------------------- factories

TEST(TensorFactory, FilledTensors) {
  mt::Tensor e = mt::empty({2, 3}, {.dtype = mt::kInt32});
  EXPECT_EQ(e.sizes(), (mt::Shape{2, 3}));
  EXPECT_EQ(e.dtype(), mt::kInt32);
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(mt::zeros({2, 2}).to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_EQ(mt::ones({3}, {.dtype = mt::kInt64}).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(mt::full({2}, 2.5, {.dtype = mt::kDouble}).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(mt::full({2}, 7, {.dtype = mt::kUInt8}).to_vector<uint8_t>(), (std::vector<uint8_t>{7, 7}));
  mt::Tensor s = mt::scalar_tensor(4.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<float>(), 4.0f);
  EXPECT_EQ(mt::zeros({0, 3}).numel(), 0);
  mt::Tensor like = mt::full_like(mt::zeros({2}, {.dtype = mt::kHalf}), 3);
  EXPECT_EQ(like.dtype(), mt::kHalf);
  EXPECT_EQ(like.to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_TRUE(mt::zeros({2}, {.requires_grad = true}).requires_grad());
}

TEST(TensorFactory, Arange) {
  mt::Tensor a = mt::arange(5);
  EXPECT_EQ(a.dtype(), mt::kInt64);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(mt::arange(1, 2.5, 0.5, {.dtype = mt::kFloat}).to_vector<float>(), (std::vector<float>{1, 1.5, 2}));
  EXPECT_EQ(mt::arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  // ceil((end - start) / step) elements, as in PyTorch.
  EXPECT_EQ(mt::arange(0, 0.3, 0.1, {.dtype = mt::kDouble}).numel(), 3);
  EXPECT_EQ(mt::arange(0, 1, 0.3, {.dtype = mt::kDouble}).numel(), 4);
  EXPECT_EQ(mt::arange(3, 3).numel(), 0);
}

TEST(TensorFactory, LinspaceHitsEndpointsExactly) {
  std::vector<float> v = mt::linspace(0, 1, 7).to_vector<float>();
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v.front(), 0.0f);
  EXPECT_EQ(v.back(), 1.0f);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(v[size_t(i)], i / 6.0, 1e-7);
  std::vector<double> d = mt::linspace(0.1, 0.7, 7, {.dtype = mt::kDouble}).to_vector<double>();
  EXPECT_EQ(d.front(), 0.1);
  EXPECT_EQ(d.back(), 0.7);
  EXPECT_EQ(mt::linspace(-1, 1, 5).to_vector<float>(), (std::vector<float>{-1, -0.5, 0, 0.5, 1}));
  EXPECT_EQ(mt::linspace(3, 9, 1).to_vector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(mt::linspace(3, 9, 0).numel(), 0);
  EXPECT_EQ(mt::linspace(10, 0, 3).to_vector<float>(), (std::vector<float>{10, 5, 0}));
}

TEST(TensorFactory, EyeFromVectorFromBlob) {
  EXPECT_EQ(mt::eye(3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(mt::eye(2, {.dtype = mt::kInt32}).dtype(), mt::kInt32);
  EXPECT_EQ(mt::eye(0).sizes(), (mt::Shape{0, 0}));
  EXPECT_EQ(mt::eye(3, {.dtype = mt::kBool}).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(mt::eye(2, {.dtype = mt::kBFloat16}).to_vector<float>(), (std::vector<float>{1, 0, 0, 1}));
  EXPECT_TRUE(mt::eye(2, {.requires_grad = true}).requires_grad());

  mt::Tensor f = mt::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(f.dtype(), mt::kDouble);
  EXPECT_EQ(f.sizes(), (mt::Shape{2, 3}));
  EXPECT_EQ(mt::from_vector<int32_t>({1, 2}).sizes(), (mt::Shape{2}));
  EXPECT_EQ(mt::from_vector<int32_t>({9}).reshape({}).dim(), 0);
  mt::Tensor conv = mt::from_vector<int64_t>({1, 2}, {}, {.dtype = mt::kFloat});
  EXPECT_EQ(conv.dtype(), mt::kFloat);
  EXPECT_EQ(mt::from_vector<bool>({true, false, true}).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_THROW(mt::from_vector<float>({1, 2, 3}, {2, 2}), mt::Error);

  int32_t raw[4] = {10, 20, 30, 40};
  mt::Tensor b = mt::from_blob(raw, {2, 2}, mt::kInt32);
  raw[0] = 99;  // from_blob copies
  EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{10, 20, 30, 40}));
  mt::Tensor bf = mt::from_blob(raw, {4}, mt::kInt32, {.dtype = mt::kDouble});
  EXPECT_EQ(bf.dtype(), mt::kDouble);
  EXPECT_EQ(bf.to_vector<double>(), (std::vector<double>{99, 20, 30, 40}));
}

TEST(TensorAccess, ItemAndToVector) {
  EXPECT_EQ(mt::from_vector<float>({2.9f}).item<int64_t>(), 2);
  EXPECT_EQ(mt::from_vector<float>({2.5f}, {1, 1}).item<double>(), 2.5);
  EXPECT_EQ(mt::scalar_tensor(7, {.dtype = mt::kInt64}).item<float>(), 7.0f);
  EXPECT_TRUE(mt::from_vector<bool>({true}).item<bool>());
  EXPECT_FALSE(mt::scalar_tensor(0.0).item<bool>());
  EXPECT_EQ(grid().select(1, 2).to_vector<int64_t>(), (std::vector<int64_t>{2, 6, 10}));
  EXPECT_EQ(grid().select(0, 2).select(0, 3).item<float>(), 11.0f);
  EXPECT_EQ(mt::from_vector<int64_t>({int64_t(1) << 60}).item<int64_t>(), int64_t(1) << 60);  // no double detour
  EXPECT_EQ(mt::from_vector<float>({1, 2}).expand({2, 2}).to_vector<float>(), (std::vector<float>{1, 2, 1, 2}));
}

// ---------------------------------------------------------------- random

TEST(TensorRandom, SameSeedSameNumbers) {
  auto draw = [](uint64_t seed) {
    mt::manual_seed(seed);
    std::vector<double> out;
    for (double v : mt::rand({50}).to_vector<double>()) out.push_back(v);
    for (double v : mt::randn({51}).to_vector<double>()) out.push_back(v);
    for (double v : mt::randint(0, 1000, {50}).to_vector<double>()) out.push_back(v);
    for (double v : mt::bernoulli({50}, 0.5).to_vector<double>()) out.push_back(v);
    for (double v : mt::randperm(50).to_vector<double>()) out.push_back(v);
    return out;
  };
  std::vector<double> a = draw(42), b = draw(42), c = draw(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Each factory on its own also differs between seeds.
  mt::manual_seed(1);
  std::vector<float> r1 = mt::rand({20}).to_vector<float>();
  mt::manual_seed(2);
  std::vector<float> r2 = mt::rand({20}).to_vector<float>();
  EXPECT_NE(r1, r2);
  mt::manual_seed(1);
  std::vector<int64_t> p1 = mt::randperm(20).to_vector<int64_t>();
  mt::manual_seed(2);
  std::vector<int64_t> p2 = mt::randperm(20).to_vector<int64_t>();
  EXPECT_NE(p1, p2);
  // Consecutive draws continue the stream rather than repeat it.
  mt::manual_seed(7);
  EXPECT_NE(mt::randn({10}).to_vector<float>(), mt::randn({10}).to_vector<float>());
}

TEST(TensorRandom, GeneratorStateRoundTrips) {
  mt::manual_seed(5);
  mt::randn({3});  // leaves a spare Box-Muller value
  std::string state = mt::default_generator().get_state();
  std::vector<float> a = mt::randn({7}).to_vector<float>();
  mt::default_generator().set_state(state);
  EXPECT_EQ(mt::randn({7}).to_vector<float>(), a);
  EXPECT_THROW(mt::default_generator().set_state("not a state"), mt::Error);
}

TEST(TensorRandom, RangesAndMoments) {
  mt::manual_seed(0);
  std::vector<double> u = mt::rand({10000}, {.dtype = mt::kDouble}).to_vector<double>();
  EXPECT_TRUE(std::all_of(u.begin(), u.end(), [](double v) { return v >= 0 && v < 1; }));
  EXPECT_NEAR(std::accumulate(u.begin(), u.end(), 0.0) / double(u.size()), 0.5, 0.02);
  std::vector<float> un = mt::uniform({1000}, -3, -2).to_vector<float>();
  EXPECT_TRUE(std::all_of(un.begin(), un.end(), [](float v) { return v >= -3 && v < -2; }));

  std::vector<double> n = mt::randn({100000}, {.dtype = mt::kDouble}).to_vector<double>();
  double mean = std::accumulate(n.begin(), n.end(), 0.0) / double(n.size());
  double sq = 0;
  for (double v : n) sq += (v - mean) * (v - mean);
  double sd = std::sqrt(sq / double(n.size() - 1));
  EXPECT_NEAR(mean, 0.0, 0.02);  // standard error 0.003
  EXPECT_NEAR(sd, 1.0, 0.02);
  std::vector<double> nm = mt::normal({20000}, 5, 0.5, {.dtype = mt::kDouble}).to_vector<double>();
  EXPECT_NEAR(std::accumulate(nm.begin(), nm.end(), 0.0) / double(nm.size()), 5.0, 0.02);

  mt::Tensor ri = mt::randint(3, 7, {2000});
  EXPECT_EQ(ri.dtype(), mt::kInt64);
  std::vector<int64_t> iv = ri.to_vector<int64_t>();
  std::set<int64_t> seen(iv.begin(), iv.end());
  EXPECT_EQ(seen, (std::set<int64_t>{3, 4, 5, 6}));
  EXPECT_EQ(mt::randint(-2, 0, {100}, {.dtype = mt::kInt32}).dtype(), mt::kInt32);

  std::vector<float> b = mt::bernoulli({100000}, 0.3).to_vector<float>();
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](float v) { return v == 0 || v == 1; }));
  EXPECT_NEAR(std::accumulate(b.begin(), b.end(), 0.0) / double(b.size()), 0.3, 0.01);
  EXPECT_EQ(mt::bernoulli({50}, 0.0).sum().item<float>(), 0);
  EXPECT_EQ(mt::bernoulli({50}, 1.0).sum().item<float>(), 50);
  // Per-element probabilities.
  std::vector<float> bp = mt::bernoulli(mt::from_vector<float>({0, 1, 0, 1})).to_vector<float>();
  EXPECT_EQ(bp, (std::vector<float>{0, 1, 0, 1}));

  std::vector<int64_t> perm = mt::randperm(100).to_vector<int64_t>();
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expect(100);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(sorted, expect);
  EXPECT_NE(perm, expect);
}

// ---------------------------------------------------------------- in-place ops

TEST(TensorInplace, ArithmeticWithBroadcastingAndVersions) {
  mt::Tensor x = mt::ones({2, 3});
  mt::Tensor row = mt::from_vector<float>({1, 2, 3});
  uint64_t v = x.version();
  x.add_(row);
  EXPECT_EQ(x.version(), v + 1);
  EXPECT_EQ(vals(x), (std::vector<float>{2, 3, 4, 2, 3, 4}));
  x.add_(row, 2);  // x += 2 * row
  EXPECT_EQ(x.version(), v + 2);
  EXPECT_EQ(vals(x), (std::vector<float>{4, 7, 10, 4, 7, 10}));
  x.sub_(mt::from_vector<float>({1, 2}, {2, 1}));
  EXPECT_EQ(x.version(), v + 3);
  EXPECT_EQ(vals(x), (std::vector<float>{3, 6, 9, 2, 5, 8}));
  x.mul_(2);
  EXPECT_EQ(x.version(), v + 4);
  EXPECT_EQ(vals(x), (std::vector<float>{6, 12, 18, 4, 10, 16}));
  x.div_(row);
  EXPECT_EQ(x.version(), v + 5);
  EXPECT_EQ(vals(x), (std::vector<float>{6, 6, 6, 4, 5, 16.0f / 3}));
  x.sub_(1);
  x.add_(0.5);
  x.div_(2);
  EXPECT_EQ(x.version(), v + 8);
  EXPECT_EQ(vals(x), (std::vector<float>{2.75, 2.75, 2.75, 1.75, 2.25, (16.0f / 3 - 0.5f) / 2}));
  x.mul_(mt::from_vector<float>({0, 1}, {2, 1}));
  EXPECT_EQ(x.version(), v + 9);
  EXPECT_EQ(vals(x.select(0, 0)), (std::vector<float>{0, 0, 0}));
  // The result must keep self's shape: self does not broadcast.
  EXPECT_THROW(row.add_(mt::ones({2, 3})), mt::Error);
}

TEST(TensorInplace, DtypeRules) {
  mt::Tensor i = mt::from_vector<int64_t>({5, 7});
  i.mul_(3);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{15, 21}));
  i.add_(mt::from_vector<int32_t>({1, 1}));
  EXPECT_EQ(i.dtype(), mt::kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{16, 22}));
  EXPECT_THROW(i.mul_(1.5), mt::Error);                               // float result cannot be stored in int64
  EXPECT_THROW(i.div_(2), mt::Error);                                 // true division is float
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{16, 22}));  // untouched by the failures

  mt::Tensor h = mt::ones({2}, {.dtype = mt::kHalf});
  h.add_(mt::from_vector<double>({0.5, 1e-4}));
  EXPECT_EQ(h.dtype(), mt::kHalf);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1.5f, 1.0f}));  // 1 + 1e-4 rounds to 1 in float16
  mt::Tensor f = mt::ones({2});
  f.mul_(mt::from_vector<int64_t>({2, 3}));
  EXPECT_EQ(vals(f), (std::vector<float>{2, 3}));
}

TEST(TensorInplace, ClampMaskedFillZeroFill) {
  mt::Tensor x = mt::from_vector<float>({-2, -0.5, 0.5, 2});
  uint64_t v = x.version();
  x.clamp_(-1, 1);
  EXPECT_EQ(x.version(), v + 1);
  EXPECT_EQ(vals(x), (std::vector<float>{-1, -0.5, 0.5, 1}));
  mt::Tensor xi = mt::from_vector<int32_t>({-5, 0, 5});
  xi.clamp_(-1, 3);
  EXPECT_EQ(xi.to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 3}));

  mt::Tensor m = mt::zeros({2, 3});
  mt::Tensor mask = mt::from_vector<bool>({true, false, true});
  v = m.version();
  m.masked_fill_(mask, 9);  // the mask broadcasts over rows
  EXPECT_EQ(m.version(), v + 1);
  EXPECT_EQ(vals(m), (std::vector<float>{9, 0, 9, 9, 0, 9}));
  EXPECT_THROW(m.masked_fill_(mt::from_vector<float>({1, 0, 1}), 1), mt::Error);  // mask must be bool

  v = m.version();
  m.fill_(2.5);
  EXPECT_EQ(m.version(), v + 1);
  EXPECT_EQ(vals(m), std::vector<float>(6, 2.5f));
  m.zero_();
  EXPECT_EQ(m.version(), v + 2);
  EXPECT_EQ(vals(m), std::vector<float>(6, 0.0f));
}

TEST(TensorInplace, CopyBroadcastsAndConverts) {
  mt::Tensor dst = mt::zeros({2, 3}, {.dtype = mt::kInt32});
  uint64_t v = dst.version();
  dst.copy_(mt::from_vector<double>({1.9, -2.9, 3.0}));
  EXPECT_EQ(dst.version(), v + 1);
  EXPECT_EQ(dst.dtype(), mt::kInt32);
  EXPECT_EQ(dst.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 1, -2, 3}));
  mt::Tensor f = mt::zeros({3, 2});
  f.copy_(grid().slice(1, 0, 2).to(mt::kHalf));
  EXPECT_EQ(vals(f), (std::vector<float>{0, 1, 4, 5, 8, 9}));
  EXPECT_THROW(f.copy_(mt::ones({4})), mt::Error);
  EXPECT_THROW(f.copy_(mt::ones({2, 3, 2})), mt::Error);  // would need to grow dst
  // Writing into a transposed view lands in the base tensor's transposed positions.
  mt::Tensor base = mt::zeros({2, 3});
  base.t().copy_(mt::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(vals(base), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

TEST(TensorInplace, ViewsShareTheVersionCounter) {
  mt::Tensor base = grid();
  mt::Tensor view = base.select(0, 0);
  uint64_t v = base.version();
  view.add_(1);
  EXPECT_EQ(base.version(), v + 1);
  EXPECT_EQ(view.version(), base.version());
  base.t().mul_(2);  // in-place arithmetic on a non-contiguous view
  EXPECT_EQ(view.version(), v + 2);
  EXPECT_EQ(vals(base), (std::vector<float>{2, 4, 6, 8, 8, 10, 12, 14, 16, 18, 20, 22}));
  base.slice(1, 0, 4, 2).add_(mt::from_vector<float>({100, 200}));
  EXPECT_EQ(vals(base.select(0, 0)), (std::vector<float>{102, 4, 206, 8}));
}

// ---------------------------------------------------------------- printing

TEST(TensorPrint, MatchesPyTorch) {
  EXPECT_EQ(str(mt::from_vector<float>({1, 2, 3, 4}, {2, 2})), "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(str(mt::from_vector<float>({1.5, 2.25})), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(str(mt::from_vector<float>({-1, 2})), "tensor([-1.,  2.])");
  EXPECT_EQ(str(mt::from_vector<float>({1, 2}).to(mt::kHalf)), "tensor([1., 2.], dtype=torch.float16)");
  EXPECT_EQ(str(mt::from_vector<float>({0.5}).to(mt::kBFloat16)), "tensor([0.5000], dtype=torch.bfloat16)");
  EXPECT_EQ(str(mt::from_vector<double>({1, 2})), "tensor([1., 2.], dtype=torch.float64)");
  EXPECT_EQ(str(mt::arange(3)), "tensor([0, 1, 2])");
  EXPECT_EQ(str(mt::from_vector<int32_t>({1, -20})), "tensor([  1, -20], dtype=torch.int32)");
  EXPECT_EQ(str(mt::from_vector<uint8_t>({7})), "tensor([7], dtype=torch.uint8)");
  EXPECT_EQ(str(mt::from_vector<bool>({true, false})), "tensor([ True, False])");
  EXPECT_EQ(str(mt::scalar_tensor(3.5)), "tensor(3.5000)");
  EXPECT_EQ(str(mt::scalar_tensor(3.0)), "tensor(3.)");
  EXPECT_EQ(str(mt::scalar_tensor(7, {.dtype = mt::kInt64})), "tensor(7)");
  EXPECT_EQ(str(mt::zeros({0})), "tensor([])");
  EXPECT_EQ(str(mt::from_vector<float>({1, 2}, {}, {.requires_grad = true})), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ(str(mt::arange(0, 8, 1, {.dtype = mt::kFloat}).reshape({2, 2, 2})),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  EXPECT_EQ(str(mt::Tensor()), "tensor(undefined)");
}

TEST(TensorPrint, ScientificAndNonFinite) {
  EXPECT_EQ(str(mt::from_vector<float>({1e-5f, 1})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(str(mt::from_vector<float>({0.5, 1000})), "tensor([5.0000e-01, 1.0000e+03])");
  // Integer-valued floats also switch to scientific when they span over 1000x.
  EXPECT_EQ(str(mt::from_vector<float>({1, 2000})), "tensor([1.0000e+00, 2.0000e+03])");
  EXPECT_EQ(str(mt::from_vector<float>({1, 1000})), "tensor([   1., 1000.])");
  EXPECT_EQ(str(mt::from_vector<float>({1e8f})), "tensor([100000000.])");  // sci only above 1e8
  EXPECT_EQ(str(mt::from_vector<float>({1e9f})), "tensor([1.0000e+09])");
  // nan and inf do not widen the column.
  EXPECT_EQ(str(mt::from_vector<float>({1, NAN})), "tensor([1., nan])");
  EXPECT_EQ(str(mt::from_vector<float>({1.5, -INFINITY})), "tensor([1.5000,   -inf])");
  EXPECT_EQ(str(mt::from_vector<int64_t>({int64_t(1) << 60, 1})), "tensor([1152921504606846976,                   1])");
}

// A sum over the leading dims of a contiguous tensor (bias gradients) reads the columns in
// place on the CPU; it must match the sum of the transposed copy, which reduces rows. Sizes
// cross the kernel's 256-column and 256-row blocks; a permuted input takes the copying path.
TEST(Reduce, SumOverLeadingDimsMatchesRowSums) {
  mt::manual_seed(11);
  for (mt::DType t : {mt::kFloat64, mt::kFloat32, mt::kBFloat16}) {
    const mt::Tensor x = mt::randn({3, 300, 260}).to(t);
    const mt::Tensor want = x.permute({2, 0, 1}).contiguous().sum({1, 2}).to(mt::kFloat64);
    // Both sides sum 900 values in different orders: fp32 rounding of sums near 30 differs by
    // ~1e-4 between compilers' vectorizations (clang: 1.07e-4); bf16 output rounding near 30.
    const double tol = t == mt::kBFloat16 ? 0.25 : t == mt::kFloat32 ? 1e-3 : 1e-9;
    const mt::Tensor got = x.sum({0, 1}).to(mt::kFloat64);
    ASSERT_EQ(got.sizes(), (mt::Shape{260}));
    EXPECT_LT((got - want).abs().max().item<double>(), tol) << mt::dtype_name(t);
    const mt::Tensor got_keep = x.sum({0}, true).to(mt::kFloat64);
    const mt::Tensor want_keep = x.permute({1, 2, 0}).contiguous().sum({2}).unsqueeze(0).to(mt::kFloat64);
    EXPECT_LT((got_keep - want_keep).abs().max().item<double>(), tol) << mt::dtype_name(t);
    const mt::Tensor xt = x.transpose(1, 2);  // kept dims no longer unit stride: the row path
    EXPECT_LT((xt.sum({0, 2}).to(mt::kFloat64) - want).abs().max().item<double>(), tol) << mt::dtype_name(t);
  }
  // Exact on integers-valued floats, in any order of summation.
  const mt::Tensor ones = mt::ones({1000, 7});
  EXPECT_EQ(ones.sum({0}).to_vector<float>(), std::vector<float>(7, 1000.0f));
}

namespace {

// x.permute(perm).contiguous() against the index arithmetic of the permutation, element by
// element (values exact in every dtype: integers below 251).
void expect_permuting_copy_moves_every_element(mt::DType dt, const mt::Shape& shape, const mt::Shape& perm) {
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i % 251);
  const mt::Tensor x = mt::from_vector(v, shape, {.dtype = mt::kFloat64}).to(dt);
  const mt::Tensor y = x.permute(perm).contiguous();
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  mt::Shape xs(shape.size(), 1);  // x's row-major strides
  for (int64_t d = int64_t(xs.size()) - 2; d >= 0; --d) xs[size_t(d)] = xs[size_t(d) + 1] * shape[size_t(d) + 1];
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, at = 0;
    for (int64_t d = int64_t(perm.size()) - 1; d >= 0; --d) {  // y's index, d-th dim is x's perm[d]
      const int64_t size = shape[size_t(perm[size_t(d)])];
      at += (rem % size) * xs[size_t(perm[size_t(d)])];
      rem /= size;
    }
    wrong += yv[size_t(i)] != xv[size_t(at)];
  }
  EXPECT_EQ(wrong, 0) << mt::dtype_name(dt) << " " << x.shape_str();
}

}  // namespace

// Copies that move the last dim (transposes made contiguous) go through 8 x 8, 16 x 16 and, for
// 2- and 4-byte elements on AVX-512, 64 x 64 blocks with partial edges, written directly or
// (destination rows 1-4 KiB apart, or an odd number of 2-byte elements) through a buffer:
// every element checked, for block-multiple and ragged shapes.
TEST(TensorCopy, PermutingCopiesMoveEveryElement) {
  struct Case {
    mt::Shape shape, perm;
  };
  const std::vector<Case> cases = {{{130, 200}, {1, 0}},           {{64, 64}, {1, 0}},      {{2, 128, 192}, {0, 2, 1}},
                                   {{3, 70, 129}, {0, 2, 1}},      {{5, 9, 17}, {2, 1, 0}}, {{65, 3, 64}, {2, 1, 0}},
                                   {{2, 64, 3, 64}, {0, 3, 2, 1}}, {{256, 130}, {1, 0}},    {{1024, 96}, {1, 0}}};
  for (mt::DType dt : {mt::kFloat32, mt::kInt32, mt::kBFloat16, mt::kFloat64, mt::kInt64})
    for (const Case& c : cases) expect_permuting_copy_moves_every_element(dt, c.shape, c.perm);
}

// Outputs of 8 MiB and more leave the 64 x 64 blocks by streaming stores where the destination
// rows are 64-byte aligned, by plain copies where not: both, with ragged edges and an outer dim.
TEST(TensorCopy, LargePermutingCopiesMoveEveryElement) {
  expect_permuting_copy_moves_every_element(mt::kFloat32, {2048, 1100}, {1, 0});         // rows 8 KiB apart
  expect_permuting_copy_moves_every_element(mt::kInt32, {2100, 1000}, {1, 0});           // rows 4000 B apart
  expect_permuting_copy_moves_every_element(mt::kBFloat16, {2, 1024, 2112}, {0, 2, 1});  // 2 KiB, two outer
  expect_permuting_copy_moves_every_element(mt::kBFloat16, {4100, 1030}, {1, 0});        // 8200 B: unaligned
}

// Copies whose destination rows are short (2-7 elements) and strided in the source while the
// source runs contiguously along another dim go row by row along that dim instead: pixel
// shuffle's permute by 2 and 3, NCHW -> NHWC of 3 channels, a last dim of 7, a contiguous run
// shorter than 8 (left to the element loop), every element size.
TEST(TensorCopy, CopiesAlongTheSourceRowsMoveEveryElement) {
  struct Case {
    mt::Shape shape, perm;
  };
  const std::vector<Case> cases = {{{2, 3, 2, 2, 5, 9}, {0, 1, 4, 2, 5, 3}},   // pixel shuffle by 2
                                   {{1, 2, 3, 3, 4, 11}, {0, 1, 4, 2, 5, 3}},  // by 3
                                   {{2, 3, 6, 17}, {0, 2, 3, 1}},              // NCHW -> NHWC, C = 3
                                   {{7, 40}, {1, 0}},                          // a last dim of 7
                                   {{5, 3, 6}, {0, 2, 1}}};                    // runs of 6: element loop
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kUInt8, mt::kFloat64, mt::kInt64})
    for (const Case& c : cases) expect_permuting_copy_moves_every_element(dt, c.shape, c.perm);
}

// Three channels between planar and interleaved layouts (NCHW <-> NHWC of an RGB batch) go by
// vector permutes on AVX-512 for 2- and 4-byte elements: pixel counts around the vector widths
// (16 and 32 lanes) and their tails, one image and several, a planar side whose channel stride is
// not the pixel count, every element size (the others keep the general loops).
TEST(TensorCopy, ThreeChannelCopiesMoveEveryElement) {
  struct Case {
    mt::Shape shape, perm;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 4}, {0, 2, 3, 1}}, {{3, 3, 1, 17}, {0, 2, 3, 1}},  {{2, 3, 5, 19}, {0, 2, 3, 1}},
      {{1, 3, 8, 8}, {0, 2, 3, 1}}, {{2, 3, 33, 33}, {0, 2, 3, 1}}, {{3, 70, 90}, {1, 2, 0}},  // NCHW -> NHWC
      {{2, 4, 4, 3}, {0, 3, 1, 2}}, {{3, 1, 17, 3}, {0, 3, 1, 2}},  {{2, 5, 19, 3}, {0, 3, 1, 2}},
      {{1, 8, 8, 3}, {0, 3, 1, 2}}, {{2, 33, 33, 3}, {0, 3, 1, 2}}, {{70, 90, 3}, {2, 0, 1}},  // NHWC -> NCHW
      {{17, 3, 40}, {2, 0, 1}},     {{40, 3, 17}, {1, 2, 0}}};  // channels outside the images
  for (mt::DType dt : {mt::kFloat32, mt::kInt32, mt::kBFloat16, mt::kFloat16, mt::kUInt8, mt::kFloat64})
    for (const Case& c : cases) expect_permuting_copy_moves_every_element(dt, c.shape, c.perm);
  // A channel stride that is not the pixel count: the planar side a narrowed view.
  const mt::Tensor wide = mt::arange(400, {.dtype = mt::kFloat32}).reshape({2, 5, 40});
  const mt::Tensor planar = wide.narrow(1, 1, 3).narrow(2, 3, 35);  // [2, 3, 35], channel stride 40
  const mt::Tensor nhwc = planar.permute({0, 2, 1}).contiguous(), back = nhwc.permute({0, 2, 1}).contiguous();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t j = 0; j < 35; ++j)
      for (int64_t c = 0; c < 3; ++c) {
        const double want = double(n * 200 + (c + 1) * 40 + j + 3);
        EXPECT_EQ(nhwc[n][j][c].item<double>(), want);
        EXPECT_EQ(back[n][c][j].item<double>(), want);
      }
}

// Copies that keep the last dim but move rows of at most 256 bytes (attention's head split
// [B, T, H, E] -> [B, H, T, E]) go row by row along one dim with masked tails; outputs of
// 8 MiB and more whose rows are whole 64-byte lines by streaming stores in the source's order.
TEST(TensorCopy, ShortRowCopiesMoveEveryElement) {
  struct Case {
    mt::Shape shape, perm;
  };
  const std::vector<Case> cases = {{{2, 16, 8, 32}, {0, 2, 1, 3}},  // 64 / 128-byte rows
                                   {{3, 7, 5, 3}, {0, 2, 1, 3}},    // 3-24 bytes: a masked tail only
                                   {{4, 5, 70}, {1, 0, 2}},         // 70 elements: over and under 256 bytes
                                   {{3, 4, 5, 33}, {2, 0, 1, 3}},   // full lines and a tail, outer dims reordered
                                   {{6, 1, 9, 2}, {2, 1, 0, 3}}};   // a size-1 dim
  for (mt::DType dt : {mt::kFloat32, mt::kBFloat16, mt::kUInt8, mt::kFloat64, mt::kInt64})
    for (const Case& c : cases) expect_permuting_copy_moves_every_element(dt, c.shape, c.perm);
  // 8 MiB outputs: streamed (128- and 64-byte rows; three outer dims put in the source's order),
  // and one whose 48-byte rows are not whole lines (plain stores).
  expect_permuting_copy_moves_every_element(mt::kFloat32, {16, 512, 8, 32}, {0, 2, 1, 3});
  expect_permuting_copy_moves_every_element(mt::kBFloat16, {16, 64, 128, 32}, {2, 0, 1, 3});
  expect_permuting_copy_moves_every_element(mt::kBFloat16, {16, 1024, 11, 24}, {0, 2, 1, 3});
}
