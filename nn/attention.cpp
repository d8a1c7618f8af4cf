#include "nn/attention.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace mantissa::nn {

MultiheadAttention::MultiheadAttention(int64_t d, int64_t heads, const MultiheadAttentionOptions& opts)
    : embed_dim(d), num_heads(heads), options(opts), out_proj(d, d, opts.bias) {
  MT_CHECK(d > 0 && heads > 0 && d % heads == 0, "MultiheadAttention", "embed_dim ", d,
           " must be a positive multiple of num_heads ", heads);
  MT_CHECK(opts.dropout >= 0 && opts.dropout < 1, "MultiheadAttention", "dropout must be in [0, 1), got ",
           opts.dropout);
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * d, d}));
  in_proj_bias = register_parameter("in_proj_bias", opts.bias ? empty({3 * d}) : Tensor());
  register_module("out_proj", out_proj);
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  // PyTorch's choice: Xavier-uniform input projection, zero biases.
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  out_proj.reset_parameters();
  if (out_proj.bias.defined()) init::zeros_(out_proj.bias);
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x); }

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask) {
  const char* op = "MultiheadAttention";
  MT_CHECK(query.defined() && query.dim() == 3 && query.size(2) == embed_dim, op, "expected query [N, L, ", embed_dim,
           "], got ", query.defined() ? query.shape_str() : "an undefined tensor");
  MT_CHECK(key.defined() && value.defined() && key.dim() == 3 && key.sizes() == value.sizes() &&
               key.size(0) == query.size(0) && key.size(2) == embed_dim,
           op, "expected key and value [", query.size(0), ", S, ", embed_dim, "], got ", key.shape_str(), " and ",
           value.shape_str());
  const int64_t N = query.size(0), L = query.size(1), S = key.size(1), hd = embed_dim / num_heads;
  const int64_t D = embed_dim;
  // [N, T, D] -> [N, H, T, hd]
  auto heads = [&](const Tensor& t, int64_t T) { return t.reshape({N, T, num_heads, hd}).transpose(1, 2); };
  auto rows = [&](int64_t i) {
    return std::pair{in_proj_weight.narrow(0, i * D, D),
                     in_proj_bias.defined() ? in_proj_bias.narrow(0, i * D, D) : Tensor()};
  };
  Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {
    // Self-attention: one GEMM for the three projections.
    Tensor qkv = functional::linear(query, in_proj_weight, in_proj_bias).reshape({N, L, 3, num_heads, hd});
    qkv = qkv.permute({2, 0, 3, 1, 4});  // [3, N, H, L, hd]
    q = qkv.select(0, 0);
    k = qkv.select(0, 1);
    v = qkv.select(0, 2);
  } else {
    auto [wq, bq] = rows(0);
    auto [wk, bk] = rows(1);
    auto [wv, bv] = rows(2);
    q = heads(functional::linear(query, wq, bq), L);
    k = heads(functional::linear(key, wk, bk), S);
    v = heads(functional::linear(value, wv, bv), S);
  }
  AttentionOptions ao{.is_causal = options.causal, .dropout_p = is_training() ? options.dropout : 0.0};
  if (key_padding_mask.defined()) {
    MT_CHECK(key_padding_mask.dtype() == DType::Bool && key_padding_mask.sizes() == Shape({N, S}), op,
             "key_padding_mask must be bool [", N, ", ", S, "] (true = padding), got ", key_padding_mask.shape_str(),
             " ", dtype_name(key_padding_mask.dtype()));
    ao.attn_mask = logical_not(key_padding_mask).reshape({N, 1, 1, S});
  }
  Tensor y = scaled_dot_product_attention(q, k, v, ao);  // [N, H, L, hd]
  return out_proj(y.transpose(1, 2).reshape({N, L, D}));
}

std::string MultiheadAttention::extra_repr() const {
  return mantissa::detail::concat("embed_dim=", embed_dim, ", num_heads=", num_heads, ", dropout=", options.dropout,
                                  ", causal=", options.causal ? "true" : "false");
}

}  // namespace mantissa::nn
