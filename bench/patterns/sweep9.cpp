// User-model patterns from primitives (ninth sweep: MobileNet and ConvNeXt blocks, a VAE's loss,
// attention with a key-padding mask, grouped and causal dilated convolutions, a large
// vocabulary's cross-entropy, pixel shuffle, an AdamW step with clipping, a KV-cache decode,
// a Dice loss, ...): each case forward + backward (or, where it says so, without a graph), printed
// with its best time in us. sweep9.py is its PyTorch twin (the same cases, names and sizes);
// tools/patterns.sh sweep9 runs both alternately. Args: a case-name filter; env PROF=1 prints the
// profiler table per case, AMP=1 runs under bf16 autocast.
#include <cmath>

#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  auto bn = [](const Tensor& t) { return F::batch_norm(t, {}, {}, {}, {}, true); };
  Tensor mx = leaf({32, 32, 28, 28}), me = leaf({192, 32, 1, 1}), md = leaf({192, 1, 3, 3}), mp = leaf({32, 192, 1, 1});
  cases.add("mbv2_block", [&] {
    auto h = mt::hardtanh(bn(F::conv2d(mx, me)), 0, 6);
    h = mt::hardtanh(bn(F::conv2d(h, md, {}, {.padding = 1, .groups = 192})), 0, 6);
    (bn(F::conv2d(h, mp)) + mx).pow(2.0).mean().backward();
  });
  Tensor cx = leaf({16, 96, 28, 28}), cdw = leaf({96, 1, 7, 7}), cdb = leaf({96}), clw = leaf({96}), clb = leaf({96}),
         c1 = leaf({384, 96}), c1b = leaf({384}), c2 = leaf({96, 384}), c2b = leaf({96}), cg = leaf({96});
  cases.add("convnext_block", [&] {
    auto h = F::conv2d(cx, cdw, cdb, {.padding = 3, .groups = 96}).permute({0, 2, 3, 1});
    h = F::linear(mt::gelu(F::linear(F::layer_norm(h, {96}, clw, clb), c1, c1b)), c2, c2b) * cg;
    (h.permute({0, 3, 1, 2}) + cx).pow(2.0).mean().backward();
  });
  Tensor vx = mt::rand({256, 784}), vw1 = leaf({400, 784}), vb1 = leaf({400}), vmu = leaf({20, 400}),
         vlv = leaf({20, 400}), vd1 = leaf({400, 20}), vd2 = leaf({784, 400}), veps = mt::randn({256, 20});
  cases.add("vae_loss", [&] {
    auto h = mt::relu(F::linear(vx, vw1, vb1));
    auto mu = F::linear(h, vmu), logvar = F::linear(h, vlv) * 0.1;
    auto z = mu + mt::exp(logvar * 0.5) * veps;
    auto recon = F::linear(mt::relu(F::linear(z, vd1)), vd2);
    auto bce = F::binary_cross_entropy_with_logits(recon, vx, {.reduction = nn::Reduction::Sum});
    auto kl = (1.0 + logvar - mu.pow(2.0) - mt::exp(logvar)).sum() * -0.5;
    (bce + kl).backward();
  });
  Tensor aq = leaf({16, 8, 128, 64}), ak = leaf({16, 8, 128, 64}), av = leaf({16, 8, 128, 64});
  Tensor apad = mt::rand({16, 1, 1, 128}) < 0.1;
  cases.add("attn_key_padding", [&] {
    auto s = mt::masked_fill(mt::matmul(aq, ak.transpose(-2, -1)) * 0.125, apad, -INFINITY);
    mt::matmul(F::dropout(mt::softmax(s, -1), 0.1), av).sum().backward();
  });
  Tensor gx = leaf({16, 128, 28, 28}), gw = leaf({128, 4, 3, 3});
  cases.add("grouped_conv_g32", [&] { F::conv2d(gx, gw, {}, {.padding = 1, .groups = 32}).sum().backward(); });
  Tensor wx = leaf({16, 64, 1024}), wk = leaf({128, 64, 2}), wr = leaf({64, 64, 1});
  cases.add("wavenet_gated", [&] {
    auto h = F::conv1d(wx, wk, {}, {.padding = 4, .dilation = 4}).slice(2, 0, 1024);
    auto g = mt::tanh(h.slice(1, 0, 64)) * mt::sigmoid(h.slice(1, 64, 128));
    (F::conv1d(g, wr) + wx).sum().backward();
  });
  Tensor bh = leaf({1024, 256}), bw = leaf({16000, 256});
  Tensor bt = mt::randint(0, 16000, {1024});
  cases.add("big_vocab_ce", [&] { F::cross_entropy(F::linear(bh, bw), bt).backward(); });
  Tensor px = leaf({8, 64, 32, 32}), pk = leaf({256, 64, 3, 3});
  cases.add("pixel_shuffle", [&] {
    auto h = F::conv2d(px, pk, {}, {.padding = 1}).reshape({8, 64, 2, 2, 32, 32}).permute({0, 1, 4, 2, 5, 3});
    h.reshape({8, 64, 64, 64}).pow(2.0).mean().backward();
  });
  // 12 GPT layers' parameters at d_model 256 (9.5 M), their gradients set once.
  std::vector<Tensor> params;
  for (int l = 0; l < 12; ++l)
    for (const mt::Shape& s : std::vector<mt::Shape>{
             {768, 256}, {768}, {256, 256}, {256}, {1024, 256}, {1024}, {256, 1024}, {256}, {256}, {256}, {256}, {256}})
      params.push_back(leaf(s));
  {
    Tensor loss = params[0].pow(2.0).sum();
    for (size_t i = 1; i < params.size(); ++i) loss = loss + params[i].pow(2.0).sum();
    loss.backward();
  }
  mt::optim::AdamW opt(params);
  cases.add("adamw_clip_step", [&] {
    mt::optim::clip_grad_norm_(params, 1.0);
    opt.step();
  });
  Tensor tokw = leaf({32000, 256}), posw = leaf({1024, 256}), lnw = leaf({256}), lnb = leaf({256});
  Tensor tokidx = mt::randint(0, 32000, {16, 256});
  cases.add("gpt_embed_input", [&] {
    auto h = F::embedding(tokidx, tokw) + posw.slice(0, 0, 256);
    F::layer_norm(F::dropout(h, 0.1), {256}, lnw, lnb).pow(2.0).mean().backward();
  });
  Tensor lx = leaf({64, 200, 128});
  Tensor llen = mt::randint(1, 201, {64});
  cases.add("length_mask_mean", [&] {
    auto mask = (mt::arange(200).unsqueeze(0) < llen.unsqueeze(1)).unsqueeze(2).to(mt::kFloat32);
    ((lx * mask).sum({1}) / llen.unsqueeze(1).to(mt::kFloat32)).sum().backward();
  });
  Tensor rq = leaf({512, 256}), rk = leaf({8192, 256});
  cases.add("retrieval_topk", [&] {
    auto q = rq / mt::norm(rq, 2, {1}, true), k = rk / mt::norm(rk, 2, {1}, true);
    mt::topk(mt::matmul(q, k.t()), 10).values.sum().backward();
  });
  Tensor kc = mt::randn({8, 8, 128, 64}), vc = mt::randn({8, 8, 128, 64}), qd = mt::randn({8, 8, 1, 64}),
         knew = mt::randn({8, 8, 1, 64});
  cases.add("kv_cache_decode", [&] {  // no graph: 32 decoding steps, the cache growing by cat
    mt::NoGradGuard guard;
    Tensor k = kc, v = vc, o;
    for (int i = 0; i < 32; ++i) {
      k = mt::cat({k, knew}, 2);
      v = mt::cat({v, knew}, 2);
      o = mt::matmul(mt::softmax(mt::matmul(qd, k.transpose(-2, -1)) * 0.125, -1), v);
    }
    keep_alive(o);
  });
  Tensor dl = leaf({8, 21, 64, 64});
  Tensor dt = mt::randint(0, 21, {8, 64, 64});
  cases.add("dice_loss", [&] {
    auto p = mt::softmax(dl, 1);
    auto t = mt::one_hot(dt, 21).permute({0, 3, 1, 2}).to(mt::kFloat32);
    auto inter = (p * t).sum({0, 2, 3}), card = (p + t).sum({0, 2, 3});
    (1.0 - (inter * 2.0 + 1.0) / (card + 1.0)).mean().backward();
  });
  // Inference of three conv + batch norm (running estimates) + ReLU layers, no graph.
  Tensor ix = mt::randn({16, 64, 32, 32}), ik = mt::randn({64, 64, 3, 3}) * 0.05, irm = mt::zeros({64}),
         irv = mt::ones({64}), iw = mt::ones({64}), ib = mt::zeros({64});
  cases.add("cnn_inference", [&] {
    mt::NoGradGuard guard;
    Tensor h = ix;
    for (int i = 0; i < 3; ++i)
      h = mt::relu(F::batch_norm(F::conv2d(h, ik, {}, {.padding = 1}), irm, irv, iw, ib, false));
    keep_alive(h);
  });
  return patterns::run_patterns(argc, argv, cases);
}
