// RNN, LSTM, GRU and their cells: PyTorch reference values (float64, forward and every
// gradient, tests/fixtures/reference_rnn.json from tools/gen_reference_rnn.py), float64
// gradchecks through time, double backward, torch's parameter names, autocast, edges, errors.
#include "autograd/gradcheck.h"
#include "test_util.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
using nlohmann::json;
using testing::HasSubstr;

namespace {

const json& load_cases() {
  return mt::test::load_fixture("reference_rnn.json", "tools/gen_reference_rnn.py").at("cases");
}

Tensor from_json(const json& j, bool grad = false) {
  Tensor t = mt::from_vector(j.at("data").get<std::vector<double>>(), j.at("shape").get<mt::Shape>());
  return grad ? t.requires_grad_() : t;
}

std::unique_ptr<nn::Module> make_module(const json& c) {
  const std::string kind = c.at("kind");
  const int64_t in = c.at("input_size"), hidden = c.at("hidden_size");
  const bool bias = c.at("bias");
  if (kind == "LSTMCell") return std::make_unique<nn::LSTMCell>(in, hidden, bias);
  if (kind == "GRUCell") return std::make_unique<nn::GRUCell>(in, hidden, bias);
  if (kind == "RNNCell") return std::make_unique<nn::RNNCell>(in, hidden, bias, c.at("nonlinearity"));
  nn::RNNOptions o{.input_size = in,
                   .hidden_size = hidden,
                   .num_layers = c.at("num_layers"),
                   .nonlinearity = c.at("nonlinearity"),
                   .bias = bias,
                   .batch_first = c.at("batch_first"),
                   .bidirectional = c.at("bidirectional")};
  if (kind == "LSTM") return std::make_unique<nn::LSTM>(o);
  if (kind == "GRU") return std::make_unique<nn::GRU>(o);
  return std::make_unique<nn::RNN>(o);
}

// The module's outputs for the case's input and states, in the order the generator lists them.
std::vector<Tensor> run(nn::Module& m, const std::string& kind, const Tensor& x, const std::vector<Tensor>& s) {
  auto st = [&](size_t i) { return i < s.size() ? s[i] : Tensor(); };
  if (kind == "LSTMCell") {
    auto [h, c] = dynamic_cast<nn::LSTMCell&>(m).forward(x, st(0), st(1));
    return {h, c};
  }
  if (kind == "GRUCell") return {dynamic_cast<nn::GRUCell&>(m).forward(x, st(0))};
  if (kind == "RNNCell") return {dynamic_cast<nn::RNNCell&>(m).forward(x, st(0))};
  auto r = dynamic_cast<nn::RNNBase&>(m).forward_with_state(x, st(0), st(1));
  if (r.c_n.defined()) return {r.output, r.h_n, r.c_n};
  return {r.output, r.h_n};
}

Tensor nan(const Tensor& t) { return mt::ne(t, t); }

double max_diff(const Tensor& a, const Tensor& b) {
  return mt::amax(mt::abs(a.to(mt::kFloat64) - b.to(mt::kFloat64))).item<double>();
}

}  // namespace

TEST(Rnn, MatchesPyTorchForwardAndEveryGradient) {
  for (const json& c : load_cases()) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    auto m = make_module(c);
    m->to(mt::kFloat64);
    mt::StateDict sd;
    for (auto& [name, v] : c.at("params").items()) sd.insert(name, from_json(v));
    m->load_state_dict(sd);  // strict: every torch name exists here, and no other
    Tensor x = from_json(c.at("x"), true);
    std::vector<Tensor> states;
    if (c.contains("states"))
      for (const json& s : c.at("states")) states.push_back(from_json(s, true));
    std::vector<Tensor> outs = run(*m, c.at("kind"), x, states);
    ASSERT_EQ(outs.size(), c.at("outputs").size());
    Tensor loss = mt::zeros({}, {.dtype = mt::kFloat64});
    for (size_t i = 0; i < outs.size(); ++i) {
      mt::test::expect_close_to_reference(outs[i], c.at("outputs")[i], 1e-12, "output " + std::to_string(i));
      loss = loss + mt::sum(outs[i] * from_json(c.at("output_weights")[i]));
    }
    loss.backward();
    mt::test::expect_close_to_reference(x.grad(), c.at("grad_x"), 1e-11, "grad x");
    for (size_t i = 0; i < states.size(); ++i)
      mt::test::expect_close_to_reference(states[i].grad(), c.at("grad_states")[i], 1e-11,
                                          "grad state " + std::to_string(i));
    for (auto& [name, p] : m->named_parameters())
      mt::test::expect_close_to_reference(p.grad(), c.at("grad_params").at(name), 1e-11, "grad " + name);
  }
}

TEST(Rnn, ParameterNamesAreTorchs) {
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true});
  EXPECT_EQ(
      lstm.state_dict().keys(),
      (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                                "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1",
                                "weight_hh_l1", "bias_ih_l1", "bias_hh_l1", "weight_ih_l1_reverse",
                                "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"}));
  EXPECT_EQ(lstm.layer_parameters(1, 0)[0].sizes(), (mt::Shape{16, 8}));  // layer 1 reads both directions
  nn::GRU gru({.input_size = 3, .hidden_size = 4, .bias = false});
  EXPECT_EQ(gru.state_dict().keys(), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  EXPECT_EQ(gru.layer_parameters(0, 0)[0].sizes(), (mt::Shape{12, 3}));
  for (const Tensor& p : lstm.parameters()) EXPECT_LE(mt::amax(mt::abs(p)).item<double>(), 0.5);  // +-1/sqrt(4)
}

TEST(Rnn, Float64GradcheckThroughTime) {
  mt::manual_seed(3);
  auto f64 = [](const mt::Shape& s) { return mt::randn(s, {.dtype = mt::kFloat64}).requires_grad_(); };
  // The fused cells, every input.
  EXPECT_TRUE(mt::autograd::gradcheck(
      [](auto& in) {
        auto [h, c] = F::lstm_cell_gates(in[0], in[1], in[2]);
        return mt::cat({h, c * 0.5});
      },
      {f64({2, 12}), f64({2, 12}), f64({2, 3})}));
  EXPECT_TRUE(mt::autograd::gradcheck([](auto& in) { return F::gru_cell_gates(in[0], in[1], in[2]); },
                                      {f64({2, 9}), f64({2, 9}), f64({2, 3})}));
  // Three steps of each cell with the weights as inputs: gradients through time.
  Tensor x = f64({3, 2, 2}), h = f64({2, 3}), c = f64({2, 3});
  EXPECT_TRUE(mt::autograd::gradcheck(
      [](auto& in) {
        Tensor h = in[1], c = in[2];
        for (int64_t t = 0; t < 3; ++t)
          std::tie(h, c) = F::lstm_cell(in[0].select(0, t), h, c, in[3], in[4], in[5], in[6]);
        return mt::cat({h, c});
      },
      {x, h, c, f64({12, 2}), f64({12, 3}), f64({12}), f64({12})}));
  EXPECT_TRUE(mt::autograd::gradcheck(
      [](auto& in) {
        Tensor h = in[1];
        for (int64_t t = 0; t < 3; ++t) h = F::gru_cell(in[0].select(0, t), h, in[2], in[3], in[4], in[5]);
        return h;
      },
      {x, h, f64({9, 2}), f64({9, 3}), f64({9}), f64({9})}));
  // The stacked bidirectional layers, input and initial states.
  mt::manual_seed(4);
  nn::LSTM lstm({.input_size = 2, .hidden_size = 3, .num_layers = 2, .batch_first = true, .bidirectional = true});
  lstm.to(mt::kFloat64);
  EXPECT_TRUE(mt::autograd::gradcheck(
      [&](auto& in) {
        auto r = lstm.forward_with_state(in[0], in[1], in[2]);
        return mt::cat({r.output.reshape({-1}), r.h_n.reshape({-1}), r.c_n.reshape({-1})});
      },
      {f64({2, 4, 2}), f64({4, 2, 3}), f64({4, 2, 3})}));
  nn::GRU gru({.input_size = 2, .hidden_size = 3, .num_layers = 2, .bidirectional = true});
  gru.to(mt::kFloat64);
  EXPECT_TRUE(mt::autograd::gradcheck(
      [&](auto& in) {
        auto r = gru.forward_with_state(in[0], in[1]);
        return mt::cat({r.output.reshape({-1}), r.h_n.reshape({-1})});
      },
      {f64({4, 2, 2}), f64({4, 2, 3})}));
}

TEST(Rnn, DoubleBackwardThroughTheFusedCells) {
  mt::manual_seed(5);
  auto f64 = [](const mt::Shape& s) { return mt::randn(s, {.dtype = mt::kFloat64}).requires_grad_(); };
  EXPECT_TRUE(mt::autograd::gradgradcheck(
      [](auto& in) {
        auto [h, c] = F::lstm_cell_gates(in[0], in[1], in[2]);
        return mt::cat({h, c});
      },
      {f64({2, 8}), f64({2, 8}), f64({2, 2})}));
  EXPECT_TRUE(mt::autograd::gradgradcheck([](auto& in) { return F::gru_cell_gates(in[0], in[1], in[2]); },
                                          {f64({2, 6}), f64({2, 6}), f64({2, 2})}));
}

// The fused LSTM and GRU cells run 16 units at a time with vector sigmoid / tanh on AVX-512 (a
// row's remainder and float64 with the scalar math): outputs and every gradient in fp32 and bf16
// match the float64 cells (rows of 16 and 37 units: two vectors and a remainder), and a NaN
// gate stays in its unit.
TEST(Rnn, VectorCellsMatchFloat64) {
  mt::manual_seed(9);
  for (int64_t H : {16, 37}) {
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
      const int64_t N = 3;
      const Tensor gx64 = (mt::randn({N, 4 * H}, {.dtype = mt::kFloat64}) * 2.0).to(dt).to(mt::kFloat64);
      const Tensor gh64 = (mt::randn({N, 4 * H}, {.dtype = mt::kFloat64}) * 2.0).to(dt).to(mt::kFloat64);
      const Tensor c64 = mt::randn({N, H}, {.dtype = mt::kFloat64}).to(dt).to(mt::kFloat64);
      const Tensor sh = mt::randn({N, H}, {.dtype = mt::kFloat64}), sc = mt::randn({N, H}, {.dtype = mt::kFloat64});
      auto run = [&](mt::DType t) {
        // (clone: .to(kFloat64) of a float64 tensor is the tensor itself, shared by both runs)
        Tensor a = gx64.to(t).clone().requires_grad_(), b = gh64.to(t).clone().requires_grad_(),
               c = c64.to(t).clone().requires_grad_();
        auto [h, cn] = F::lstm_cell_gates(a, b, c);
        (mt::sum(h.to(mt::kFloat64) * sh) + mt::sum(cn.to(mt::kFloat64) * sc)).backward();
        return std::vector<Tensor>{h, cn, a.grad(), b.grad(), c.grad()};
      };
      const std::vector<Tensor> got = run(dt), want = run(mt::kFloat64);
      const double tol = dt == mt::kFloat32 ? 1e-5 : 1.0 / 64;
      const char* names[] = {"h", "c'", "gates_x grad", "gates_h grad", "c grad"};
      for (size_t k = 0; k < got.size(); ++k) {
        const std::vector<double> g = got[k].to(mt::kFloat64).to_vector<double>(), w = want[k].to_vector<double>();
        for (size_t i = 0; i < w.size(); ++i)
          ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i])))
              << mt::dtype_name(dt) << " H " << H << " " << names[k] << " element " << i;
      }
    }
    // The GRU cell's vector forward likewise (its backward is scalar in both).
    for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
      const Tensor gx64 = (mt::randn({3, 3 * H}, {.dtype = mt::kFloat64}) * 2.0).to(dt).to(mt::kFloat64);
      const Tensor gh64 = (mt::randn({3, 3 * H}, {.dtype = mt::kFloat64}) * 2.0).to(dt).to(mt::kFloat64);
      const Tensor h64 = mt::randn({3, H}, {.dtype = mt::kFloat64}).to(dt).to(mt::kFloat64);
      auto run = [&](mt::DType t) {
        Tensor a = gx64.to(t).clone().requires_grad_(), b = gh64.to(t).clone().requires_grad_(),
               h = h64.to(t).clone().requires_grad_();
        Tensor hn = F::gru_cell_gates(a, b, h);
        mt::sum(hn.to(mt::kFloat64) * mt::cos(h64)).backward();
        return std::vector<Tensor>{hn, a.grad(), b.grad(), h.grad()};
      };
      const std::vector<Tensor> got = run(dt), want = run(mt::kFloat64);
      const double tol = dt == mt::kFloat32 ? 1e-5 : 1.0 / 64;
      for (size_t k = 0; k < got.size(); ++k) {
        const std::vector<double> g = got[k].to(mt::kFloat64).to_vector<double>(), w = want[k].to_vector<double>();
        for (size_t i = 0; i < w.size(); ++i)
          ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i])))
              << "GRU " << mt::dtype_name(dt) << " H " << H << " output " << k << " element " << i;
      }
    }
    // A NaN pre-activation (unit 5's forget gate in row 1) reaches that unit only.
    std::vector<float> v = mt::randn({2, 4 * H}).to_vector<float>();
    v[size_t(4 * H + H + 5)] = NAN;
    auto [h, cn] = F::lstm_cell_gates(mt::from_vector<float>(v, {2, 4 * H}), mt::zeros({2, 4 * H}), mt::ones({2, H}));
    const std::vector<float> hv = h.to_vector<float>();
    for (size_t i = 0; i < hv.size(); ++i) EXPECT_EQ(std::isnan(hv[i]), int64_t(i) == H + 5) << "H " << H << " " << i;
  }
}

TEST(Rnn, AutocastRunsTheCellsInLowerPrecisionWithFp32Masters) {
  mt::manual_seed(6);
  for (mt::DType low : {mt::kBFloat16, mt::kHalf}) {
    nn::LSTM lstm({.input_size = 8, .hidden_size = 16, .num_layers = 2});
    nn::GRU gru({.input_size = 8, .hidden_size = 16});
    Tensor x = mt::randn({6, 3, 8});
    const Tensor want_l = lstm(x), want_g = gru(x);
    Tensor got_l, got_g;
    {
      mt::amp::Autocast ac(low);
      got_l = lstm(x);
      got_g = gru(x);
    }
    EXPECT_EQ(got_l.dtype(), low);
    EXPECT_EQ(got_g.dtype(), low);
    EXPECT_LT(max_diff(got_l, want_l), 3e-2) << mt::dtype_name(low);
    EXPECT_LT(max_diff(got_g, want_g), 3e-2) << mt::dtype_name(low);
    (mt::sum(got_l.to(mt::kFloat32)) + mt::sum(got_g.to(mt::kFloat32))).backward();
    for (const Tensor& p : lstm.parameters()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().dtype(), mt::kFloat32);  // the master's gradient
      EXPECT_TRUE(mt::all(mt::isfinite(p.grad())).item<bool>());
    }
  }
}

TEST(Rnn, LowerPrecisionModelsRunWithoutAutocast) {
  mt::manual_seed(7);
  nn::LSTM lstm({.input_size = 4, .hidden_size = 5});
  Tensor x = mt::randn({3, 2, 4});
  const Tensor want = lstm(x);
  lstm.to(mt::kBFloat16);
  Tensor got = lstm(x.to(mt::kBFloat16));
  EXPECT_EQ(got.dtype(), mt::kBFloat16);
  EXPECT_LT(max_diff(got, want), 3e-2);
}

TEST(Rnn, EdgesEmptyBatchNonContiguousNaNAndDropout) {
  mt::manual_seed(8);
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4, .num_layers = 2, .bidirectional = true});
  auto r = lstm.forward_with_state(mt::randn({5, 0, 3}));  // N = 0
  EXPECT_EQ(r.output.sizes(), (mt::Shape{5, 0, 8}));
  EXPECT_EQ(r.h_n.sizes(), (mt::Shape{4, 0, 4}));
  // A transposed (non-contiguous) input gives the same result as its contiguous copy.
  Tensor xt = mt::randn({2, 5, 3}).transpose(0, 1);
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_EQ(max_diff(lstm(xt), lstm(xt.contiguous())), 0.0);
  // A NaN in step 2 of row 0 reaches that row's later outputs (forward direction) and no other row.
  nn::GRU gru({.input_size = 3, .hidden_size = 4});
  Tensor x = mt::randn({5, 2, 3});
  {
    mt::NoGradGuard g;
    x.select(0, 2).select(0, 0).fill_(std::nan(""));
  }
  Tensor y = gru(x);
  EXPECT_TRUE(mt::all(nan(y.select(0, 4).select(0, 0))).item<bool>());
  EXPECT_FALSE(mt::any(nan(y.select(1, 1))).item<bool>());
  EXPECT_FALSE(mt::any(nan(y.select(0, 1))).item<bool>());
  // Dropout acts between layers in training only.
  nn::LSTM drop({.input_size = 3, .hidden_size = 4, .num_layers = 2, .dropout = 0.5});
  Tensor xd = mt::randn({4, 2, 3});
  drop.eval();
  const Tensor eval1 = drop(xd), eval2 = drop(xd);
  EXPECT_EQ(max_diff(eval1, eval2), 0.0);
  drop.train();
  EXPECT_GT(max_diff(drop(xd), eval1), 0.0);
  // Unbatched input [T, in]: states [L D, H].
  auto u = lstm.forward_with_state(mt::randn({5, 3}));
  EXPECT_EQ(u.output.sizes(), (mt::Shape{5, 8}));
  EXPECT_EQ(u.c_n.sizes(), (mt::Shape{4, 4}));
}

TEST(Rnn, ErrorsNameTheLayerAndShapes) {
  nn::LSTM lstm({.input_size = 3, .hidden_size = 4});
  EXPECT_ERROR(lstm(mt::randn({5, 2, 7})), HasSubstr("LSTM"), HasSubstr("input_size is 3"), HasSubstr("[5, 2, 7]"));
  EXPECT_ERROR(lstm.forward_with_state(mt::randn({5, 2, 3}), mt::zeros({1, 3, 4})), HasSubstr("LSTM"),
               HasSubstr("h0 [1, 2, 4]"), HasSubstr("[1, 3, 4]"));
  EXPECT_ERROR(lstm(mt::randn({0, 2, 3})), HasSubstr("sequence length"));
  EXPECT_ERROR(lstm(mt::ones({5, 2, 3}, {.dtype = mt::kInt64})), HasSubstr("floating"));
  EXPECT_ERROR(lstm(mt::randn({5})), HasSubstr("3-D input"));
  nn::GRU gru({.input_size = 3, .hidden_size = 4});
  EXPECT_ERROR(gru.forward_with_state(mt::randn({5, 2, 3}), Tensor(), mt::zeros({1, 2, 4})), HasSubstr("GRU"),
               HasSubstr("only the LSTM"));
  EXPECT_ERROR(nn::RNN({.input_size = 3, .hidden_size = 4, .nonlinearity = "sigmoid"}), HasSubstr("nonlinearity"));
  EXPECT_ERROR(nn::LSTM({.input_size = 0, .hidden_size = 4}), HasSubstr("positive"));
  EXPECT_ERROR(
      F::lstm_cell(mt::randn({2, 3}), mt::zeros({2, 4}), mt::zeros({2, 4}), mt::randn({12, 3}), mt::randn({16, 4})),
      HasSubstr("lstm_cell"), HasSubstr("w_ih [16, 3]"), HasSubstr("[12, 3]"));
  // A graph of the backward of a whole layer is refused (the cells support it).
  nn::GRU g64({.input_size = 2, .hidden_size = 3});
  g64.to(mt::kFloat64);
  Tensor xg = mt::randn({3, 1, 2}, {.dtype = mt::kFloat64}).requires_grad_();
  EXPECT_ERROR(mt::autograd::grad({mt::sum(g64(xg))}, {xg}, {}, true, true), HasSubstr("gru_cell"),
               HasSubstr("double backward"));
  EXPECT_ERROR(F::gru_cell_gates(mt::randn({2, 9}), mt::randn({2, 9}), mt::zeros({2, 3}, {.dtype = mt::kFloat64})),
               HasSubstr("gru_cell"), HasSubstr("one floating dtype"));
}
