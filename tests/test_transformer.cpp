// MultiheadAttention, TransformerBlock and GPT: a 2-layer GPT against PyTorch (logits, loss
// and every parameter gradient from tests/fixtures/reference_gpt.json, written by
// tools/gen_reference_gpt.py), float64 gradcheck of a whole block, masks and modes, weight
// tying, weight-decay groups, and gradient clipping after GradScaler::unscale_ under fp16.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using json = nlohmann::json;
using Inputs = std::vector<mt::Tensor>;

namespace {

const json& gpt_ref() {
  static const json j = [] {
    std::ifstream f(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_gpt.json");
    EXPECT_TRUE(f.good()) << "missing tests/fixtures/reference_gpt.json (run tools/gen_reference_gpt.py)";
    return json::parse(f);
  }();
  return j;
}

mt::Tensor tensor(const json& t, mt::DType dtype) {
  return mt::from_vector(t.at("data").get<std::vector<double>>(), t.at("shape").get<mt::Shape>(), {.dtype = dtype});
}

mt::Tensor tokens(const json& t) {
  return mt::from_vector(t.at("data").get<std::vector<int64_t>>(), t.at("shape").get<mt::Shape>());
}

using mantissa::test::expect_close_to_reference;

double max_abs_diff(const mt::Tensor& a, const mt::Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

mt::nn::GPTConfig fixture_config() {
  const json& c = gpt_ref().at("config");
  return {.vocab_size = c.at("vocab_size"),
          .context = c.at("context"),
          .n_layer = c.at("n_layer"),
          .n_head = c.at("n_head"),
          .d_model = c.at("d_model")};
}

}  // namespace

TEST(GPT, TwoLayersMatchPyTorch) {
  const json& r = gpt_ref();
  for (auto [dt, tol] : {std::pair{mt::kFloat64, 1e-9}, {mt::kFloat32, 1e-4}}) {
    mt::nn::GPT gpt(fixture_config());
    gpt.to(dt);
    mt::nn::StateDict sd;
    for (auto& [name, t] : r.at("params").items()) sd.insert(name, tensor(t, dt));
    gpt.load_state_dict(sd);  // strict: the parameter names are PyTorch's
    mt::Tensor logits = gpt(tokens(r["tokens"]));
    expect_close_to_reference(logits, r["logits"], tol, "logits");
    mt::Tensor loss = F::cross_entropy(logits.reshape({-1, gpt.config.vocab_size}), tokens(r["targets"]).reshape({-1}));
    EXPECT_NEAR(loss.item<double>(), r.at("loss").get<double>(), tol);
    loss.backward();
    size_t checked = 0;
    for (auto& [name, p] : gpt.named_parameters()) {
      expect_close_to_reference(p.grad(), r.at("grads").at(name), tol * 10, name + " grad");
      ++checked;
    }
    EXPECT_EQ(checked, r.at("grads").size());
  }
}

TEST(GPT, TiedHeadSharesTheEmbeddingAndInitIsGpt2) {
  mt::manual_seed(0);
  mt::nn::GPT gpt({.vocab_size = 50, .context = 16, .n_layer = 3, .n_head = 2, .d_model = 32});
  EXPECT_TRUE(gpt.head_weight().is_same(gpt.tok_emb.weight));
  EXPECT_EQ(gpt.head, nullptr);
  // Parameters: embeddings, 3 blocks of (2 LN, in/out proj, 2 MLP linears), final LN.
  const int64_t d = 32, block = 4 * d + 3 * d * d + 3 * d + d * d + d + 4 * d * d + 4 * d + 4 * d * d + d;
  EXPECT_EQ(gpt.num_parameters(), 50 * d + 16 * d + 3 * block + 2 * d);
  const double proj_std = std::sqrt(mt::var(gpt.tensor("blocks.0.mlp_proj.weight")).item<double>());
  const double fc_std = std::sqrt(mt::var(gpt.tensor("blocks.0.mlp_fc.weight")).item<double>());
  EXPECT_NEAR(fc_std, 0.02, 0.002);
  EXPECT_NEAR(proj_std, 0.02 / std::sqrt(6.0), 0.002);
  mt::nn::GPT untied({.vocab_size = 50, .context = 16, .n_layer = 1, .n_head = 2, .d_model = 32, .tie_weights = false});
  ASSERT_NE(untied.head, nullptr);
  EXPECT_EQ(untied(mt::zeros({2, 5}, {.dtype = mt::kInt64})).sizes(), (mt::Shape{2, 5, 50}));
}

TEST(GPT, RejectsLongSequencesAndBadConfigs) {
  mt::nn::GPT gpt({.vocab_size = 10, .context = 4, .n_layer = 1, .n_head = 2, .d_model = 8});
  EXPECT_THROW(gpt(mt::zeros({1, 5}, {.dtype = mt::kInt64})), mt::Error);
  EXPECT_THROW(gpt(mt::zeros({1, 3})), mt::Error);
  EXPECT_THROW(mt::nn::GPT({.vocab_size = 10, .n_head = 3, .d_model = 8}), mt::Error);
}

TEST(TransformerBlock, GradcheckWholeBlock) {
  mt::manual_seed(12);
  mt::nn::TransformerBlock block(4, 2);
  block.to(mt::kFloat64);
  for (auto& p : block.parameters()) {  // larger values than the init so every path matters
    mt::NoGradGuard g;
    p.copy_(mt::randn(p.sizes(), {.dtype = mt::kFloat64}) * 0.5 + (p.dim() == 1 ? 0.1 : 0.0));
  }
  Inputs in{mt::randn({1, 3, 4}, {.dtype = mt::kFloat64, .requires_grad = true})};
  for (auto& p : block.parameters()) in.push_back(p);
  std::string why;
  EXPECT_TRUE(mt::autograd::gradcheck([&](const Inputs& x) { return block(x[0]); }, in, {}, &why)) << why;
}

TEST(MultiheadAttention, CausalityAndKeyPadding) {
  mt::manual_seed(13);
  mt::nn::MultiheadAttention causal(8, 2, {.causal = true});
  mt::Tensor x = mt::randn({2, 5, 8});
  mt::Tensor y = causal(x);
  // Changing the last position changes no earlier output.
  mt::Tensor x2 = x.clone();
  {
    mt::NoGradGuard g;
    x2.select(1, 4).fill_(3.0);
  }
  mt::Tensor y2 = causal(x2);
  EXPECT_LT(max_abs_diff(y.narrow(1, 0, 4), y2.narrow(1, 0, 4)), 1e-6);
  EXPECT_GT(max_abs_diff(y.select(1, 4), y2.select(1, 4)), 1e-3);
  // A padded key is invisible: changing it changes nothing.
  mt::nn::MultiheadAttention full(8, 2);
  mt::Tensor pad = mt::tensor({0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, {2, 5}) != 0.0;
  mt::Tensor a = full.forward(x, x, x, pad), b = full.forward(x, x2, x2, pad);
  EXPECT_LT(max_abs_diff(a.select(0, 0), b.select(0, 0)), 1e-6);
  // Self-attention through the fused projection equals the three separate projections.
  mt::Tensor kv = x.clone();
  EXPECT_LT(max_abs_diff(full(x), full.forward(x, kv, kv)), 1e-5);
  EXPECT_THROW(full.forward(x, x, x, mt::ones({2, 5})), mt::Error);
  EXPECT_THROW(mt::nn::MultiheadAttention(10, 3), mt::Error);
}

TEST(MultiheadAttention, DropoutOnlyInTraining) {
  mt::manual_seed(14);
  mt::nn::MultiheadAttention attn(8, 2, {.dropout = 0.5});
  mt::Tensor x = mt::randn({1, 6, 8});
  mt::Tensor t1 = attn(x), t2 = attn(x);
  EXPECT_GT(max_abs_diff(t1, t2), 1e-4);
  attn.eval();
  EXPECT_EQ(max_abs_diff(attn(x), attn(x)), 0.0);
}

TEST(WeightDecayGroups, MatricesDecayBiasesNormsAndExcludedDoNot) {
  mt::nn::GPT gpt({.vocab_size = 10, .context = 4, .n_layer = 1, .n_head = 2, .d_model = 8});
  auto groups = mt::optim::weight_decay_groups(gpt.named_parameters(), 0.1, {.exclude = {"emb"}});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(*groups[0].weight_decay, 0.1);
  EXPECT_EQ(*groups[1].weight_decay, 0.0);
  // Decayed: in_proj, out_proj, mlp_fc, mlp_proj weights; the rest (incl. both embeddings) not.
  EXPECT_EQ(groups[0].params.size(), 4u);
  EXPECT_EQ(groups[0].params.size() + groups[1].params.size(), gpt.parameters().size());
  auto with_emb = mt::optim::weight_decay_groups(gpt.named_parameters(), 0.1);
  EXPECT_EQ(with_emb[0].params.size(), 6u);
  // AdamW applies each group's decay: with a zero gradient only decayed weights shrink.
  mt::optim::AdamW opt(groups, {.lr = 0.1});
  for (auto& p : gpt.parameters()) p.set_grad(mt::zeros_like(p));
  mt::Tensor w0 = gpt.tensor("blocks.0.mlp_fc.weight").clone(), e0 = gpt.tok_emb.weight.clone();
  opt.step();
  EXPECT_LT(max_abs_diff(gpt.tensor("blocks.0.mlp_fc.weight"), w0 * (1 - 0.1 * 0.1)), 1e-7);
  EXPECT_EQ(max_abs_diff(gpt.tok_emb.weight, e0), 0.0);
}

TEST(GradClipping, GlobalNormAfterUnscaleUnderFp16MatchesFp32) {
  // Two identical models: one trained in fp32 with clipping, one under fp16 autocast with a
  // GradScaler, unscale_ then the same clipping. The clipped gradients agree.
  auto make = [] {
    mt::manual_seed(15);
    return std::make_unique<mt::nn::GPT>(
        mt::nn::GPTConfig{.vocab_size = 12, .context = 8, .n_layer = 1, .n_head = 2, .d_model = 16});
  };
  auto a = make(), b = make();
  mt::Tensor tok = mt::randint(0, 12, {2, 8}), tgt = mt::randint(0, 12, {2, 8});
  auto loss_of = [&](mt::nn::GPT& m) { return F::cross_entropy(m(tok).reshape({-1, 12}), tgt.reshape({-1})); };
  mt::optim::AdamW ob(b->parameters());
  loss_of(*a).backward();
  const double na = mt::optim::clip_grad_norm_(a->parameters(), 0.05).item<double>();
  mt::amp::GradScaler scaler({.init_scale = 1024});
  mt::Tensor lb;
  {
    mt::amp::Autocast ac(mt::kHalf);
    lb = loss_of(*b);
  }
  scaler.backward(lb);
  EXPECT_FALSE(scaler.unscale_(ob));
  const double nb = mt::optim::clip_grad_norm_(b->parameters(), 0.05).item<double>();
  EXPECT_GT(na, 0.05);  // clipping is active
  EXPECT_NEAR(nb, na, 0.02 * na);
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    const double scale = std::sqrt(mt::sum(pa[i].grad() * pa[i].grad()).item<double>()) + 1e-3;
    EXPECT_LT(max_abs_diff(pa[i].grad(), pb[i].grad()), 0.03 * scale) << i;
  }
  EXPECT_TRUE(scaler.step(ob));
  scaler.update();
}
