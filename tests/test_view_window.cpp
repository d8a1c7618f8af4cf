// The gradient of a tensor used through select / slice views (narrow, split, chunk): the engine
// writes each view's gradient into its window of one gradient of the whole tensor
// (autograd/view_window.h). Values against the same sums written out, the layout of the whole
// gradient, what hooks see, double backward, and that tiling views need no zero tensor.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <vector>

namespace mt = mantissa;

namespace {

mt::Tensor leaf(const mt::Shape& shape, mt::DType dtype = mt::kDouble) {
  mt::Tensor x = mt::randn(shape, {.dtype = dtype});
  x.requires_grad_();
  return x;
}

void expect_same(const mt::Tensor& got, const mt::Tensor& want) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.to(mt::kDouble).to_vector<double>(), want.to(mt::kDouble).to_vector<double>());
}

// Calls of `op` while fn runs.
template <typename Fn>
int64_t calls_of(const char* op, Fn&& fn) {
  mt::profiler::Profile prof;
  fn();
  prof.stop();
  int64_t n = 0;
  for (const auto& s : prof.op_stats())
    if (s.name == op) n += s.calls;
  return n;
}

}  // namespace

// Attention's split of a fused projection: [N, T, 3, H, E] permuted to [3, N, H, T, E], one
// select per q, k, v. The permuted tensor's gradient is laid out like it, so it permutes back
// to a contiguous gradient of the projection.
TEST(ViewWindow, SelectsOfAPermutedTensorGatherIntoItsLayout) {
  for (mt::DType dtype : {mt::kDouble, mt::kBFloat16}) {
    mt::Tensor base = leaf({2, 5, 3, 4, 6}, dtype);
    mt::Tensor x = (base * 1.0).permute({2, 0, 3, 1, 4});
    x.retain_grad();
    mt::Tensor seen;
    x.register_hook([&](const mt::Tensor& g) {
      seen = g;
      return mt::Tensor();
    });
    std::vector<mt::Tensor> w;
    mt::Tensor loss = mt::zeros({}, {.dtype = dtype});
    for (int64_t i = 0; i < 3; ++i) {
      w.push_back(mt::randn({2, 4, 5, 6}, {.dtype = dtype}));
      loss = loss + (x.select(0, i) * w.back()).sum();
    }
    loss.backward();
    mt::Tensor want = mt::stack(w, 0);  // d loss / d x
    expect_same(x.grad(), want);
    expect_same(seen, want);
    EXPECT_EQ(seen.strides(), x.strides()) << "laid out like the permuted tensor";
    EXPECT_TRUE(seen.permute({1, 3, 0, 2, 4}).is_contiguous());
    expect_same(base.grad(), want.permute({1, 3, 0, 2, 4}));
  }
}

// chunk tiles its dim: the windows are copied into one uninitialised tensor (no fill, no add).
TEST(ViewWindow, TilingViewsNeedNoZeroTensor) {
  mt::Tensor x = leaf({6, 4});
  mt::Tensor w = mt::randn({6, 4}, {.dtype = mt::kDouble});
  auto parts = mt::chunk(x, 3, 0);
  auto ws = mt::chunk(w, 3, 0);
  mt::Tensor loss = (parts[0] * ws[0]).sum() + (parts[1] * ws[1]).sum() + (parts[2] * ws[2]).sum();
  mt::Tensor seed = mt::ones({}, {.dtype = mt::kDouble});  // made here: ones_like is a fill
  EXPECT_EQ(calls_of("fill", [&] { loss.backward(seed); }), 0);
  expect_same(x.grad(), w);

  // One window of three: the rest of the gradient is zeros.
  mt::Tensor y = leaf({3, 4});
  mt::Tensor v = mt::randn({4}, {.dtype = mt::kDouble});
  mt::Tensor partial = (y.select(0, 1) * v).sum();
  EXPECT_EQ(calls_of("fill", [&] { partial.backward(seed); }), 1);
  expect_same(y.grad(), mt::stack({mt::zeros({4}, {.dtype = mt::kDouble}), v, mt::zeros({4}, {.dtype = mt::kDouble})}));
}

// Overlapping, stepped and empty windows, and a window of a window.
TEST(ViewWindow, OverlappingSteppedAndEmptyWindowsSum) {
  mt::Tensor x = leaf({6, 3});
  mt::Tensor wa = mt::randn({3, 3}, {.dtype = mt::kDouble}), wb = mt::randn({3, 3}, {.dtype = mt::kDouble});
  mt::Tensor we = mt::randn({3, 3}, {.dtype = mt::kDouble}), wo = mt::randn({3, 3}, {.dtype = mt::kDouble});
  mt::Tensor wn = mt::randn({}, {.dtype = mt::kDouble});
  mt::Tensor loss = (x.slice(0, 0, 3) * wa).sum() + (x.slice(0, 2, 5) * wb).sum() + (x.slice(0, 0, 6, 2) * we).sum() +
                    (x.slice(0, 1, 6, 2) * wo).sum() + x.slice(0, 4, 4).sum() + x.select(0, 5).select(0, 2) * wn;
  loss.backward();
  // The same sums (three terms meet in row 2: equal up to the order of the additions).
  mt::Tensor want = mt::zeros({6, 3}, {.dtype = mt::kDouble});
  {
    mt::NoGradGuard ng;
    want.select(0, 5).select(0, 2).add_(wn);
    want.slice(0, 1, 6, 2).add_(wo);
    want.slice(0, 0, 6, 2).add_(we);
    want.slice(0, 2, 5).add_(wb);
    want.slice(0, 0, 3).add_(wa);
  }
  const std::vector<double> got = x.grad().to_vector<double>(), expected = want.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << "element " << i;
}

// A whole-tensor gradient meets windowed ones: both are summed.
TEST(ViewWindow, WholeGradientAndWindowsSum) {
  mt::Tensor x = leaf({4, 5});
  mt::Tensor w = mt::randn({5}, {.dtype = mt::kDouble}), v = mt::randn({4, 5}, {.dtype = mt::kDouble});
  mt::Tensor loss = (x.select(0, 1) * w).sum() + (x * v).sum() + (x.select(0, 3) * w).sum();
  loss.backward();
  mt::Tensor want = v.clone();
  {
    mt::NoGradGuard ng;
    want.select(0, 1).add_(w);
    want.select(0, 3).add_(w);
  }
  expect_same(x.grad(), want);
}

// Rotary embeddings' q: used whole (q * cos) and through its two halves. The halves' gradients
// are added to the whole gradient in their windows in one pass, no zero tensor; a whole
// gradient that arrives narrow (a cast's) is widened first, and one of another dtype is summed.
TEST(ViewWindow, WholeGradientAndTilingWindowsInOnePass) {
  mt::Tensor x = leaf({4, 6});
  mt::Tensor v = mt::randn({4, 6}, {.dtype = mt::kDouble}), w = mt::randn({4, 6}, {.dtype = mt::kDouble});
  auto halves = mt::chunk(x, 2, 1);
  auto ws = mt::chunk(w, 2, 1);
  mt::Tensor loss = (x * v).sum() + (halves[1] * ws[1]).sum() + (halves[0] * ws[0]).sum();
  mt::Tensor seed = mt::ones({}, {.dtype = mt::kDouble});
  EXPECT_EQ(calls_of("fill", [&] { loss.backward(seed); }), 0);
  mt::Tensor want = v + w;
  expect_same(x.grad(), want);

  for (mt::DType whole_dtype : {mt::kBFloat16, mt::kFloat32}) {
    mt::Tensor y = leaf({4, 6}, mt::kFloat32);
    mt::Tensor vb = mt::randn({4, 6}, {.dtype = whole_dtype});
    mt::Tensor w32 = w.to(mt::kFloat32);
    auto parts = mt::chunk(y, 2, 1);
    auto w32s = mt::chunk(w32, 2, 1);
    mt::Tensor whole_term = whole_dtype == mt::kFloat32 ? (y * vb).sum() : (y.to(whole_dtype) * vb).sum();
    ((parts[0] * w32s[0]).sum() + whole_term.to(mt::kFloat32) + (parts[1] * w32s[1]).sum()).backward();
    expect_same(y.grad(), vb.to(mt::kFloat32) + w32);
  }
}

// With create_graph the windows are scattered as differentiable ops: second derivatives hold.
TEST(ViewWindow, DoubleBackwardThroughWindows) {
  mt::Tensor x = leaf({3, 4});
  std::string why;
  auto fn = [](const std::vector<mt::Tensor>& in) {
    auto parts = mt::chunk(in[0], 3, 0);
    return (parts[0] * parts[1] * parts[2]).sum() + in[0].slice(1, 1, 4, 2).pow(3).sum();
  };
  EXPECT_TRUE(mt::autograd::gradcheck(fn, {x}, {}, &why)) << why;
  EXPECT_TRUE(mt::autograd::gradgradcheck(fn, {x}, {}, &why)) << why;
}

// Edges: an empty tensor's views, uneven chunks, one window used twice, and views of a tensor
// that is itself a strided (not dense) view, whose gradient is then laid out contiguously.
TEST(ViewWindow, EmptyUnevenRepeatedAndStridedInputs) {
  mt::Tensor empty = leaf({0, 3});
  (empty.slice(0, 0, 0).sum() + empty.narrow(1, 1, 2).sum()).backward();
  ASSERT_TRUE(empty.grad().defined());
  EXPECT_EQ(empty.grad().sizes(), (mt::Shape{0, 3}));

  mt::Tensor x = leaf({7, 2});
  auto parts = mt::chunk(x, 3, 0);  // rows 3, 3, 1
  ASSERT_EQ(parts.size(), 3u);
  mt::Tensor w = mt::randn({7, 2}, {.dtype = mt::kDouble});
  auto ws = mt::chunk(w, 3, 0);
  mt::Tensor loss = (parts[2] * ws[2]).sum() + (parts[0] * ws[0]).sum() + (parts[1] * ws[1]).sum();
  loss = loss + (x.select(0, 6) * ws[2].select(0, 0)).sum();  // row 6 twice
  loss.backward();
  mt::Tensor want = w.clone();
  {
    mt::NoGradGuard ng;
    want.select(0, 6).add_(ws[2].select(0, 0));
  }
  expect_same(x.grad(), want);

  mt::Tensor base = leaf({4, 6});
  mt::Tensor strided = base.slice(1, 0, 6, 2);  // [4, 3], every other column: not dense
  mt::Tensor seen;
  strided.register_hook([&](const mt::Tensor& g) {
    seen = g;
    return mt::Tensor();
  });
  mt::Tensor u = mt::randn({3}, {.dtype = mt::kDouble});
  (strided.select(0, 1) * u).sum().backward();
  ASSERT_TRUE(seen.defined());
  EXPECT_TRUE(seen.is_contiguous()) << "a strided input's gradient is laid out contiguously";
  mt::Tensor want_base = mt::zeros({4, 6}, {.dtype = mt::kDouble});
  {
    mt::NoGradGuard ng;
    want_base.select(0, 1).slice(0, 0, 6, 2).copy_(u);
  }
  expect_same(base.grad(), want_base);
}
