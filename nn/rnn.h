// Recurrent layers as torch.nn has them: RNN, LSTM and GRU (stacked layers, bidirectional,
// batch_first, dropout between layers, initial states) and the one-step RNNCell, LSTMCell and
// GRUCell. Parameter names, shapes, gate order and initialisation are torch's, so state dicts
// interchange: weight_ih_l{k}[_reverse] [G H, in], weight_hh_l{k}[_reverse] [G H, H],
// bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse] [G H], G = 4 (LSTM: i, f, g, o), 3 (GRU:
// r, z, n), 1 (RNN). Each layer and direction runs its input GEMM once for the whole sequence,
// as one autograd node per layer and direction (F::recurrent_layer, nn/functional_rnn.h): per
// step one hidden GEMM and one fused cell kernel, and backpropagation through time in one pass.
//
//   mt::nn::LSTM lstm({.input_size = 32, .hidden_size = 64, .num_layers = 2, .bidirectional = true});
//   auto [out, h_n, c_n] = lstm.forward_with_state(x);   // x [T, N, 32] -> out [T, N, 128]
//   mt::Tensor y = lstm(x);                               // the output alone
#pragma once
#include <string>

#include "nn/functional_rnn.h"
#include "nn/module.h"

namespace mantissa::nn {

struct RNNOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" or "relu"
  bool bias = true;
  bool batch_first = false;  // input and output [N, T, ...] instead of [T, N, ...] (states stay [L D, N, H])
  double dropout = 0;        // on each layer's output but the last, in training
  bool bidirectional = false;
};

// output [T, N, D H] ([N, T, D H] with batch_first; [T, D H] unbatched); h_n and, for the LSTM,
// c_n [L D, N, H] ([L D, H] unbatched), D = 2 when bidirectional.
struct RNNOutput {
  Tensor output, h_n, c_n;
};

class RNNBase : public Module {
 public:
  // x [T, N, input_size] ([N, T, ..] with batch_first, or [T, input_size] unbatched); h0, c0
  // [L D, N, H] or undefined (zeros). c0 only for the LSTM.
  RNNOutput forward_with_state(const Tensor& x, const Tensor& h0 = {}, const Tensor& c0 = {});
  Tensor forward(const Tensor& x) override { return forward_with_state(x).output; }
  void reset_parameters();  // every weight and bias uniform in +-1/sqrt(hidden_size), as torch
  std::string extra_repr() const override;
  // The parameters of layer `layer`, direction `dir` (1: reverse): w_ih, w_hh, b_ih, b_hh.
  std::vector<Tensor> layer_parameters(int64_t layer, int64_t dir) const;

  RNNOptions options;

 protected:
  RNNBase(functional::RecurrentCell cell, const char* type, const RNNOptions& options);

 private:
  functional::RecurrentCell cell_;
  const char* type_;
  int64_t gates() const;
};

// Elman RNN: h' = tanh (or relu)(x w_ih^T + b_ih + h w_hh^T + b_hh).
class RNN : public RNNBase {
 public:
  explicit RNN(const RNNOptions& options);
};

class LSTM : public RNNBase {
 public:
  explicit LSTM(const RNNOptions& options);
};

class GRU : public RNNBase {
 public:
  explicit GRU(const RNNOptions& options);
};

// One step: weight_ih [G H, in], weight_hh [G H, H], bias_ih, bias_hh [G H] (torch's names).
class RNNCellBase : public Module {
 public:
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t input_size, hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  RNNCellBase(int64_t input_size, int64_t hidden_size, bool bias, int64_t gates, const char* type);
  // h (or undefined: zeros) in x's batch layout: [N, H] for x [N, in], [H] for x [in].
  Tensor state_or_zeros(const Tensor& x, const Tensor& h) const;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh");
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  Tensor forward(const Tensor& x, const Tensor& h);  // h'
  std::string nonlinearity;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor(), Tensor()).first; }
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& h, const Tensor& c);  // (h', c')
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()); }
  Tensor forward(const Tensor& x, const Tensor& h);  // h'
};

}  // namespace mantissa::nn
