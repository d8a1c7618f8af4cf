// The recurrent alternative to the GPT (--model lstm): a character-level LSTM language model,
// tokens [B, T] -> embedding [B, T, d] -> LSTM (layers, batch_first, dropout between layers)
// -> linear head -> logits [B, T, V]. Each window starts from zero states, as the GPT starts
// from an empty context.
#pragma once
#include <mantissa.h>

namespace gpt_example {

class LstmLm : public mantissa::nn::Module {
 public:
  LstmLm(int64_t vocab, int64_t width, int64_t layers, double dropout)
      : embed(vocab, width),
        lstm(
            {.input_size = width, .hidden_size = width, .num_layers = layers, .batch_first = true, .dropout = dropout}),
        head(width, vocab) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("head", head);
  }
  mantissa::Tensor forward(const mantissa::Tensor& tokens) override { return head(lstm(embed(tokens))); }

  mantissa::nn::Embedding embed;
  mantissa::nn::LSTM lstm;
  mantissa::nn::Linear head;
};

}  // namespace gpt_example
