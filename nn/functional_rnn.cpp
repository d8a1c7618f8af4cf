// Recurrent cells: the GEMMs through linear, the LSTM and GRU pointwise parts through one
// fused kernel per step (core/nn_kernels.h) with a fused backward.
#include "nn/functional_rnn.h"

#include "autograd/grad_mode.h"
#include "nn/functional_detail.h"

// Autocast categories (amp/autocast_policy.h): torch's CUDA autocast runs the cells in fp16.
MT_DECLARE_CAST_POLICY(lstm_cell, LowerPrecision);
MT_DECLARE_CAST_POLICY(gru_cell, LowerPrecision);
MT_DECLARE_CAST_POLICY(rnn_tanh_cell, LowerPrecision);
MT_DECLARE_CAST_POLICY(rnn_relu_cell, LowerPrecision);

namespace mantissa::nn::functional {

using namespace detail;

namespace {

// Checks the fused cells' operands: gates_x and gates_h [N, G H], state [N, H], one floating
// dtype and device.
void check_gates(const char* op, const Tensor& gx, const Tensor& gh, const Tensor& s, int64_t G) {
  MT_CHECK(gx.defined() && gh.defined() && s.defined(), op, "gates and state must be defined");
  MT_CHECK(s.dim() == 2 && gx.dim() == 2 && gx.sizes() == gh.sizes() && gx.size(0) == s.size(0) &&
               gx.size(1) == G * s.size(1),
           op, "expected gates_x and gates_h [N, ", G, " H] and a state [N, H], got ", describe({gx, gh, s}));
  MT_CHECK(is_floating(s.dtype()) && gx.dtype() == s.dtype() && gh.dtype() == s.dtype(), op,
           "expected one floating dtype for gates and state, got ", describe({gx, gh, s}));
  launch::check_same_device(op, {gx, gh, s});
}

// Gate k of [N, G H] (columns k H .. (k + 1) H), differentiably.
Tensor gate(const Tensor& gates, int64_t k, int64_t H) { return gates.narrow(1, k * H, H); }

// The LSTM cell's backward from differentiable ops, for a graph of the backward (create_graph).
Grads lstm_backward_composite(const Tensor& gx, const Tensor& gh, const Tensor& c, const Tensor& g_h,
                              const Tensor& g_c) {
  const int64_t H = c.size(1);
  const Tensor pre = gx + gh;
  const Tensor i = sigmoid(gate(pre, 0, H)), f = sigmoid(gate(pre, 1, H)), gg = tanh(gate(pre, 2, H)),
               o = sigmoid(gate(pre, 3, H));
  const Tensor tc = tanh(f * c + i * gg);
  const Tensor gcn = g_c + g_h * o * (1.0 - tc * tc);
  const Tensor ggates =
      cat({gcn * gg * i * (1.0 - i), gcn * c * f * (1.0 - f), gcn * i * (1.0 - gg * gg), g_h * tc * o * (1.0 - o)}, 1);
  return Grads{ggates, ggates, gcn * f};
}

// The GRU cell's backward from differentiable ops (create_graph).
Grads gru_backward_composite(const Tensor& gx, const Tensor& gh, const Tensor& h, const Tensor& g) {
  const int64_t H = h.size(1);
  const Tensor r = sigmoid(gate(gx, 0, H) + gate(gh, 0, H)), z = sigmoid(gate(gx, 1, H) + gate(gh, 1, H));
  const Tensor hn = gate(gh, 2, H), n = tanh(gate(gx, 2, H) + r * hn);
  const Tensor gn = g * (1.0 - z) * (1.0 - n * n), gz = g * (h - n) * z * (1.0 - z), gr = gn * hn * r * (1.0 - r);
  return Grads{cat({gr, gz, gn}, 1), cat({gr, gz, gn * r}, 1), g * z};
}

// Checks a cell's input x [N, I] or [I], its states (the same rank, [.., H]), weights and biases.
void check_cell(const char* op, const Tensor& x, const std::vector<Tensor>& states, const Tensor& w_ih,
                const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, int64_t G) {
  MT_CHECK(x.defined() && w_ih.defined() && w_hh.defined(), op, "input and weights must be defined");
  MT_CHECK(x.dim() == 1 || x.dim() == 2, op, "expected an input [N, input_size] or [input_size], got ", describe({x}));
  MT_CHECK(w_hh.dim() == 2 && w_hh.size(0) == G * w_hh.size(1), op, "expected w_hh [", G,
           " hidden_size, hidden_size], got ", describe({w_hh}));
  const int64_t H = w_hh.size(1);
  MT_CHECK(w_ih.dim() == 2 && w_ih.size(0) == G * H && w_ih.size(1) == x.size(x.dim() - 1), op, "expected w_ih [",
           G * H, ", ", x.size(x.dim() - 1), "], got ", describe({w_ih}));
  for (const Tensor& b : {b_ih, b_hh})
    MT_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == G * H), op, "expected biases [", G * H, "], got ",
             describe({b}));
  for (const Tensor& s : states) {
    MT_CHECK(s.defined() && s.dim() == x.dim() && s.size(s.dim() - 1) == H && (x.dim() == 1 || s.size(0) == x.size(0)),
             op, "expected a state [", x.dim() == 2 ? std::to_string(x.size(0)) + ", " : "", H, "] for input ",
             x.shape_str(), ", got ", describe({s}));
  }
}

Tensor rows(const Tensor& t) { return t.dim() == 1 ? t.unsqueeze(0) : t; }

}  // namespace

std::pair<Tensor, Tensor> lstm_cell_gates(const Tensor& gx0, const Tensor& gh0, const Tensor& c0) {
  auto in = amp::autocast_many(autocast_lstm_cell, {gx0, gh0, c0});
  const Tensor &gx = in[0], &gh = in[1], &c = in[2];
  check_gates("lstm_cell", gx, gh, c, 4);
  const int64_t N = c.size(0), H = c.size(1);
  Tensor hc = make_tensor({2, N, H}, c.dtype(), c.device()), act = make_tensor({N, 4 * H}, c.dtype(), c.device());
  kernel(c, "lstm_cell", &NnKernels::lstm_cell)(launch::contiguous(gx), launch::contiguous(gh), launch::contiguous(c),
                                                hc.select(0, 0), hc.select(0, 1), act);
  if (needs_grad({gx, gh, c})) {
    // One node for both outputs: hc = [h', c'] stacked, returned as two views.
    record("lstm_cell", {gx, gh, c}, hc,
           [sgx = SavedTensor(gx), sgh = SavedTensor(gh), sc = SavedTensor(c), shc = SavedTensor(hc, true), act](
               const Tensor& g0, auto&) {
             if (GradMode::is_enabled())
               return lstm_backward_composite(sgx.unpack(), sgh.unpack(), sc.unpack(), g0.select(0, 0),
                                              g0.select(0, 1));
             const Tensor g = launch::contiguous(g0), hc = shc.unpack(), cc = launch::contiguous(sc.unpack());
             Tensor ggates = make_tensor(act.sizes(), act.dtype(), act.device());
             Tensor gc = make_tensor(cc.sizes(), cc.dtype(), cc.device());
             kernel(cc, "lstm_cell", &NnKernels::lstm_cell_backward)(g.select(0, 0), g.select(0, 1), cc,
                                                                     hc.select(0, 1), act, ggates, gc);
             return Grads{ggates, ggates, gc};
           });
  }
  return {hc.select(0, 0), hc.select(0, 1)};
}

Tensor gru_cell_gates(const Tensor& gx0, const Tensor& gh0, const Tensor& h0) {
  auto in = amp::autocast_many(autocast_gru_cell, {gx0, gh0, h0});
  const Tensor &gx = in[0], &gh = in[1], &h = in[2];
  check_gates("gru_cell", gx, gh, h, 3);
  const int64_t N = h.size(0), H = h.size(1);
  Tensor y = make_tensor({N, H}, h.dtype(), h.device()), ws = make_tensor({N, 4 * H}, h.dtype(), h.device());
  kernel(h, "gru_cell", &NnKernels::gru_cell)(launch::contiguous(gx), launch::contiguous(gh), launch::contiguous(h), y,
                                              ws);
  if (needs_grad({gx, gh, h})) {
    record("gru_cell", {gx, gh, h}, y,
           [sgx = SavedTensor(gx), sgh = SavedTensor(gh), sh = SavedTensor(h), ws](const Tensor& g0, auto&) {
             if (GradMode::is_enabled()) return gru_backward_composite(sgx.unpack(), sgh.unpack(), sh.unpack(), g0);
             const Tensor g = launch::contiguous(g0), hc = launch::contiguous(sh.unpack());
             const int64_t N = hc.size(0), H = hc.size(1);
             Tensor ggx = make_tensor({N, 3 * H}, hc.dtype(), hc.device());
             Tensor ggh = make_tensor({N, 3 * H}, hc.dtype(), hc.device());
             Tensor gh = make_tensor({N, H}, hc.dtype(), hc.device());
             kernel(hc, "gru_cell", &NnKernels::gru_cell_backward)(g, hc, ws, ggx, ggh, gh);
             return Grads{ggx, ggh, gh};
           });
  }
  return y;
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& x0, const Tensor& h0, const Tensor& c0, const Tensor& w_ih0,
                                    const Tensor& w_hh0, const Tensor& b_ih0, const Tensor& b_hh0) {
  check_cell("lstm_cell", x0, {h0, c0}, w_ih0, w_hh0, b_ih0, b_hh0, 4);
  auto in = amp::autocast_many(autocast_lstm_cell, {x0, h0, c0, w_ih0, w_hh0, b_ih0, b_hh0});
  auto [h, c] = lstm_cell_gates(linear(rows(in[0]), in[3], in[5]), linear(rows(in[1]), in[4], in[6]), rows(in[2]));
  if (x0.dim() == 1) return {h.squeeze(0), c.squeeze(0)};
  return {h, c};
}

Tensor gru_cell(const Tensor& x0, const Tensor& h0, const Tensor& w_ih0, const Tensor& w_hh0, const Tensor& b_ih0,
                const Tensor& b_hh0) {
  check_cell("gru_cell", x0, {h0}, w_ih0, w_hh0, b_ih0, b_hh0, 3);
  auto in = amp::autocast_many(autocast_gru_cell, {x0, h0, w_ih0, w_hh0, b_ih0, b_hh0});
  Tensor h = gru_cell_gates(linear(rows(in[0]), in[2], in[4]), linear(rows(in[1]), in[3], in[5]), rows(in[1]));
  return x0.dim() == 1 ? h.squeeze(0) : h;
}

namespace {
Tensor rnn_cell(const amp::OpPolicy& policy, bool use_tanh, const Tensor& x0, const Tensor& h0, const Tensor& w_ih0,
                const Tensor& w_hh0, const Tensor& b_ih0, const Tensor& b_hh0) {
  check_cell(policy.name(), x0, {h0}, w_ih0, w_hh0, b_ih0, b_hh0, 1);
  auto in = amp::autocast_many(policy, {x0, h0, w_ih0, w_hh0, b_ih0, b_hh0});
  Tensor pre = linear(in[0], in[2], in[4]) + linear(in[1], in[3], in[5]);
  return use_tanh ? tanh(pre) : relu(pre);
}
}  // namespace

Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  return rnn_cell(autocast_rnn_tanh_cell, true, x, h, w_ih, w_hh, b_ih, b_hh);
}

Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  return rnn_cell(autocast_rnn_relu_cell, false, x, h, w_ih, w_hh, b_ih, b_hh);
}

}  // namespace mantissa::nn::functional
