// TransformerBlock (pre-LayerNorm, GPT-2 style) and GPT, a decoder-only language model.
#pragma once
#include <memory>
#include <string>

#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace mantissa::nn {

struct TransformerBlockOptions {
  double dropout = 0.0;                   // attention probabilities and both residual branches
  bool bias = true;                       // every Linear and LayerNorm bias
  bool causal = true;                     // decoder self-attention
  int64_t mlp_ratio = 4;                  // hidden width of the MLP, in multiples of d_model
  std::string gelu_approximate = "tanh";  // GPT-2's GELU; "none" for the erf form
};

// x + drop(attn(ln_1(x))), then x + drop(mlp_proj(gelu(mlp_fc(ln_2(x))))) for x [N, T, d_model].
//
//   mt::nn::TransformerBlock block(128, 4, {.dropout = 0.1});
//   mt::Tensor y = block(x);
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t num_heads, const TransformerBlockOptions& options = {});
  Tensor forward(const Tensor& x) override;
  // With a key-padding mask (bool [N, T], true = padding) for the attention.
  Tensor forward(const Tensor& x, const Tensor& key_padding_mask);

  TransformerBlockOptions options;
  LayerNorm ln_1;
  MultiheadAttention attn;
  LayerNorm ln_2;
  Linear mlp_fc, mlp_proj;
  Dropout drop;
};

struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t context = 128;  // the longest sequence (learned position embeddings)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 128;
  double dropout = 0.0;
  bool bias = true;
  bool tie_weights = true;  // the output head reuses the token embedding matrix
};

// Token + learned position embeddings, n_layer TransformerBlocks, a final LayerNorm and a
// linear head to vocab_size logits (the token embedding itself when tie_weights).
// Initialization as GPT-2: weights N(0, 0.02), residual output projections N(0, 0.02 /
// sqrt(2 n_layer)), biases 0, LayerNorms 1 and 0.
//
//   mt::nn::GPT gpt({.vocab_size = 65, .context = 128});
//   mt::Tensor logits = gpt(tokens);            // int64 [N, T] -> [N, T, 65]
class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config);
  Tensor forward(const Tensor& tokens) override;
  void reset_parameters();
  std::string extra_repr() const override;
  // The output head's weight [vocab_size, d_model] (the token embedding when tied).
  const Tensor& head_weight() const { return config.tie_weights ? tok_emb.weight : head->weight; }

  GPTConfig config;
  Embedding tok_emb, pos_emb;
  Dropout drop;
  ModuleList blocks;
  LayerNorm ln_f;
  std::shared_ptr<Linear> head;  // null when tied
};

}  // namespace mantissa::nn
