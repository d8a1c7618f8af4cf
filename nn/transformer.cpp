#include "nn/transformer.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace mantissa::nn {

TransformerBlock::TransformerBlock(int64_t d, int64_t heads, const TransformerBlockOptions& o)
    : options(o),
      ln_1(d, {.elementwise_affine = true}),
      attn(d, heads, {.bias = o.bias, .dropout = o.dropout, .causal = o.causal}),
      ln_2(d),
      mlp_fc(d, o.mlp_ratio * d, o.bias),
      mlp_proj(o.mlp_ratio * d, d, o.bias),
      drop(o.dropout) {
  MT_CHECK(o.mlp_ratio > 0, "TransformerBlock", "mlp_ratio must be positive, got ", o.mlp_ratio);
  MT_CHECK(o.gelu_approximate == "none" || o.gelu_approximate == "tanh", "TransformerBlock",
           "gelu_approximate must be \"none\" or \"tanh\", got \"", o.gelu_approximate, "\"");
  if (!o.bias) {
    // LayerNorm keeps its bias parameter; without bias it is frozen at zero.
    ln_1.bias.requires_grad_(false);
    ln_2.bias.requires_grad_(false);
  }
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("mlp_fc", mlp_fc);
  register_module("mlp_proj", mlp_proj);
  register_module("drop", drop);
}

Tensor TransformerBlock::forward(const Tensor& x) { return forward(x, Tensor()); }

Tensor TransformerBlock::forward(const Tensor& x, const Tensor& key_padding_mask) {
  Tensor h = ln_1(x);
  Tensor a = key_padding_mask.defined() ? attn.forward(h, h, h, key_padding_mask) : attn(h);
  Tensor y = x + drop(a);
  return y + drop(mlp_proj(gelu(mlp_fc(ln_2(y)), options.gelu_approximate)));
}

GPT::GPT(const GPTConfig& c)
    : config(c), tok_emb(c.vocab_size, c.d_model), pos_emb(c.context, c.d_model), drop(c.dropout), ln_f(c.d_model) {
  MT_CHECK(
      c.vocab_size > 0 && c.context > 0 && c.n_layer >= 0 && c.d_model > 0 && c.n_head > 0 && c.d_model % c.n_head == 0,
      "GPT", "invalid config: vocab_size ", c.vocab_size, ", context ", c.context, ", n_layer ", c.n_layer, ", n_head ",
      c.n_head, ", d_model ", c.d_model, " (d_model must be a multiple of n_head)");
  register_module("tok_emb", tok_emb);
  register_module("pos_emb", pos_emb);
  register_module("drop", drop);
  for (int64_t i = 0; i < c.n_layer; ++i)
    blocks.push_back(std::make_shared<TransformerBlock>(c.d_model, c.n_head,
                                                        TransformerBlockOptions{.dropout = c.dropout, .bias = c.bias}));
  register_module("blocks", blocks);
  register_module("ln_f", ln_f);
  if (!c.tie_weights) head = register_module("head", std::make_shared<Linear>(c.d_model, c.vocab_size, false));
  reset_parameters();
}

void GPT::reset_parameters() {
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * double(std::max<int64_t>(config.n_layer, 1)));
  init::normal_(tok_emb.weight, 0, std);
  init::normal_(pos_emb.weight, 0, std);
  for (Module* m : blocks.children()) {
    auto& b = static_cast<TransformerBlock&>(*m);
    init::normal_(b.attn.in_proj_weight, 0, std);
    init::normal_(b.attn.out_proj.weight, 0, proj_std);
    init::normal_(b.mlp_fc.weight, 0, std);
    init::normal_(b.mlp_proj.weight, 0, proj_std);
    for (Tensor t : {b.attn.in_proj_bias, b.attn.out_proj.bias, b.mlp_fc.bias, b.mlp_proj.bias})
      if (t.defined()) init::zeros_(t);
    b.ln_1.reset_parameters();
    b.ln_2.reset_parameters();
  }
  ln_f.reset_parameters();
  if (head) init::normal_(head->weight, 0, std);
}

Tensor GPT::forward(const Tensor& tokens) {
  MT_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.dtype() == DType::Int64, "GPT",
           "expected int64 tokens [N, T], got ", tokens.defined() ? tokens.shape_str() : "an undefined tensor");
  const int64_t T = tokens.size(1);
  MT_CHECK(T <= config.context, "GPT", "sequence length ", T, " exceeds the context of ", config.context);
  Tensor pos = arange(T, {.dtype = DType::Int64, .device = tokens.device()});
  Tensor h = drop(tok_emb(tokens) + pos_emb(pos));
  for (Module* b : blocks.children()) h = (*b)(h);
  return functional::linear(ln_f(h), head_weight());
}

std::string GPT::extra_repr() const {
  return mantissa::detail::concat("vocab_size=", config.vocab_size, ", context=", config.context,
                                  ", n_layer=", config.n_layer, ", n_head=", config.n_head,
                                  ", d_model=", config.d_model,
                                  ", tie_weights=", config.tie_weights ? "true" : "false");
}

}  // namespace mantissa::nn
