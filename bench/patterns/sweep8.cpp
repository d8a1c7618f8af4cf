// User-model patterns from primitives and nn layers (eighth sweep: nn::LSTM / GRU, BatchNorm1d,
// MultiheadAttention, a conv critic's gradient penalty, ...): each case forward + backward, printed
// with its best time in us. sweep8.py is its PyTorch twin (the same cases, names and sizes);
// tools/patterns.sh sweep8 runs both alternately. Args: a case-name filter; env PROF=1 prints the
// profiler table per case, AMP=1 runs under bf16 autocast.
#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  Tensor cimg = leaf({64, 3, 32, 32}), cw1 = leaf({64, 3, 4, 4}), cw2 = leaf({128, 64, 4, 4}),
         cl = leaf({1, 128 * 8 * 8});
  cases.add("conv_critic_gp", [&] {
    Tensor xi = cimg.detach().requires_grad_(true);
    auto h = mt::leaky_relu(F::conv2d(xi, cw1, {}, {.stride = 2, .padding = 1}), 0.2);
    h = mt::leaky_relu(F::conv2d(h, cw2, {}, {.stride = 2, .padding = 1}), 0.2);
    auto d = F::linear(h.flatten(1), cl);
    auto g = mt::autograd::grad({d.sum()}, {xi}, {}, false, true)[0];
    mt::pow(mt::norm(g.flatten(1), 2, {1}) - 1.0, 2.0).mean().backward();
  });
  nn::LSTM lstm({.input_size = 128, .hidden_size = 256, .batch_first = true});
  Tensor lx = mt::randn({32, 64, 128});
  cases.add("lstm_module", [&] { lstm.forward(lx).sum().backward(); });
  nn::GRU gru({.input_size = 128, .hidden_size = 256, .batch_first = true});
  cases.add("gru_module", [&] { gru.forward(lx).sum().backward(); });
  nn::BatchNorm1d bn1(256);
  Tensor tab = leaf({4096, 256});
  cases.add("batchnorm1d_tabular", [&] { bn1(tab).pow(2.0).sum().backward(); });
  nn::MultiheadAttention mha(256, 8, {.causal = true});
  Tensor mx = leaf({16, 128, 256});
  cases.add("mha_module", [&] { mha(mx).sum().backward(); });
  Tensor vimg = leaf({32, 3, 64, 64}), pw = leaf({192, 3, 8, 8}), pb = leaf({192});
  cases.add("vit_patch_embed",
            [&] { F::conv2d(vimg, pw, pb, {.stride = 8}).flatten(2).transpose(1, 2).sum().backward(); });
  Tensor etab = leaf({50000, 128});
  Tensor eidx = mt::randint(0, 50000, {512, 32});
  cases.add("embedding_bag_mean", [&] { mt::mean(F::embedding(eidx, etab), {1}).sum().backward(); });
  Tensor dx = leaf({16, 64, 32, 32}), dk = leaf({64, 64, 3, 3});
  cases.add("dilated_conv", [&] { F::conv2d(dx, dk, {}, {.padding = 2, .dilation = 2}).sum().backward(); });
  Tensor huge = leaf({16777216});
  cases.add("sum_16M", [&] { huge.sum().backward(); });
  Tensor bfw1 = mt::randn({784, 512}).to(mt::kBFloat16).requires_grad_(true),
         bfw2 = mt::randn({512, 10}).to(mt::kBFloat16).requires_grad_(true);
  Tensor bfx = mt::randn({256, 784}).to(mt::kBFloat16);
  Tensor bft = mt::randint(0, 10, {256});
  cases.add("pure_bf16_mlp",
            [&] { F::cross_entropy(mt::matmul(mt::relu(mt::matmul(bfx, bfw1)), bfw2), bft).backward(); });
  Tensor rx = leaf({64, 512}), rw = leaf({512, 512}), rb = leaf({512});
  cases.add("residual_mlp_x8", [&] {
    Tensor h = rx;
    for (int i = 0; i < 8; ++i) h = h + mt::gelu(F::linear(F::layer_norm(h, {512}), rw, rb));
    h.sum().backward();
  });
  Tensor sx = leaf({64, 512});
  cases.add("many_small_ops", [&] {
    Tensor h = sx;
    for (int i = 0; i < 50; ++i) h = mt::tanh(h * 0.9 + 0.1);
    h.sum().backward();
  });
  Tensor tq = leaf({8, 8, 128, 32}), tk = leaf({8, 8, 128, 32});
  cases.add("attn_scores_perm", [&] {
    auto s = mt::matmul(tq, tk.transpose(-2, -1)) / 5.66;
    mt::softmax(s, -1).sum().backward();
  });
  return patterns::run_patterns(argc, argv, cases);
}
