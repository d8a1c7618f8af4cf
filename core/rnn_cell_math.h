// The pointwise math of the fused LSTM and GRU cells, written once for the CPU
// (core/cpu/nn_rnn.cpp) and CUDA (cuda/nn_rnn.cu) kernels: one hidden unit j of one row, in
// the compute type A (float for fp16/bf16/fp32, double for fp64). The kernels' contracts
// (shapes, gate order) are in core/nn_kernels.h; the matrix products feeding the gates are
// GEMMs done before (nn/functional_rnn.cpp).
#pragma once
#include <cmath>

#include "core/elementwise_math.h"  // math::sigmoid

namespace mantissa::math {

// LSTM, gate order i, f, g, o (torch's): pre-activations xi..xo (the input and hidden halves
// summed), the previous cell state c. Activated gates a[4], the new cell and hidden state.
template <typename A>
struct LstmCellValues {
  A a[4];
  A c_new, h_new;
};
template <typename A>
MT_HOST_DEVICE LstmCellValues<A> lstm_cell_forward(const A pre[4], A c) {
  LstmCellValues<A> v;
  v.a[0] = sigmoid(pre[0]);
  v.a[1] = sigmoid(pre[1]);
  v.a[2] = std::tanh(pre[2]);
  v.a[3] = sigmoid(pre[3]);
  v.c_new = v.a[1] * c + v.a[0] * v.a[2];
  v.h_new = v.a[3] * std::tanh(v.c_new);
  return v;
}

// Backward of one LSTM unit: gh, gc the gradients of h_new and c_new; a the activated gates;
// c the previous cell, c_new the new one. Writes the pre-activations' gradient gpre[4] and
// returns the previous cell's gradient.
template <typename A>
MT_HOST_DEVICE A lstm_cell_backward(A gh, A gc, const A a[4], A c, A c_new, A gpre[4]) {
  const A tc = std::tanh(c_new);
  const A gcn = gc + gh * a[3] * (A(1) - tc * tc);  // total gradient of c_new
  gpre[0] = gcn * a[2] * a[0] * (A(1) - a[0]);
  gpre[1] = gcn * c * a[1] * (A(1) - a[1]);
  gpre[2] = gcn * a[0] * (A(1) - a[2] * a[2]);
  gpre[3] = gh * tc * a[3] * (A(1) - a[3]);
  return gcn * a[1];
}

// GRU, gate order r, z, n (torch's): x[3] the input half (with b_ih), hh[3] the hidden half
// (with b_hh, so n = tanh(x_n + r * hh_n) as torch computes it), h the previous state.
// ws[4] = r, z, n, hh_n (kept for backward); returns the new state (1 - z) n + z h.
template <typename A>
MT_HOST_DEVICE A gru_cell_forward(const A x[3], const A hh[3], A h, A ws[4]) {
  const A r = sigmoid(x[0] + hh[0]);
  const A z = sigmoid(x[1] + hh[1]);
  const A n = std::tanh(x[2] + r * hh[2]);
  ws[0] = r;
  ws[1] = z;
  ws[2] = n;
  ws[3] = hh[2];
  return (A(1) - z) * n + z * h;
}

// Backward of one GRU unit: g the gradient of the new state, ws the forward's r, z, n, hh_n,
// h the previous state. Writes the gradients of the input half gx[3] and the hidden half
// gh[3], and returns the previous state's direct gradient (g z; the path through hh is the
// hidden GEMM's).
template <typename A>
MT_HOST_DEVICE A gru_cell_backward(A g, const A ws[4], A h, A gx[3], A gh[3]) {
  const A r = ws[0], z = ws[1], n = ws[2], hn = ws[3];
  const A gn = g * (A(1) - z) * (A(1) - n * n);  // of n's pre-activation
  const A gz = g * (h - n) * z * (A(1) - z);
  const A gr = gn * hn * r * (A(1) - r);
  gx[0] = gr;
  gx[1] = gz;
  gx[2] = gn;
  gh[0] = gr;
  gh[1] = gz;
  gh[2] = gn * r;
  return g * z;
}

}  // namespace mantissa::math
