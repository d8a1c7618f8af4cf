#include "nn/linear.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace mantissa::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  MT_CHECK(in >= 0 && out >= 0, "Linear", "features must be non-negative, got in=", in, ", out=", out);
  weight = register_parameter("weight", empty({out, in}));
  bias = register_parameter("bias", with_bias ? empty({out}) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double b = in_features > 0 ? 1.0 / std::sqrt(double(in_features)) : 0.0;
    init::uniform_(bias, -b, b);
  }
}

Tensor Linear::forward(const Tensor& x) { return functional::linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return mantissa::detail::concat("in_features=", in_features, ", out_features=", out_features,
                                  ", bias=", bias.defined() ? "true" : "false");
}

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad)
    : num_embeddings(num), embedding_dim(dim), padding_idx(pad) {
  MT_CHECK(num >= 0 && dim >= 0, "Embedding", "sizes must be non-negative, got ", num, " x ", dim);
  if (padding_idx) {
    MT_CHECK(*padding_idx >= -num && *padding_idx < num, "Embedding", "padding_idx ", *padding_idx,
             " is out of range for ", num, " embeddings");
    if (*padding_idx < 0) *padding_idx += num;
  }
  weight = register_parameter("weight", empty({num, dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard guard;
    weight.select(0, *padding_idx).fill_(0);
  }
}

Tensor Embedding::forward(const Tensor& indices) { return functional::embedding(indices, weight, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string s = mantissa::detail::concat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += mantissa::detail::concat(", padding_idx=", *padding_idx);
  return s;
}

}  // namespace mantissa::nn
