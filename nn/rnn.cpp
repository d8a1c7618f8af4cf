// RNN, LSTM, GRU and their cells (nn/rnn.h): torch's parameters and semantics, the steps
// through nn/functional_rnn.h.
#include "nn/rnn.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/tensor_methods.h"
#include "core/error.h"
#include "core/shape.h"
#include "nn/functional.h"
#include "nn/functional_rnn.h"
#include "nn/init.h"

namespace mantissa::nn {

namespace F = functional;

namespace {

std::string layer_suffix(int64_t layer, int64_t dir) {
  return "_l" + std::to_string(layer) + (dir == 1 ? "_reverse" : "");
}

void init_uniform(const std::vector<Tensor>& ps, int64_t hidden) {
  const double k = hidden > 0 ? 1.0 / std::sqrt(double(hidden)) : 0.0;
  for (const Tensor& p : ps)
    if (p.defined()) init::uniform_(p, -k, k);
}

}  // namespace

RNNBase::RNNBase(functional::RecurrentCell cell, const char* type, const RNNOptions& o)
    : options(o), cell_(cell), type_(type) {
  MT_CHECK(o.input_size > 0 && o.hidden_size > 0 && o.num_layers > 0, type,
           "input_size, hidden_size and num_layers must be positive, got ", o.input_size, ", ", o.hidden_size, ", ",
           o.num_layers);
  MT_CHECK(o.dropout >= 0 && o.dropout <= 1, type, "dropout must be in [0, 1], got ", o.dropout);
  const int64_t G = gates(), H = o.hidden_size;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const int64_t in = l == 0 ? o.input_size : H * (o.bidirectional ? 2 : 1);
    for (int64_t d = 0; d < (o.bidirectional ? 2 : 1); ++d) {
      const std::string s = layer_suffix(l, d);
      register_parameter("weight_ih" + s, empty({G * H, in}));
      register_parameter("weight_hh" + s, empty({G * H, H}));
      if (o.bias) {
        register_parameter("bias_ih" + s, empty({G * H}));
        register_parameter("bias_hh" + s, empty({G * H}));
      }
    }
  }
  reset_parameters();
}

int64_t RNNBase::gates() const { return cell_ == F::RecurrentCell::Lstm ? 4 : cell_ == F::RecurrentCell::Gru ? 3 : 1; }

std::vector<Tensor> RNNBase::layer_parameters(int64_t layer, int64_t dir) const {
  const std::string s = layer_suffix(layer, dir);
  auto named = named_parameters();
  auto get = [&](const std::string& name) {
    for (auto& [n, p] : named)
      if (n == name) return p;
    return Tensor();
  };
  return {get("weight_ih" + s), get("weight_hh" + s), get("bias_ih" + s), get("bias_hh" + s)};
}

void RNNBase::reset_parameters() { init_uniform(parameters(), options.hidden_size); }

std::string RNNBase::extra_repr() const {
  std::string s = mantissa::detail::concat(options.input_size, ", ", options.hidden_size);
  if (options.num_layers != 1) s += mantissa::detail::concat(", num_layers=", options.num_layers);
  if (cell_ == F::RecurrentCell::Relu) s += ", nonlinearity='relu'";
  if (!options.bias) s += ", bias=false";
  if (options.batch_first) s += ", batch_first=true";
  if (options.dropout != 0) s += mantissa::detail::concat(", dropout=", options.dropout);
  if (options.bidirectional) s += ", bidirectional=true";
  return s;
}

RNNOutput RNNBase::forward_with_state(const Tensor& x0, const Tensor& h0, const Tensor& c0) {
  const RNNOptions& o = options;
  MT_CHECK(x0.defined() && (x0.dim() == 2 || x0.dim() == 3), type_, "expected a 3-D input [",
           o.batch_first ? "N, T" : "T, N", ", ", o.input_size, "] or a 2-D unbatched one, got ",
           x0.defined() ? x0.shape_str() : "undefined");
  MT_CHECK(is_floating(x0.dtype()), type_, "expected a floating-point input, got ", dtype_name(x0.dtype()));
  MT_CHECK(x0.size(x0.dim() - 1) == o.input_size, type_, "input_size is ", o.input_size, ", got an input ",
           x0.shape_str());
  MT_CHECK(cell_ == F::RecurrentCell::Lstm || !c0.defined(), type_, "only the LSTM has a cell state c0");
  const bool unbatched = x0.dim() == 2;
  Tensor x = unbatched ? x0.unsqueeze(1) : o.batch_first ? x0.transpose(0, 1) : x0;  // [T, N, in]
  const int64_t T = x.size(0), N = x.size(1), H = o.hidden_size, D = o.bidirectional ? 2 : 1, L = o.num_layers;
  MT_CHECK(T > 0, type_, "expected a sequence length above 0, got an input ", x0.shape_str());
  const Shape state_shape = unbatched ? Shape{L * D, H} : Shape{L * D, N, H};
  auto state = [&](const Tensor& s, const char* name) {
    if (!s.defined()) return zeros({L * D, N, H}, {.dtype = x.dtype(), .device = x.device()});
    MT_CHECK(s.sizes() == state_shape, type_, "expected ", name, " ", shape_str(state_shape), " for input ",
             x0.shape_str(), ", got ", s.shape_str());
    return unbatched ? s.unsqueeze(1) : s;
  };
  const Tensor h_init = state(h0, "h0"), c_init = cell_ == F::RecurrentCell::Lstm ? state(c0, "c0") : Tensor();

  std::vector<Tensor> h_n, c_n;
  Tensor input = x;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < D; ++d) {
      const std::vector<Tensor> p = layer_parameters(l, d);
      const Tensor gates_x = F::linear(input, p[0], p[2]);  // [T, N, G H]: one GEMM for all steps
      const int64_t k = l * D + d;
      auto r = F::recurrent_layer(cell_, gates_x, p[1], p[3], h_init.select(0, k),
                                  c_init.defined() ? c_init.select(0, k) : Tensor(), d == 1);
      outs.push_back(r.output);  // [T, N, H]
      h_n.push_back(r.h_n);
      if (r.c_n.defined()) c_n.push_back(r.c_n);
    }
    input = D == 1 ? outs[0] : cat(outs, 2);
    if (o.dropout > 0 && l + 1 < L) input = F::dropout(input, o.dropout, is_training());
  }
  RNNOutput r{input, stack(h_n, 0), c_n.empty() ? Tensor() : stack(c_n, 0)};
  if (unbatched) {
    r.output = r.output.squeeze(1);
    r.h_n = r.h_n.squeeze(1);
    if (r.c_n.defined()) r.c_n = r.c_n.squeeze(1);
  } else if (o.batch_first) {
    r.output = r.output.transpose(0, 1);
  }
  return r;
}

namespace {
RNNOptions checked_nonlinearity(const RNNOptions& o) {
  MT_CHECK(o.nonlinearity == "tanh" || o.nonlinearity == "relu", "RNN", "nonlinearity must be 'tanh' or 'relu', got '",
           o.nonlinearity, "'");
  return o;
}
}  // namespace

RNN::RNN(const RNNOptions& o)
    : RNNBase(checked_nonlinearity(o).nonlinearity == "relu" ? F::RecurrentCell::Relu : F::RecurrentCell::Tanh, "RNN",
              o) {}
LSTM::LSTM(const RNNOptions& o) : RNNBase(F::RecurrentCell::Lstm, "LSTM", o) {}
GRU::GRU(const RNNOptions& o) : RNNBase(F::RecurrentCell::Gru, "GRU", o) {}

// --- cells ---

RNNCellBase::RNNCellBase(int64_t in, int64_t hidden, bool bias, int64_t G, const char* type)
    : input_size(in), hidden_size(hidden) {
  MT_CHECK(in > 0 && hidden > 0, type, "input_size and hidden_size must be positive, got ", in, ", ", hidden);
  weight_ih = register_parameter("weight_ih", empty({G * hidden, in}));
  weight_hh = register_parameter("weight_hh", empty({G * hidden, hidden}));
  bias_ih = register_parameter("bias_ih", bias ? empty({G * hidden}) : Tensor());
  bias_hh = register_parameter("bias_hh", bias ? empty({G * hidden}) : Tensor());
  reset_parameters();
}

void RNNCellBase::reset_parameters() { init_uniform({weight_ih, weight_hh, bias_ih, bias_hh}, hidden_size); }

std::string RNNCellBase::extra_repr() const {
  return mantissa::detail::concat(input_size, ", ", hidden_size, bias_ih.defined() ? "" : ", bias=false");
}

Tensor RNNCellBase::state_or_zeros(const Tensor& x, const Tensor& h) const {
  if (h.defined() || !x.defined()) return h;
  const Shape s = x.dim() == 2 ? Shape{x.size(0), hidden_size} : Shape{hidden_size};
  return zeros(s, {.dtype = is_floating(x.dtype()) ? x.dtype() : DType::Float32, .device = x.device()});
}

RNNCell::RNNCell(int64_t in, int64_t hidden, bool bias, const std::string& nl)
    : RNNCellBase(in, hidden, bias, 1, "RNNCell"), nonlinearity(nl) {
  MT_CHECK(nl == "tanh" || nl == "relu", "RNNCell", "nonlinearity must be 'tanh' or 'relu', got '", nl, "'");
}

Tensor RNNCell::forward(const Tensor& x, const Tensor& h) {
  const Tensor h0 = state_or_zeros(x, h);
  return nonlinearity == "tanh" ? F::rnn_tanh_cell(x, h0, weight_ih, weight_hh, bias_ih, bias_hh)
                                : F::rnn_relu_cell(x, h0, weight_ih, weight_hh, bias_ih, bias_hh);
}

LSTMCell::LSTMCell(int64_t in, int64_t hidden, bool bias) : RNNCellBase(in, hidden, bias, 4, "LSTMCell") {}

std::pair<Tensor, Tensor> LSTMCell::forward(const Tensor& x, const Tensor& h, const Tensor& c) {
  return F::lstm_cell(x, state_or_zeros(x, h), state_or_zeros(x, c), weight_ih, weight_hh, bias_ih, bias_hh);
}

GRUCell::GRUCell(int64_t in, int64_t hidden, bool bias) : RNNCellBase(in, hidden, bias, 3, "GRUCell") {}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) {
  return F::gru_cell(x, state_or_zeros(x, h), weight_ih, weight_hh, bias_ih, bias_hh);
}

}  // namespace mantissa::nn
