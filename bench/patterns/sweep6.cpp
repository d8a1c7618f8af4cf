// User-model patterns from primitives and nn layers (sixth sweep: LSTM / GRU cells from ops, norms
// by hand, group norm, bilinear upsampling, losses, ...): each case forward + backward, printed
// with its best time in us. sweep6.py is its PyTorch twin (the same cases, names and sizes);
// tools/patterns.sh sweep6 runs both alternately. Args: a case-name filter; env PROF=1 prints the
// profiler table per case.
#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  Tensor xi = leaf({64, 256}), h0 = leaf({64, 256}), Wl = leaf({256, 1024}), Ul = leaf({256, 1024}), bl = leaf({1024});
  cases.add("lstm_prims_16", [&] {
    Tensor h = h0, c = mt::zeros({64, 256});
    for (int t = 0; t < 16; ++t) {
      auto g = mt::chunk(mt::matmul(xi, Wl) + mt::matmul(h, Ul) + bl, 4, -1);
      c = mt::sigmoid(g[1]) * c + mt::sigmoid(g[0]) * mt::tanh(g[2]);
      h = mt::sigmoid(g[3]) * mt::tanh(c);
    }
    h.sum().backward();
  });
  Tensor Wg = leaf({256, 768}), Ug = leaf({256, 768});
  cases.add("gru_prims_16", [&] {
    Tensor h = h0;
    for (int t = 0; t < 16; ++t) {
      auto gx = mt::chunk(mt::matmul(xi, Wg), 3, -1), gh = mt::chunk(mt::matmul(h, Ug), 3, -1);
      auto r = mt::sigmoid(gx[0] + gh[0]), z = mt::sigmoid(gx[1] + gh[1]);
      auto n = mt::tanh(gx[2] + r * gh[2]);
      h = (1.0 - z) * n + z * h;
    }
    h.sum().backward();
  });
  Tensor fm = leaf({16, 64, 32, 32}), cwc = leaf({64}), cbc = leaf({64});
  cases.add("batchnorm_prims", [&] {
    auto m = mt::mean(fm, {0, 2, 3}, true);
    auto v = mt::var(fm, {0, 2, 3}, 0, true);
    ((fm - m) / mt::sqrt(v + 1e-5) * cwc.view({1, 64, 1, 1}) + cbc.view({1, 64, 1, 1})).sum().backward();
  });
  Tensor x = leaf({8, 512, 256}), w = leaf({256});
  cases.add("rmsnorm_prims", [&] { (x * mt::rsqrt(mt::mean(x * x, {-1}, true) + 1e-6) * w).sum().backward(); });
  Tensor dwk = leaf({64, 1, 3, 3});
  cases.add("depthwise_conv3x3", [&] { F::conv2d(fm, dwk, {}, {.padding = 1, .groups = 64}).sum().backward(); });
  cases.add("bilinear_up2x", [&] { F::interpolate(fm, {.scale_factor = {2.0}, .mode = "bilinear"}).sum().backward(); });
  Tensor lg = leaf({4096, 256});
  Tensor tg = mt::randint(0, 256, {4096});
  cases.add("label_smooth_ce", [&] {
    auto lp = mt::log_softmax(lg, -1);
    auto nll = -mt::gather(lp, 1, tg.unsqueeze(1)).squeeze(1);
    (0.9 * nll - 0.1 * mt::mean(lp, {-1})).mean().backward();
  });
  Tensor lg2 = leaf({4096, 256});
  cases.add("kl_div_distill", [&] {
    F::kl_div(mt::log_softmax(lg, -1), mt::softmax(lg2, -1), {.reduction = F::KlDivReduction::BatchMean}).backward();
  });
  Tensor gate = leaf({4096, 64});
  cases.add("moe_top2_gating", [&] {
    auto p = mt::softmax(gate, -1);
    auto tk = mt::topk(p, 2, -1);
    (tk.values / mt::sum(tk.values, {-1}, true)).sum().backward();
  });
  Tensor ca = leaf({4096, 256}), cb = leaf({4096, 256});
  cases.add("cosine_sim",
            [&] { ((ca * cb).sum({-1}) / (mt::norm(ca, 2, {-1}) * mt::norm(cb, 2, {-1}) + 1e-8)).sum().backward(); });
  cases.add("max_dim_values", [&] { mt::max(lg, -1).values.sum().backward(); });
  Tensor sq = leaf({1024, 1024});
  cases.add("cumsum_last", [&] { mt::cumsum(sq, -1).sum().backward(); });
  cases.add("cumsum_dim0", [&] { mt::cumsum(sq, 0).sum().backward(); });
  cases.add("logsumexp_dim0", [&] { mt::logsumexp(sq, {0}).sum().backward(); });
  Tensor table = leaf({10000, 256});
  Tensor idx = mt::randint(0, 10000, {4096});
  cases.add("index_select_rows", [&] { mt::index_select(table, 0, idx).sum().backward(); });
  cases.add("sum_dims_023", [&] { mt::sum(fm, {0, 2, 3}).sum().backward(); });
  cases.add("group_norm_8", [&] { F::group_norm(fm, 8, cwc, cbc).sum().backward(); });
  cases.add("instance_norm", [&] { F::instance_norm(fm, cwc, cbc).sum().backward(); });
  Tensor ct_in = leaf({16, 64, 16, 16}), ctw = leaf({64, 32, 4, 4});
  cases.add("conv_transpose_s2",
            [&] { F::conv_transpose2d(ct_in, ctw, {}, {.stride = 2, .padding = 1}).sum().backward(); });
  cases.add("unfold_3x3", [&] { F::unfold(fm, 3, {.padding = 1}).sum().backward(); });
  cases.add("softplus", [&] { mt::softplus(sq).sum().backward(); });
  Tensor pa = leaf({512, 128}), pb = leaf({512, 128});
  cases.add("pairwise_dist", [&] {
    auto a2 = (pa * pa).sum({-1}, true), b2 = (pb * pb).sum({-1}, true);
    mt::sqrt(mt::clamp(a2 + b2.t() - 2.0 * mt::matmul(pa, pb.t()), 1e-12, INFINITY)).sum().backward();
  });
  Tensor so = leaf({1024, 256});
  cases.add("sort_last", [&] { mt::sort(so, -1).values.sum().backward(); });
  Tensor pr = leaf({4096, 64});
  cases.add("prod_last", [&] { mt::prod(pr, -1).sum().backward(); });
  Tensor vv = leaf({4096, 256});
  cases.add("var_dim0", [&] { mt::var(vv, {0}).sum().backward(); });
  Tensor tgt = mt::randn({1024, 1024});
  cases.add("mse_loss", [&] { F::mse_loss(sq, tgt).backward(); });
  Tensor bt = mt::rand({1024, 1024});
  cases.add("bce_logits", [&] { F::binary_cross_entropy_with_logits(sq, bt).backward(); });
  Tensor seq = leaf({32, 128, 256});
  cases.add("amax_time", [&] { mt::amax(seq, {1}).sum().backward(); });
  Tensor gl = leaf({4096, 1024});
  cases.add("glu_by_hand", [&] {
    auto h = mt::chunk(gl, 2, -1);
    (h[0] * mt::sigmoid(h[1])).sum().backward();
  });
  cases.add("pow3", [&] { mt::pow(sq, 3.0).sum().backward(); });
  cases.add("pow_half_abs", [&] { mt::pow(mt::abs(sq) + 1.0, 0.5).sum().backward(); });
  cases.add("l1_loss", [&] { F::l1_loss(sq, tgt).backward(); });
  cases.add("argmax_acc", [&] {
    mt::NoGradGuard ng;
    keep_alive(mt::eq(mt::argmax(lg, -1), tg).to(mt::kFloat32).mean());
  });
  cases.add("one_hot_mse",
            [&] { (mt::softmax(lg, -1) - mt::one_hot(tg, 256).to(mt::kFloat32)).pow(2.0).mean().backward(); });
  std::vector<Tensor> st;
  for (int i = 0; i < 8; ++i) st.push_back(leaf({256, 256}));
  cases.add("stack8", [&] { mt::stack(st, 0).sum().backward(); });
  return patterns::run_patterns(argc, argv, cases);
}
