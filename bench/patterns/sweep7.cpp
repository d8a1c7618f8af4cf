// User-model patterns from primitives and nn layers (seventh sweep: cross-entropy over pixels, GNN
// scatter_add, a gradient penalty, SwiGLU, ...): each case forward + backward, printed with its
// best time in us. sweep7.py is its PyTorch twin (the same cases, names and sizes);
// tools/patterns.sh sweep7 runs both alternately. Args: a case-name filter; env PROF=1 prints the
// profiler table per case, AMP=1 runs under bf16 autocast.
#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  Tensor seg = leaf({8, 21, 64, 64});
  Tensor segt = mt::randint(0, 21, {8, 64, 64});
  cases.add("seg_ce_4d", [&] { F::cross_entropy(seg, segt).backward(); });
  Tensor seg2 = leaf({4, 150, 32, 32});
  Tensor segt2 = mt::randint(0, 150, {4, 32, 32});
  cases.add("seg_ce_150_smooth", [&] { F::cross_entropy(seg2, segt2, {.label_smoothing = 0.1}).backward(); });
  Tensor seg3 = leaf({8, 21, 64, 64});
  cases.add("seg_ce_bf16", [&] { F::cross_entropy(seg3.to(mt::kBFloat16), segt).backward(); });
  Tensor nodes = leaf({4096, 64}), ew = leaf({32768, 1});
  Tensor esrc = mt::randint(0, 4096, {32768}), edst = mt::randint(0, 4096, {32768});
  Tensor edst2 = edst.unsqueeze(1).expand({32768, 64}).contiguous();
  cases.add("gnn_scatter_add", [&] {
    auto msg = mt::index_select(nodes, 0, esrc) * ew;
    mt::scatter_add(mt::zeros({4096, 64}), 0, edst2, msg).sum().backward();
  });
  Tensor sx = leaf({2048, 256}), W1 = leaf({256, 512}), W3 = leaf({256, 512}), W2 = leaf({512, 256});
  cases.add("swiglu", [&] { mt::matmul(mt::silu(mt::matmul(sx, W1)) * mt::matmul(sx, W3), W2).sum().backward(); });
  Tensor ea = leaf({512, 256}), eb = leaf({512, 256});
  Tensor lab = mt::arange(512);
  cases.add("clip_contrastive", [&] {
    auto a = ea / mt::norm(ea, 2, {1}, true), b = eb / mt::norm(eb, 2, {1}, true);
    auto l = mt::matmul(a, b.t()) / 0.07;
    ((F::cross_entropy(l, lab) + F::cross_entropy(l.t(), lab)) / 2.0).backward();
  });
  Tensor fl = leaf({262144});
  Tensor ft = mt::gt(mt::rand({262144}), mt::full({}, 0.7)).to(mt::kFloat32);
  cases.add("focal_loss", [&] {
    auto p = mt::sigmoid(fl);
    auto ce = F::binary_cross_entropy_with_logits(fl, ft, {.reduction = mt::nn::Reduction::None});
    auto pt = p * ft + (1.0 - p) * (1.0 - ft);
    (mt::pow(1.0 - pt, 2.0) * ce).mean().backward();
  });
  Tensor img = leaf({256, 3, 32, 32});
  Tensor perm = mt::randperm(256);
  cases.add("mixup", [&] { (0.7 * img + 0.3 * mt::index_select(img, 0, perm)).sum().backward(); });
  Tensor gx = leaf({256, 512}), D1 = leaf({512, 512}), D2 = leaf({512, 1});
  cases.add("wgan_gp", [&] {
    auto d = mt::matmul(mt::leaky_relu(mt::matmul(gx, D1), 0.2), D2);
    auto g = mt::autograd::grad({d.sum()}, {gx}, {}, false, true)[0];
    mt::pow(mt::norm(g, 2, {1}) - 1.0, 2.0).mean().backward();
  });
  Tensor tc = leaf({32, 128, 256}), tk = leaf({128, 128, 5});
  cases.add("conv1d_temporal", [&] { F::conv1d(tc, tk, {}, {.padding = 2}).sum().backward(); });
  Tensor pm = leaf({32, 256, 512});
  Tensor pmask = mt::gt(mt::rand({32, 256, 1}), mt::full({}, 0.2)).to(mt::kFloat32);
  cases.add("masked_mean_pool", [&] { (mt::sum(pm * pmask, {1}) / mt::sum(pmask, {1})).sum().backward(); });
  Tensor gl = leaf({4096, 64});
  Tensor gu = mt::rand({4096, 64}) * 0.998 + 0.001;
  cases.add("gumbel_softmax", [&] {
    auto g = -mt::log(-mt::log(gu));
    mt::softmax((gl + g) / 0.5, -1).pow(2.0).sum().backward();
  });
  Tensor el = leaf({4096, 256});
  cases.add("entropy_reg", [&] {
    auto p = mt::softmax(el, -1);
    (-(p * mt::log_softmax(el, -1)).sum({-1})).mean().backward();
  });
  cases.add("standardize_dim0",
            [&] { ((el - mt::mean(el, {0}, true)) / mt::std(el, {0}, 1, true)).pow(2.0).sum().backward(); });
  Tensor big = leaf({1048576});
  cases.add("elu_by_where", [&] { mt::where(mt::gt(big, mt::zeros({})), big, mt::exp(big) - 1.0).sum().backward(); });
  Tensor ha = leaf({1024, 1024}), hb = mt::randn({1024, 1024});
  cases.add("huber_by_hand", [&] {
    auto d = ha - hb;
    auto ad = mt::abs(d);
    mt::where(mt::lt(ad, mt::ones({})), 0.5 * d * d, ad - 0.5).mean().backward();
  });
  Tensor ta = leaf({4096, 128}), tp = leaf({4096, 128}), tn = leaf({4096, 128});
  cases.add("triplet_by_hand",
            [&] { mt::relu(mt::norm(ta - tp, 2, {1}) - mt::norm(ta - tn, 2, {1}) + 1.0).mean().backward(); });
  Tensor wv = leaf({512, 512}), wg = leaf({512, 1}), wx = leaf({256, 512});
  cases.add("weight_norm", [&] { mt::matmul(wx, (wg * wv / mt::norm(wv, 2, {1}, true)).t()).sum().backward(); });
  Tensor fm = leaf({16, 64, 32, 32});
  cases.add("layer_norm_hw", [&] { F::layer_norm(fm, {32, 32}).pow(2.0).sum().backward(); });
  Tensor hw = leaf({10, 64}), hbias = leaf({10});
  cases.add("avgpool_head", [&] {
    F::cross_entropy(F::linear(F::adaptive_avg_pool2d(fm, {1, 1}).flatten(1), hw, hbias), mt::randint(0, 10, {16}))
        .backward();
  });
  Tensor bq = leaf({8, 8, 256, 64}), bw = leaf({64, 64});
  cases.add("bcast_matmul", [&] { mt::matmul(bq, bw).sum().backward(); });
  cases.add("nearest_up2x", [&] { F::interpolate(fm, {.scale_factor = {2.0}, .mode = "nearest"}).sum().backward(); });
  cases.add("softmax_channels", [&] { mt::softmax(fm, 1).pow(2.0).sum().backward(); });
  Tensor px = leaf({1024, 1024});
  cases.add("poly3", [&] { (px * px * px - 2.0 * px * px + px).sum().backward(); });
  Tensor sb = mt::rand({1024, 64}).requires_grad_(true);
  cases.add("stick_breaking", [&] { (sb * mt::cumprod(1.0 - sb, -1)).sum().backward(); });
  Tensor med = mt::randn({4096, 64});
  cases.add("sort_median", [&] {
    mt::NoGradGuard ng;
    keep_alive(mt::sort(med, -1).values.select(1, 32));
  });
  cases.add("std_last", [&] { mt::std(el, {-1}, 1).sum().backward(); });
  Tensor ls = leaf({4096, 1000});
  cases.add("temp_log_softmax", [&] { (-mt::log_softmax(ls / 2.0, -1).select(1, 7)).mean().backward(); });
  Tensor q8 = mt::randn({1024, 1024});
  cases.add("absmax_quant", [&] {
    mt::NoGradGuard ng;
    auto s = mt::amax(mt::abs(q8), {1}, true) / 127.0;
    keep_alive(mt::clamp(q8 / s + 128.0, 0.0, 255.0).to(mt::kUInt8));
  });
  Tensor ob = leaf({4096, 256}), ow = leaf({256, 256}), ob2 = leaf({256});
  cases.add("addmm_relu_3d", [&] { mt::relu(F::linear(ob.view({16, 256, 256}), ow, ob2)).sum().backward(); });
  return patterns::run_patterns(argc, argv, cases);
}
