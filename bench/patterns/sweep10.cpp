// User-model patterns from primitives (tenth sweep: Swin's window attention, a selective scan
// written with exp and cumsum, T5's relative position bias, a Conformer's convolution module,
// Perceiver's cross-attention, grouped-query attention by expand, gradient accumulation,
// drop-path with layer scale, Gemma's logit soft-capping, a weight-tied LM head): each case
// forward + backward, printed with its best time in us. sweep10.py is its PyTorch twin (the
// same cases, names and sizes); tools/patterns.sh sweep10 runs both alternately. Args: a
// case-name filter; env PROF=1 prints the profiler table per case, AMP=1 runs under bf16 autocast.
#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  // Swin: [B, 28, 28, 96] in 7 x 7 windows, 3 heads of 32, attention inside each window.
  Tensor sx = leaf({8, 28, 28, 96}), sqkv = leaf({288, 96}), sproj = leaf({96, 96});
  cases.add("swin_window_attn", [&] {
    auto w = sx.view({8, 4, 7, 4, 7, 96}).permute({0, 1, 3, 2, 4, 5}).reshape({128, 49, 96});
    auto qkv = F::linear(w, sqkv).view({128, 49, 3, 3, 32}).permute({2, 0, 3, 1, 4});
    auto q = qkv.select(0, 0), k = qkv.select(0, 1), v = qkv.select(0, 2);
    auto a = mt::softmax(mt::matmul(q, k.transpose(-2, -1)) * 0.17677669529663687, -1);
    auto o = mt::matmul(a, v).transpose(1, 2).reshape({128, 49, 96});
    o = F::linear(o, sproj).view({8, 4, 4, 7, 7, 96}).permute({0, 1, 3, 2, 4, 5}).reshape({8, 28, 28, 96});
    (o + sx).pow(2.0).mean().backward();
  });
  // A selective scan's inner product by primitives: exp(delta A) [B, L, D, N] against B x.
  Tensor mdelta = leaf({4, 128, 64}), mA = leaf({64, 16}), mB = leaf({4, 128, 16}), mxs = leaf({4, 128, 64});
  cases.add("mamba_scan_prims", [&] {
    auto delta = mt::softplus(mdelta);
    auto dA = mt::exp(delta.unsqueeze(-1) * (-mt::exp(mA)));
    auto dBx = (delta * mxs).unsqueeze(-1) * mB.unsqueeze(2);
    auto h = mt::cumsum(mt::log(dA + 1e-6), 1).exp() * mt::cumsum(dBx, 1);
    h.sum({-1}).pow(2.0).mean().backward();
  });
  // T5: a learned bias per (bucket, head) gathered into [H, T, T] and added to the scores.
  Tensor tq = leaf({8, 8, 128, 64}), tk = leaf({8, 8, 128, 64}), tbias = leaf({32, 8});
  Tensor tbucket = mt::randint(0, 32, {128, 128});
  cases.add("t5_rel_bias", [&] {
    auto b = F::embedding(tbucket, tbias).permute({2, 0, 1}).unsqueeze(0);
    auto s = mt::matmul(tq, tk.transpose(-2, -1)) + b;
    mt::softmax(s, -1).pow(2.0).sum().backward();
  });
  // Conformer's convolution module: pointwise to 2C, GLU, depthwise conv1d (k 31), batch norm,
  // SiLU, pointwise back.
  Tensor cx = leaf({8, 256, 144}), cw1 = leaf({288, 144}), cdw = leaf({144, 1, 31}), cw2 = leaf({144, 144});
  cases.add("conformer_conv", [&] {
    auto h = F::linear(cx, cw1);
    h = h.narrow(-1, 0, 144) * mt::sigmoid(h.narrow(-1, 144, 144));
    h = F::conv1d(h.transpose(1, 2), cdw, {}, {.padding = 15, .groups = 144});
    h = mt::silu(F::batch_norm(h, {}, {}, {}, {}, true));
    (F::linear(h.transpose(1, 2), cw2) + cx).pow(2.0).mean().backward();
  });
  // Perceiver: 64 latents attend to 1024 inputs (4 heads of 64).
  Tensor platent = leaf({8, 64, 256}), pin = leaf({8, 1024, 256}), pwq = leaf({256, 256}), pwkv = leaf({512, 256});
  cases.add("perceiver_xattn", [&] {
    auto q = F::linear(platent, pwq).view({8, 64, 4, 64}).transpose(1, 2);
    auto kv = F::linear(pin, pwkv).view({8, 1024, 2, 4, 64}).permute({2, 0, 3, 1, 4});
    auto a = mt::softmax(mt::matmul(q, kv.select(0, 0).transpose(-2, -1)) * 0.125, -1);
    mt::matmul(a, kv.select(0, 1)).pow(2.0).mean().backward();
  });
  // Grouped-query attention: 2 key/value heads shared by 8 query heads through expand + reshape.
  Tensor gq = leaf({8, 8, 128, 64}), gk = leaf({8, 2, 128, 64}), gv = leaf({8, 2, 128, 64});
  Tensor gmask = mt::triu(mt::ones({128, 128}), 1).to(mt::kBool);
  cases.add("gqa_expand", [&] {
    auto k = gk.unsqueeze(2).expand({8, 2, 4, 128, 64}).reshape({8, 8, 128, 64});
    auto v = gv.unsqueeze(2).expand({8, 2, 4, 128, 64}).reshape({8, 8, 128, 64});
    auto s = mt::masked_fill(mt::matmul(gq, k.transpose(-2, -1)) * 0.125, gmask, -1e30);
    mt::matmul(mt::softmax(s, -1), v).pow(2.0).mean().backward();
  });
  // Four micro-batches of a 2-layer MLP, gradients accumulating in the leaves.
  Tensor ax = mt::randn({4, 64, 512}), aw1 = leaf({1024, 512}), ab1 = leaf({1024}), aw2 = leaf({512, 1024});
  cases.add("grad_accum_4", [&] {
    for (int i = 0; i < 4; ++i)
      F::linear(mt::gelu(F::linear(ax.select(0, i), aw1, ab1)), aw2).pow(2.0).mean().backward();
  });
  // Drop-path (a per-sample keep mask) with layer scale on a residual branch.
  Tensor dx = leaf({32, 197, 192}), dw = leaf({192, 192}), dgamma = leaf({192});
  cases.add("drop_path_scale", [&] {
    auto keep = mt::lt(mt::rand({32, 1, 1}), mt::full({}, 0.9)).to(mt::kFloat32) / 0.9;
    (dx + F::linear(dx, dw) * dgamma * keep).pow(2.0).mean().backward();
  });
  // Gemma's soft-capped logits: tanh(x / 30) 30 before the cross-entropy, 10 % of targets ignored.
  Tensor gl = leaf({1024, 8192});
  Tensor gt = mt::where(mt::lt(mt::rand({1024}), mt::full({}, 0.1)), mt::full({1024}, -100, {.dtype = mt::kInt64}),
                        mt::randint(0, 8192, {1024}));
  cases.add("logit_softcap_ce", [&] { F::cross_entropy(mt::tanh(gl / 30.0) * 30.0, gt).backward(); });
  // A weight-tied LM head: the embedding's table also projects the output.
  Tensor we = leaf({8192, 256}), wh = leaf({256, 256});
  Tensor wids = mt::randint(0, 8192, {16, 64}), wtgt = mt::randint(0, 8192, {1024});
  cases.add("tied_lm_head", [&] {
    auto h = mt::gelu(F::linear(F::embedding(wids, we), wh)).reshape({1024, 256});
    F::cross_entropy(mt::matmul(h, we.t()), wtgt).backward();
  });
  return patterns::run_patterns(argc, argv, cases);
}
