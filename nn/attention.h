// MultiheadAttention: batch-first multi-head attention over the fused
// scaled_dot_product_attention op (autograd/ops.h).
#pragma once
#include "nn/linear.h"
#include "nn/module.h"

namespace mantissa::nn {

struct MultiheadAttentionOptions {
  bool bias = true;      // biases of the input and output projections
  double dropout = 0.0;  // on the attention probabilities, in training mode only
  bool causal = false;   // query i attends to keys j <= i only
};

// Projects queries, keys and values (one [3 D, D] input projection, as PyTorch's
// in_proj_weight), splits D into num_heads heads of D / num_heads, attends per head and
// projects the concatenated heads back (out_proj).
//
//   mt::nn::MultiheadAttention attn(512, 8, {.causal = true});
//   mt::Tensor y = attn(x);                                // self-attention, x [N, T, 512]
//   mt::Tensor z = attn.forward(q, kv, kv, padding);       // padding: bool [N, S], true = ignore key
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, const MultiheadAttentionOptions& options = {});
  Tensor forward(const Tensor& x) override;  // self-attention
  // query [N, L, D], key and value [N, S, D]; key_padding_mask: bool [N, S] (true marks a padded
  // key that no query may attend to) or undefined.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask = {});
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t embed_dim, num_heads;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;  // [3 D, D] and [3 D] (q, k, v rows in that order)
  Linear out_proj;
};

}  // namespace mantissa::nn
