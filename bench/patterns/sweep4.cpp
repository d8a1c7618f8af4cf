// User-model patterns from primitives and nn layers (fourth sweep: RMSNorm, rotary embeddings, a
// SwiGLU gate, causal softmax, cross-entropy, topk / sort, ...): each case forward + backward,
// printed with its best time in us. sweep4.py is its PyTorch twin (the same cases, names and
// sizes); tools/patterns.sh sweep4 runs both alternately. Args: a case-name filter; env PROF=1
// prints the profiler table per case.
#include "pattern_main.h"

int main(int argc, char** argv) {
  mt::manual_seed(0);
  patterns::Cases cases;
  // [8, 512, 256] activations (1M), [4096, 256]
  Tensor x = leaf({8, 512, 256}), w = leaf({256});
  cases.add("rmsnorm_prims", [&] { (x * mt::rsqrt(mt::mean(x * x, {-1}, true) + 1e-6) * w).sum().backward(); });
  cases.add("rmsnorm_fused", [&] { F::rms_norm(x, {256}, w).sum().backward(); });
  Tensor q = leaf({8, 8, 512, 32}), cosv = mt::randn({512, 32}), sinv = mt::randn({512, 32});
  cases.add("rope", [&] {
    auto parts = mt::chunk(q, 2, -1);
    auto rot = mt::cat({-parts[1], parts[0]}, -1);
    (q * cosv + rot * sinv).sum().backward();
  });
  Tensor h = leaf({2048, 512}), w1 = leaf({512, 512}), w3 = leaf({512, 512});
  cases.add("swiglu_gate", [&] { (mt::silu(h) * w3.sum() + mt::silu(h) * h).sum().backward(); });
  Tensor s = leaf({8, 8, 128, 128});
  Tensor causal = mt::triu(mt::ones({128, 128}), 1).to(mt::kBool);
  cases.add("causal_softmax", [&] { mt::softmax(mt::masked_fill(s, causal, -INFINITY), -1).sum().backward(); });
  cases.add("tril_mask_build", [&] { mt::tril(mt::ones({512, 512})); });
  Tensor logits = leaf({4096, 256});
  Tensor tgt = mt::randint(0, 256, {4096});
  cases.add("ce_label_smooth", [&] { F::cross_entropy(logits, tgt, {.label_smoothing = 0.1}).backward(); });
  cases.add("ce_plain", [&] { F::cross_entropy(logits, tgt).backward(); });
  Tensor big = mt::randn({1024, 1024});
  cases.add("topk_k8_last", [&] { mt::topk(big, 8, -1); });
  cases.add("sort_last", [&] { mt::sort(big, -1); });
  cases.add("argsort_dim0", [&] { mt::argsort(big, 0); });
  Tensor cs = leaf({1024, 1024});
  cases.add("cumsum_last", [&] { mt::cumsum(cs, -1).sum().backward(); });
  cases.add("cumsum_dim0", [&] { mt::cumsum(cs, 0).sum().backward(); });
  Tensor a = leaf({4096, 256}), b = leaf({4096, 256});
  cases.add("cosine_sim_prims",
            [&] { ((a * b).sum({-1}) / (mt::norm(a, 2, {-1}) * mt::norm(b, 2, {-1}) + 1e-8)).sum().backward(); });
  cases.add("abs_sign_sqrt", [&] { (mt::sqrt(mt::abs(cs) + 1) * mt::sign(cs)).sum().backward(); });
  cases.add("pow2_mean", [&] { mt::pow(cs, 2).mean().backward(); });
  cases.add("stack_3", [&] { mt::stack({a, b, a}, 0).sum().backward(); });
  cases.add("split_cat", [&] {
    auto p = mt::split(cs, 256, 1);
    mt::cat({p[3], p[2], p[1], p[0]}, 1).sum().backward();
  });
  cases.add("clamp_min_max", [&] { mt::clamp(cs, -0.5, 0.5).sum().backward(); });
  cases.add("where_scalar", [&] { mt::where(cs > 0.0, cs, cs * 0.1).sum().backward(); });
  cases.add("exp_log", [&] { mt::log(mt::exp(cs) + 1.0).sum().backward(); });
  cases.add("sigmoid_bce_prims", [&] {
    auto p = mt::sigmoid(cs);
    (-(big.gt(mt::scalar_tensor(0.0)).to(mt::kFloat32) * mt::log(p + 1e-7))).mean().backward();
  });
  cases.add("mish", [&] { mt::mish(cs).sum().backward(); });
  cases.add("logsigmoid", [&] { mt::logsigmoid(cs).sum().backward(); });
  cases.add("erf", [&] { mt::erf(cs).sum().backward(); });
  cases.add("reciprocal", [&] { mt::reciprocal(cs + 3.0).sum().backward(); });
  cases.add("softplus", [&] { mt::softplus(cs).sum().backward(); });
  cases.add("max_dim_values", [&] { mt::max(cs, 1).values.sum().backward(); });
  cases.add("argmax_eq_mean", [&] { mt::eq(mt::argmax(big, 1), mt::argmax(big, 1)).to(mt::kFloat32).mean(); });
  cases.add("one_hot", [&] { mt::one_hot(tgt, 256); });
  Tensor bb = leaf({64, 128, 64}), bc = leaf({64, 64, 128});
  cases.add("bmm_fwdbwd", [&] { mt::bmm(bb, bc).sum().backward(); });
  Tensor bbc = leaf({1, 64, 128});
  cases.add("matmul_bcast", [&] { mt::matmul(bb, bbc).sum().backward(); });
  cases.add("transpose_reshape", [&] { q.transpose(1, 2).reshape({8, 512, 256}).sum().backward(); });
  cases.add("var_mean_lastdim", [&] { (mt::var(x, {-1}, 1, true) + mt::mean(x, {-1}, true)).sum().backward(); });
  cases.add("norm_all", [&] { mt::norm(cs, 2, {}).backward(); });
  cases.add("expand_mul_sum", [&] { (cs.unsqueeze(0).expand({4, 1024, 1024}) * 2.0).sum().backward(); });
  cases.add("neg_sub_div", [&] { ((cs - 1.0) / (-cs + 3.0)).sum().backward(); });
  return patterns::run_patterns(argc, argv, cases);
}
