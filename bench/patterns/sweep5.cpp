// User-model patterns from primitives and nn layers (fifth sweep: layer norm and GELU from ops,
// squeeze-and-excitation, masked mean pooling, focal loss, ...): each case forward + backward,
// printed with its best time in us. sweep5.py is its PyTorch twin (the same cases, names and
// sizes); tools/patterns.sh sweep5 runs both alternately. Args: a case-name filter; env PROF=1
// prints the profiler table per case.
#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  Tensor x = leaf({8, 512, 256}), w = leaf({256}), bia = leaf({256});
  cases.add("layernorm_prims", [&] {
    auto mu = mt::mean(x, {-1}, true);
    auto d = x - mu;
    auto v = mt::mean(d * d, {-1}, true);
    (d / mt::sqrt(v + 1e-5) * w + bia).sum().backward();
  });
  cases.add("gelu_tanh_prims",
            [&] { (0.5 * x * (1.0 + mt::tanh(0.7978845608 * (x + 0.044715 * x * x * x)))).sum().backward(); });
  Tensor fm = leaf({16, 64, 32, 32}), l1 = leaf({64, 16}), l2 = leaf({16, 64});
  cases.add("se_block", [&] {
    auto s = mt::mean(fm, {2, 3});
    s = mt::sigmoid(mt::matmul(mt::relu(mt::matmul(s, l1)), l2));
    (fm * s.unsqueeze(-1).unsqueeze(-1)).sum().backward();
  });
  Tensor seq = leaf({32, 128, 256});
  Tensor mask = (mt::rand({32, 128}) > 0.3).to(mt::kFloat32);
  cases.add("masked_mean_pool", [&] { ((seq * mask.unsqueeze(-1)).sum({1}) / mask.sum({1}, true)).sum().backward(); });
  Tensor lg = leaf({4096, 256});
  Tensor tg = mt::randint(0, 256, {4096});
  cases.add("ce_by_hand",
            [&] { (mt::logsumexp(lg, {-1}) - mt::gather(lg, 1, tg.unsqueeze(1)).squeeze(1)).mean().backward(); });
  cases.add("focal_loss", [&] {
    auto p = mt::softmax(lg, -1);
    auto pt = mt::gather(p, 1, tg.unsqueeze(1));
    (-mt::pow(1.0 - pt, 2.0) * mt::log(pt)).mean().backward();
  });
  Tensor dd = leaf({1024, 1024});
  cases.add("huber_where", [&] {
    auto a = mt::abs(dd);
    mt::where(a < 1.0, 0.5 * dd * dd, a - 0.5).mean().backward();
  });
  Tensor e1 = leaf({4096, 256});
  cases.add("l2_normalize", [&] { (e1 / mt::clamp(mt::norm(e1, 2, {-1}, true), 1e-12, INFINITY)).sum().backward(); });
  Tensor za = leaf({512, 128}), zb = leaf({512, 128});
  Tensor ar = mt::arange(0, 512).to(mt::kInt64);
  cases.add("contrastive", [&] { F::cross_entropy(mt::matmul(za, zb.t()) / 0.07, ar).backward(); });
  Tensor pe = mt::randn({1024, 256});
  cases.add("pos_enc_slice_add", [&] { (x + pe.slice(0, 0, 512)).sum().backward(); });
  Tensor sc = leaf({8, 8, 256, 256});
  Tensor slopes = mt::randn({8}), dist = mt::randn({256, 256});
  cases.add("alibi_bias", [&] { mt::softmax(sc + slopes.view({8, 1, 1}) * dist, -1).sum().backward(); });
  std::vector<Tensor> ps;
  for (int i = 0; i < 8; ++i) ps.push_back(leaf({256, 256}));
  cases.add("l2_penalty", [&] {
    Tensor r = mt::zeros({});
    for (auto& p : ps) r = r + mt::pow(p, 2).sum();
    (r * 1e-4).backward();
  });
  std::vector<Tensor> ema;
  for (int i = 0; i < 8; ++i) ema.push_back(mt::randn({256, 256}));
  cases.add("ema_update", [&] {
    mt::NoGradGuard ng;
    for (int i = 0; i < 8; ++i) ema[i].mul_(0.999).add_(ps[i].detach(), 0.001);
  });
  std::vector<Tensor> gs;
  for (int i = 0; i < 8; ++i) gs.push_back(mt::randn({256, 256}));
  cases.add("clip_by_hand", [&] {
    mt::NoGradGuard ng;
    Tensor tot = mt::zeros({});
    for (auto& g : gs) tot = tot + mt::pow(g, 2).sum();
    Tensor c = mt::clamp(1.0 / (mt::sqrt(tot) + 1e-6), 0.0, 1.0);
    for (auto& g : gs) g.mul_(c);
  });
  Tensor hb = mt::randn({1024, 1024}).to(mt::kBFloat16).requires_grad_(true), hf = leaf({1024, 1024});
  cases.add("mixed_bf16_fp32_mul", [&] { (hb * hf).sum().backward(); });
  cases.add("bf16_roundtrip", [&] { hf.to(mt::kBFloat16).to(mt::kFloat32).sum().backward(); });
  cases.add("where_scalar_zero", [&] { mt::where(dd > 0.0, dd, mt::zeros({})).sum().backward(); });
  Tensor ts = leaf({32, 256, 128});
  Tensor cw = leaf({256, 256, 3});
  cases.add("conv1d_seq", [&] { F::conv1d(ts, cw, {}, {.padding = 1}).sum().backward(); });
  cases.add("avg_pool1d", [&] { F::avg_pool1d(ts, 2).sum().backward(); });
  cases.add("adaptive_avg_pool1d", [&] { F::adaptive_avg_pool1d(ts, 1).sum().backward(); });
  cases.add("channel_shuffle", [&] {
    fm.view({16, 4, 16, 32, 32}).transpose(1, 2).reshape({16, 64, 32, 32}).sum().backward();
  });
  Tensor an = leaf({4096, 128}), po = leaf({4096, 128}), ne = leaf({4096, 128});
  cases.add("triplet_by_hand", [&] {
    auto dap = mt::norm(an - po, 2, {-1}), dan = mt::norm(an - ne, 2, {-1});
    mt::clamp(dap - dan + 1.0, 0.0, INFINITY).mean().backward();
  });
  Tensor oa = leaf({64, 256}), ob = leaf({64, 256});
  cases.add("outer_bcast", [&] { (oa.unsqueeze(-1) * ob.unsqueeze(-2)).sum().backward(); });
  Tensor cp = leaf({1024, 1024});
  cases.add("cumprod_last", [&] { mt::cumprod(mt::sigmoid(cp), -1).sum().backward(); });
  cases.add("up_nearest2x", [&] { F::interpolate(fm, {.scale_factor = {2.0}}).sum().backward(); });
  cases.add("max_pool_k3s2p1", [&] { F::max_pool2d(fm, 3, {.stride = 2, .padding = 1}).sum().backward(); });
  cases.add("std_lastdim", [&] { mt::std(x, {-1}).sum().backward(); });
  cases.add("sub_mean_div_std",
            [&] { ((x - mt::mean(x, {0}, true)) / (mt::std(x, {0}, true) + 1e-5)).sum().backward(); });
  return patterns::run_patterns(argc, argv, cases);
}
