// float64 gradcheck (and gradgradcheck, for the ops with a differentiable
// create_graph backward) of every differentiable op in nn::functional.
#include <gtest/gtest.h>
#include <mantissa.h>

namespace mt = mantissa;
namespace F = mt::nn::functional;
using mt::autograd::gradcheck;
using mt::autograd::gradgradcheck;
using Inputs = std::vector<mt::Tensor>;

namespace {

mt::Tensor randn(const mt::Shape& s, bool grad = true) {
  return mt::randn(s, {.dtype = mt::kFloat64, .requires_grad = grad});
}

#define EXPECT_GRADCHECK(fn, inputs)                     \
  do {                                                   \
    std::string why;                                     \
    EXPECT_TRUE(gradcheck(fn, inputs, {}, &why)) << why; \
  } while (0)

#define EXPECT_GRADGRADCHECK(fn, inputs)                     \
  do {                                                       \
    std::string why;                                         \
    EXPECT_TRUE(gradgradcheck(fn, inputs, {}, &why)) << why; \
  } while (0)

}  // namespace

TEST(NnGradcheck, Linear) {
  mt::manual_seed(1);
  auto fn = [](const Inputs& in) { return F::linear(in[0], in[1], in[2]); };
  Inputs in{randn({2, 3, 4}), randn({5, 4}), randn({5})};
  EXPECT_GRADCHECK(fn, in);
  EXPECT_GRADGRADCHECK(fn, in);
}

TEST(NnGradcheck, Conv2d) {
  mt::manual_seed(2);
  struct Case {
    mt::Shape x, w;
    F::Conv2dFuncOptions o;
  };
  for (const Case& c :
       {Case{{2, 2, 5, 5}, {3, 2, 3, 3}, {.padding = 1}},
        Case{{1, 2, 7, 6}, {2, 2, 3, 2}, {.stride = {2, 1}, .padding = {0, 1}}},
        Case{{1, 2, 7, 7}, {2, 2, 3, 3}, {.padding = 2, .dilation = 2}},
        Case{{2, 4, 4, 4}, {4, 2, 2, 2}, {.stride = 2, .groups = 2}}, Case{{1, 3, 3, 3}, {2, 3, 1, 1}, {}},
        Case{{2, 3, 6, 5}, {3, 1, 5, 3}, {.padding = {2, 1}, .dilation = {1, 2}, .groups = 3}}}) {
    auto fn = [&](const Inputs& in) { return F::conv2d(in[0], in[1], in[2], c.o); };
    Inputs in{randn(c.x), randn(c.w), randn({c.w[0]})};
    EXPECT_GRADCHECK(fn, in);
  }
  auto fn = [](const Inputs& in) { return F::conv2d(in[0], in[1], in[2], {.stride = 2, .padding = 1, .groups = 2}); };
  EXPECT_GRADGRADCHECK(fn, (Inputs{randn({1, 2, 4, 4}), randn({2, 1, 3, 3}), randn({2})}));
}

TEST(NnGradcheck, UnfoldFold) {
  mt::manual_seed(3);
  auto u = [](const Inputs& in) {
    return F::unfold(in[0], {2, 3}, {.dilation = {1, 2}, .padding = 1, .stride = {2, 1}});
  };
  EXPECT_GRADCHECK(u, (Inputs{randn({2, 2, 4, 5})}));
  EXPECT_GRADGRADCHECK(u, (Inputs{randn({1, 1, 3, 4})}));
  auto f = [](const Inputs& in) { return F::fold(in[0], {4, 5}, 2, {.padding = 1}); };
  EXPECT_GRADCHECK(f, (Inputs{randn({1, 8, 30})}));
}

TEST(NnGradcheck, Pools) {
  mt::manual_seed(4);
  auto mp = [](const Inputs& in) { return F::max_pool2d(in[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true}); };
  EXPECT_GRADCHECK(mp, (Inputs{randn({2, 2, 5, 5})}));
  EXPECT_GRADGRADCHECK(mp, (Inputs{randn({1, 1, 4, 4})}));
  auto mpd = [](const Inputs& in) { return F::max_pool2d(in[0], 2, {.stride = 1, .dilation = 2}); };
  EXPECT_GRADCHECK(mpd, (Inputs{randn({1, 2, 5, 5})}));
  auto ap = [](const Inputs& in) {
    return F::avg_pool2d(in[0], 3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false});
  };
  EXPECT_GRADCHECK(ap, (Inputs{randn({2, 2, 6, 5})}));
  EXPECT_GRADGRADCHECK(ap, (Inputs{randn({1, 1, 4, 4})}));
  auto apd = [](const Inputs& in) { return F::avg_pool2d(in[0], {2, 3}, {.divisor_override = 4}); };
  EXPECT_GRADCHECK(apd, (Inputs{randn({1, 2, 4, 6})}));
  auto aap = [](const Inputs& in) { return F::adaptive_avg_pool2d(in[0], {3, 2}); };
  EXPECT_GRADCHECK(aap, (Inputs{randn({2, 2, 5, 7})}));
  EXPECT_GRADGRADCHECK(aap, (Inputs{randn({1, 1, 4, 3})}));
}

TEST(NnGradcheck, Interpolate) {
  mt::manual_seed(21);
  struct C {
    mt::Shape shape;
    F::InterpolateOptions o;
  };
  const std::vector<C> cases = {
      {{2, 2, 5}, {.size = {9}}},
      {{1, 2, 7}, {.scale_factor = {0.6}}},
      {{1, 2, 3, 4}, {.scale_factor = {1.7}}},
      {{1, 2, 3, 4}, {.size = {7, 5}, .mode = "nearest"}},
      {{2, 2, 5}, {.size = {8}, .mode = "linear"}},
      {{1, 2, 6}, {.scale_factor = {1.7}, .mode = "linear", .align_corners = true}},
      {{1, 2, 3, 4}, {.size = {5, 7}, .mode = "bilinear", .align_corners = false}},
      {{1, 2, 3, 4}, {.size = {5, 7}, .mode = "bilinear", .align_corners = true}},
      {{1, 1, 6, 5}, {.size = {4, 2}, .mode = "bilinear"}},
      {{1, 1, 3, 5}, {.scale_factor = {1.3, 2.5}, .mode = "bilinear"}},
  };
  for (const C& c : cases) {
    SCOPED_TRACE(c.o.mode + " " + std::to_string(c.shape.size()) + "-D");
    auto fn = [&](const Inputs& in) { return F::interpolate(in[0], c.o); };
    EXPECT_GRADCHECK(fn, (Inputs{randn(c.shape)}));
    EXPECT_GRADGRADCHECK(fn, (Inputs{randn(c.shape)}));
  }
}

TEST(NnGradcheck, BatchNorm) {
  mt::manual_seed(5);
  for (bool training : {true, false}) {
    mt::Tensor rm = mt::randn({3}, {.dtype = mt::kFloat64});
    mt::Tensor rv = mt::rand({3}, {.dtype = mt::kFloat64}) + 0.5;
    auto fn = [&](const Inputs& in) {
      // Fresh running statistics per call: the update must not change the function.
      mt::Tensor m = rm.clone(), v = rv.clone();
      return F::batch_norm(in[0], m, v, in[1], in[2], training, 0.1, 1e-5);
    };
    Inputs in{randn({4, 3, 2, 2}), randn({3}), randn({3})};
    EXPECT_GRADCHECK(fn, in);
    EXPECT_GRADGRADCHECK(fn, (Inputs{randn({3, 3, 2}), randn({3}), randn({3})}));
  }
  auto noaffine = [](const Inputs& in) { return F::batch_norm(in[0], {}, {}, {}, {}, true); };
  EXPECT_GRADCHECK(noaffine, (Inputs{randn({5, 2})}));
}

TEST(NnGradcheck, LayerNorm) {
  mt::manual_seed(6);
  auto fn = [](const Inputs& in) { return F::layer_norm(in[0], {3, 4}, in[1], in[2]); };
  EXPECT_GRADCHECK(fn, (Inputs{randn({2, 3, 4}), randn({3, 4}), randn({3, 4})}));
  EXPECT_GRADGRADCHECK(fn, (Inputs{randn({2, 3, 4}), randn({3, 4}), randn({3, 4})}));
  auto plain = [](const Inputs& in) { return F::layer_norm(in[0], {5}); };
  EXPECT_GRADCHECK(plain, (Inputs{randn({3, 5})}));
}

TEST(NnGradcheck, EmbeddingAndDropout) {
  mt::manual_seed(7);
  mt::Tensor idx = mt::from_vector<int64_t>({0, 2, 2, 4, 1, 0}, {2, 3}, {.dtype = mt::kInt64});
  // padding_idx 3 is not looked up: its (zero) gradient row is exact. A looked-up padding row
  // gets no gradient by design (as PyTorch), which is not the derivative gradcheck expects.
  auto emb = [&](const Inputs& in) { return F::embedding(idx, in[0], 3); };
  EXPECT_GRADCHECK(emb, (Inputs{randn({5, 3})}));
  EXPECT_GRADGRADCHECK(emb, (Inputs{randn({5, 3})}));
  auto drop = [](const Inputs& in) {
    mt::manual_seed(99);  // the same mask on every evaluation
    return F::dropout(in[0], 0.3, true);
  };
  EXPECT_GRADCHECK(drop, (Inputs{randn({4, 5})}));
  EXPECT_GRADGRADCHECK(drop, (Inputs{randn({4, 5})}));  // the backward redraws the mask: itself differentiable
}

TEST(NnGradcheck, Losses) {
  mt::manual_seed(8);
  mt::Tensor target = mt::from_vector<int64_t>({1, 0, 3, -100, 2}, {5}, {.dtype = mt::kInt64});
  mt::Tensor w = mt::rand({4}, {.dtype = mt::kFloat64}) + 0.5;
  for (auto red : {mt::nn::Reduction::Mean, mt::nn::Reduction::Sum, mt::nn::Reduction::None}) {
    auto ce = [&](const Inputs& in) {
      return F::cross_entropy(in[0], target, {.weight = w, .reduction = red, .label_smoothing = 0.15});
    };
    EXPECT_GRADCHECK(ce, (Inputs{randn({5, 4})}));
    auto nll = [&](const Inputs& in) { return F::nll_loss(in[0], target, {.weight = w, .reduction = red}); };
    EXPECT_GRADCHECK(nll, (Inputs{randn({5, 4})}));
    auto mse = [&](const Inputs& in) { return F::mse_loss(in[0], in[1], red); };
    EXPECT_GRADCHECK(mse, (Inputs{randn({3, 4}), randn({3, 4})}));
    auto bce = [&](const Inputs& in) {
      return F::binary_cross_entropy_with_logits(in[0], in[1],
                                                 {.weight = in[2], .pos_weight = in[3], .reduction = red});
    };
    EXPECT_GRADCHECK(bce, (Inputs{randn({3, 4}), mt::rand({3, 4}, {.dtype = mt::kFloat64, .requires_grad = true}),
                                  randn({4}), mt::rand({4}, {.dtype = mt::kFloat64, .requires_grad = true})}));
  }
  mt::Tensor kt = mt::from_vector<int64_t>({0, 2, 1, 1, 0, 2}, {2, 3}, {.dtype = mt::kInt64});
  auto ce_k = [&](const Inputs& in) { return F::cross_entropy(in[0], kt, {.label_smoothing = 0.1}); };
  EXPECT_GRADCHECK(ce_k, (Inputs{randn({2, 3, 3})}));
  EXPECT_GRADGRADCHECK(ce_k, (Inputs{randn({2, 3, 3})}));
  auto bce2 = [](const Inputs& in) { return F::binary_cross_entropy_with_logits(in[0], in[1]); };
  EXPECT_GRADGRADCHECK(bce2, (Inputs{randn({2, 3}), mt::rand({2, 3}, {.dtype = mt::kFloat64, .requires_grad = true})}));
}
