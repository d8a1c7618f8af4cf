// Linear and Embedding layers.
#pragma once
#include <optional>

#include "nn/module.h"

namespace mantissa::nn {

// y = x W^T + b, with weight [out, in] and bias [out]; initialized as PyTorch
// (kaiming_uniform(a = sqrt(5)) weight, U(-1/sqrt(in), 1/sqrt(in)) bias).
//
//   mt::nn::Linear fc(784, 256);
//   mt::Tensor y = fc(x);              // x [..., 784] -> y [..., 256]
//   fc.weight.shape_str();             // "[256, 784]"
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when constructed with bias = false
};

// A lookup table: row i of weight [num_embeddings, embedding_dim] for each index i.
// Initialized N(0, 1); the padding_idx row (if any) starts at zero and gets no gradient.
//
//   mt::nn::Embedding emb(10000, 512, /*padding_idx=*/0);
//   mt::Tensor h = emb(tokens);        // int64 [B, T] -> [B, T, 512]
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // stored non-negative
  Tensor weight;
};

}  // namespace mantissa::nn
