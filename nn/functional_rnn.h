// Recurrent cells, as functions (torch's lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell):
// one time step. x [N, I] (or [I]: unbatched), h and c [N, H] (or [H]); w_ih [G H, I], w_hh
// [G H, H], b_ih and b_hh [G H] or undefined, with G = 4 (LSTM: gates i, f, g, o), 3 (GRU:
// r, z, n) or 1 (RNN). The LSTM and GRU pointwise parts are one fused kernel per step
// (core/nn_kernels.h); under mt::amp::Autocast the cells run in fp16/bf16 (their GEMMs with
// fp32 accumulation), as torch's CUDA autocast lists lstm_cell, gru_cell and rnn_*_cell.
//
//   auto [h1, c1] = F::lstm_cell(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
#pragma once
#include <utility>

#include "core/tensor.h"

namespace mantissa::nn::functional {

// Returns (h', c').
std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                                    const Tensor& w_hh, const Tensor& b_ih = {}, const Tensor& b_hh = {});
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = {},
                const Tensor& b_hh = {});
Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = {},
                     const Tensor& b_hh = {});
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih = {},
                     const Tensor& b_hh = {});

// The fused pointwise parts alone, for callers that compute the GEMMs themselves (nn::LSTM and
// nn::GRU run the input GEMM once for all time steps): gates_x = x w_ih^T + b_ih and gates_h
// = h w_hh^T + b_hh, [N, 4H] (LSTM) or [N, 3H] (GRU); c, h [N, H]. Differentiable in all inputs.
std::pair<Tensor, Tensor> lstm_cell_gates(const Tensor& gates_x, const Tensor& gates_h, const Tensor& c);
Tensor gru_cell_gates(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h);

// One layer and direction of nn::RNN/LSTM/GRU over a whole sequence, as one autograd node
// whose backward runs backpropagation through time in one pass (as cuDNN's RNN does): per
// step one hidden GEMM and the cell kernel forward, the fused cell backward and one GEMM
// back, and the hidden weight's gradient as one GEMM over all steps. Per-step cells recorded
// one by one would cost a gradient of the whole gates_x per step (quadratic in T).
// gates_x [T, N, G H] = x w_ih^T + b_ih for all steps; w_hh [G H, H]; b_hh [G H] or
// undefined; h0, c0 [N, H] (c0: LSTM only). reverse runs t = T-1 .. 0. Returns output
// [T, N, H] (h_t at row t) and the final states h_n, c_n [N, H]. Double backward is not
// supported here (the cells above support it).
enum class RecurrentCell { Tanh, Relu, Lstm, Gru };
struct RecurrentLayerOutput {
  Tensor output, h_n, c_n;
};
RecurrentLayerOutput recurrent_layer(RecurrentCell cell, const Tensor& gates_x, const Tensor& w_hh, const Tensor& b_hh,
                                     const Tensor& h0, const Tensor& c0, bool reverse);

}  // namespace mantissa::nn::functional
