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

namespace {

const amp::OpPolicy& cell_policy(RecurrentCell cell) {
  switch (cell) {
    case RecurrentCell::Tanh:
      return autocast_rnn_tanh_cell;
    case RecurrentCell::Relu:
      return autocast_rnn_relu_cell;
    case RecurrentCell::Lstm:
      return autocast_lstm_cell;
    case RecurrentCell::Gru:
      break;
  }
  return autocast_gru_cell;
}

int64_t gate_count(RecurrentCell cell) { return cell == RecurrentCell::Lstm ? 4 : cell == RecurrentCell::Gru ? 3 : 1; }

// What the sequence's forward keeps for backward, in processing order s (t = s, or T-1-s
// reversed): the states before and after each step and the cell's workspace.
struct SequenceSaved {
  Tensor hs;    // [T + 1, N, H]: hs[s] the hidden state before step s (hs[0] = h0)
  Tensor cs;    // LSTM: [T + 1, N, H], the cell states likewise
  Tensor work;  // LSTM: act [T, N, 4H]; GRU: ws [T, N, 4H]; RNN: undefined (h is enough)
};

}  // namespace

RecurrentLayerOutput recurrent_layer(RecurrentCell cell, const Tensor& gx0, const Tensor& w0, const Tensor& b0,
                                     const Tensor& h00, const Tensor& c00, bool reverse) {
  const amp::OpPolicy& policy = cell_policy(cell);
  const char* op = policy.name();
  auto in = amp::autocast_many(policy, {gx0, w0, b0, h00, c00});
  const Tensor &gx = in[0], &w = in[1], &b = in[2], &h0 = in[3], &c0 = in[4];
  const int64_t G = gate_count(cell);
  MT_CHECK(gx.defined() && w.defined() && h0.defined() && gx.dim() == 3 && w.dim() == 2 && h0.dim() == 2, op,
           "expected gates_x [T, N, G H], w_hh [G H, H] and h0 [N, H], got ", describe({gx, w, h0}));
  const int64_t T = gx.size(0), N = gx.size(1), H = h0.size(1);
  MT_CHECK(w.size(0) == G * H && w.size(1) == H && gx.size(2) == G * H && h0.size(0) == N &&
               (!b.defined() || b.sizes() == Shape{G * H}),
           op, "expected gates_x [T, N, ", G * H, "], w_hh [", G * H, ", ", H, "], b_hh [", G * H, "], h0 [", N, ", ",
           H, "], got ", describe({gx, w, b, h0}));
  MT_CHECK((cell == RecurrentCell::Lstm) == c0.defined() && (!c0.defined() || c0.sizes() == h0.sizes()), op,
           "the LSTM takes a cell state c0 [N, H] (and only it), got ", describe({c0}));
  for (const Tensor& t : {w, b, h0, c0})
    MT_CHECK(!t.defined() || t.dtype() == gx.dtype(), op, "expected one floating dtype, got ",
             describe({gx, w, b, h0, c0}));
  MT_CHECK(is_floating(gx.dtype()), op, "expected a floating-point input, got ", describe({gx}));
  launch::check_same_device(op, {gx, w, b, h0, c0});
  auto row = [&](int64_t s) { return reverse ? T - 1 - s : s; };

  SequenceSaved sv;
  // One node for all outputs: packed = [output rows, h_n, c_n], returned as views.
  const int64_t rows = T + 1 + (cell == RecurrentCell::Lstm ? 1 : 0);
  Tensor packed = make_tensor({rows, N, H}, gx.dtype(), gx.device());
  {
    NoGradGuard no_grad;
    const Tensor gxc = launch::contiguous(gx);
    sv.hs = make_tensor({T + 1, N, H}, gx.dtype(), gx.device());
    sv.hs.select(0, 0).copy_(h0);
    if (cell == RecurrentCell::Lstm) {
      sv.cs = make_tensor({T + 1, N, H}, gx.dtype(), gx.device());
      sv.cs.select(0, 0).copy_(c0);
    }
    if (cell == RecurrentCell::Lstm || cell == RecurrentCell::Gru)
      sv.work = make_tensor({T, N, 4 * H}, gx.dtype(), gx.device());
    for (int64_t s = 0; s < T; ++s) {
      const Tensor x_t = gxc.select(0, row(s)), h = sv.hs.select(0, s);
      Tensor h_next = sv.hs.select(0, s + 1);
      const Tensor gh = linear(h, w, b);  // [N, G H]
      switch (cell) {
        case RecurrentCell::Lstm:
          kernel(gx, op, &NnKernels::lstm_cell)(x_t, gh, sv.cs.select(0, s), h_next, sv.cs.select(0, s + 1),
                                                sv.work.select(0, s));
          break;
        case RecurrentCell::Gru:
          kernel(gx, op, &NnKernels::gru_cell)(x_t, gh, h, h_next, sv.work.select(0, s));
          break;
        case RecurrentCell::Tanh:
          h_next.copy_(tanh(x_t + gh));
          break;
        case RecurrentCell::Relu:
          h_next.copy_(relu(x_t + gh));
          break;
      }
      packed.select(0, row(s)).copy_(h_next);
    }
    packed.select(0, T).copy_(sv.hs.select(0, T));
    if (cell == RecurrentCell::Lstm) packed.select(0, T + 1).copy_(sv.cs.select(0, T));
  }
  if (needs_grad({gx, w, b, h0, c0})) {
    record(
        op, {gx, w, b, h0, c0}, packed,
        [cell, op, reverse, T, N, H, G, sv, sw = SavedTensor(w)](const Tensor& g0, const std::vector<bool>& need) {
          MT_CHECK(!GradMode::is_enabled(), op,
                   "double backward through a whole recurrent layer is not supported; step its cells "
                   "(F::lstm_cell, F::gru_cell, ...) for a graph of the backward");
          const Tensor g = launch::contiguous(g0), w = sw.unpack();
          auto row = [&](int64_t s) { return reverse ? T - 1 - s : s; };
          // Per step s (processing order): the pre-activations' gradient of the input half
          // (ggx) and of the hidden half (ggh; the same tensor but for the GRU).
          Tensor ggx = make_tensor({T, N, G * H}, g.dtype(), g.device());
          Tensor ggh = cell == RecurrentCell::Gru ? make_tensor({T, N, G * H}, g.dtype(), g.device()) : ggx;
          Tensor gh = g.select(0, T).clone();  // of the state after the last step
          Tensor gc = cell == RecurrentCell::Lstm ? g.select(0, T + 1).clone() : Tensor();
          for (int64_t s = T - 1; s >= 0; --s) {
            const Tensor gh_total = gh + g.select(0, row(s));  // from the output and from step s + 1
            Tensor gx_s = ggx.select(0, s), gh_s = ggh.select(0, s);
            switch (cell) {
              case RecurrentCell::Lstm: {
                Tensor gc_prev = make_tensor({N, H}, g.dtype(), g.device());
                kernel(g, op, &NnKernels::lstm_cell_backward)(gh_total, gc, sv.cs.select(0, s), sv.cs.select(0, s + 1),
                                                              sv.work.select(0, s), gx_s, gc_prev);
                gc = gc_prev;
                gh = matmul(gh_s, w);
                break;
              }
              case RecurrentCell::Gru: {
                Tensor direct = make_tensor({N, H}, g.dtype(), g.device());
                kernel(g, op, &NnKernels::gru_cell_backward)(gh_total, sv.hs.select(0, s), sv.work.select(0, s), gx_s,
                                                             gh_s, direct);
                gh = direct + matmul(gh_s, w);
                break;
              }
              case RecurrentCell::Tanh:
              case RecurrentCell::Relu: {
                const Tensor h = sv.hs.select(0, s + 1);
                gx_s.copy_(cell == RecurrentCell::Tanh ? gh_total * (1.0 - h * h) : gh_total * (h > 0.0).to(h.dtype()));
                gh = matmul(gh_s, w);
                break;
              }
            }
          }
          Tensor g_gates = ggx;  // in time order
          if (reverse && need[0]) {
            g_gates = make_tensor(ggx.sizes(), ggx.dtype(), ggx.device());
            for (int64_t s = 0; s < T; ++s) g_gates.select(0, row(s)).copy_(ggx.select(0, s));
          }
          // The hidden weight and bias over all steps at once: ggh^T [G H, T N] x hs [T N, H].
          const Tensor ggh2 = ggh.reshape({T * N, G * H});
          Tensor gw = need[1] ? matmul(ggh2.t(), sv.hs.narrow(0, 0, T).reshape({T * N, H})) : Tensor();
          Tensor gb = need[2] ? sum(ggh2, {0}) : Tensor();
          return Grads{g_gates, gw, gb, gh, gc};
        });
  }
  RecurrentLayerOutput r{packed.narrow(0, 0, T), packed.select(0, T),
                         cell == RecurrentCell::Lstm ? packed.select(0, T + 1) : Tensor()};
  return r;
}

}  // namespace mantissa::nn::functional
