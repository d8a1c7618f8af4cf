// nn ops against PyTorch: forward values and input/weight/bias gradients from
// tests/fixtures/reference_nn.json (written by tools/gen_reference_nn.py with torch in
// float64). Every case runs in float64 (tight tolerance) and float32, through the fused
// backward kernels and, in float64, through the differentiable create_graph path.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using json = nlohmann::json;

namespace {

const json& ref(const std::string& key) {
  static const json j = [] {
    std::ifstream f(std::string(MANTISSA_TEST_DIR) + "/fixtures/reference_nn.json");
    EXPECT_TRUE(f.good()) << "missing tests/fixtures/reference_nn.json (run tools/gen_reference_nn.py)";
    return json::parse(f);
  }();
  return j.at(key);
}

mt::Shape shape_of(const json& t) { return t.at("shape").get<mt::Shape>(); }

mt::Tensor tensor(const json& t, mt::DType dtype, bool grad = false) {
  if (t.is_null()) return {};
  mt::Shape shape = shape_of(t);
  std::vector<double> v = t.at("data").get<std::vector<double>>();
  mt::Tensor r = mt::from_vector(v, shape.empty() ? mt::Shape{1} : shape, {.dtype = dtype});
  if (shape.empty()) r = r.reshape({});
  if (grad) r.requires_grad_();
  return r;
}

mt::Tensor indices(const json& t) {
  mt::Shape shape = shape_of(t);
  std::vector<int64_t> v = t.at("data").get<std::vector<int64_t>>();
  mt::Tensor r = mt::from_vector(v, shape.empty() ? mt::Shape{1} : shape, {.dtype = mt::kInt64});
  return shape.empty() ? r.reshape({}) : r;
}

using mantissa::test::expect_close_to_reference;

mt::nn::Size2 size2(const json& j) { return {j.at(0).get<int64_t>(), j.at(1).get<int64_t>()}; }

mt::nn::Reduction reduction(const json& c) {
  std::string r = c.at("reduction");
  return r == "none" ? mt::nn::Reduction::None : (r == "sum" ? mt::nn::Reduction::Sum : mt::nn::Reduction::Mean);
}

// Runs `body(dtype, tol, create_graph)` in float64 (fused and create_graph backward) and float32.
template <typename Body>
void each_mode(Body body) {
  body(mt::kFloat64, 1e-9, false);
  body(mt::kFloat64, 1e-9, true);
  body(mt::kFloat32, 2e-4, false);
}

std::string mode_name(mt::DType t, bool graph) {
  return std::string(mt::dtype_name(t)) + (graph ? " create_graph" : "");
}

}  // namespace

TEST(NnReference, Conv2d) {
  for (const json& c : ref("conv2d")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), w = tensor(c["w"], dt, true), b = tensor(c["b"], dt, true);
      mt::Tensor y = F::conv2d(x, w, b,
                               {.stride = size2(c["stride"]),
                                .padding = size2(c["padding"]),
                                .dilation = size2(c["dilation"]),
                                .groups = c["groups"].get<int64_t>()});
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
      expect_close_to_reference(w.grad(), c["gw"], tol, what + " gw");
      expect_close_to_reference(b.defined() ? b.grad() : mt::Tensor(), c["gb"], tol, what + " gb");
    });
  }
}

TEST(NnReference, Pool2d) {
  for (const json& c : ref("pool2d")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string kind = c.at("kind");
      const std::string what = kind + " " + c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), y;
      if (kind == "max") {
        y = F::max_pool2d(x, size2(c["kernel"]),
                          {.stride = size2(c["stride"]),
                           .padding = size2(c["padding"]),
                           .dilation = size2(c["dilation"]),
                           .ceil_mode = c["ceil_mode"].get<bool>()});
      } else if (kind == "avg") {
        y = F::avg_pool2d(x, size2(c["kernel"]),
                          {.stride = size2(c["stride"]),
                           .padding = size2(c["padding"]),
                           .ceil_mode = c["ceil_mode"].get<bool>(),
                           .count_include_pad = c["count_include_pad"].get<bool>(),
                           .divisor_override = c["divisor_override"].get<int64_t>()});
      } else {
        y = F::adaptive_avg_pool2d(x, size2(c["output_size"]));
      }
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
    });
  }
}

TEST(NnReference, BatchNorm) {
  for (const json& c : ref("batch_norm")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), w = tensor(c["weight"], dt, true), b = tensor(c["bias"], dt, true);
      mt::Tensor rm = tensor(c["running_mean_in"], dt), rv = tensor(c["running_var_in"], dt);
      mt::Tensor y = F::batch_norm(x, rm, rv, w, b, c["training"].get<bool>(), c["momentum"].get<double>(),
                                   c["eps"].get<double>());
      expect_close_to_reference(y, c["y"], tol, what + " y");
      expect_close_to_reference(rm, c["running_mean"], tol, what + " running_mean");
      expect_close_to_reference(rv, c["running_var"], tol, what + " running_var");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
      expect_close_to_reference(w.defined() ? w.grad() : w, c["gw"], tol, what + " gw");
      expect_close_to_reference(b.defined() ? b.grad() : b, c["gb"], tol, what + " gb");
    });
  }
}

TEST(NnReference, LayerNorm) {
  for (const json& c : ref("layer_norm")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), w = tensor(c["weight"], dt, true), b = tensor(c["bias"], dt, true);
      mt::Tensor y = F::layer_norm(x, c["normalized_shape"].get<mt::Shape>(), w, b, c["eps"].get<double>());
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
      expect_close_to_reference(w.defined() ? w.grad() : w, c["gw"], tol, what + " gw");
      expect_close_to_reference(b.defined() ? b.grad() : b, c["gb"], tol, what + " gb");
    });
  }
}

TEST(NnReference, EmbeddingAndLinear) {
  for (const json& c : ref("embedding")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      mt::Tensor w = tensor(c["weight"], dt, true);
      mt::Tensor y = F::embedding(indices(c["indices"]), w, c["padding_idx"].get<int64_t>());
      expect_close_to_reference(y, c["y"], tol, "embedding y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(w.grad(), c["gw"], tol, "embedding gw " + mode_name(dt, graph));
    });
  }
  for (const json& c : ref("linear")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), w = tensor(c["w"], dt, true), b = tensor(c["b"], dt, true);
      mt::Tensor y = F::linear(x, w, b);
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
      expect_close_to_reference(w.grad(), c["gw"], tol, what + " gw");
      expect_close_to_reference(b.defined() ? b.grad() : b, c["gb"], tol, what + " gb");
    });
  }
}

TEST(NnReference, CrossEntropy) {
  for (const json& c : ref("cross_entropy")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true);
      mt::Tensor y = F::cross_entropy(x, indices(c["target"]),
                                      {.weight = tensor(c["weight"], dt),
                                       .ignore_index = c["ignore_index"].get<int64_t>(),
                                       .reduction = reduction(c),
                                       .label_smoothing = c["label_smoothing"].get<double>()});
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
    });
  }
}

TEST(NnReference, NllLoss) {
  for (const json& c : ref("nll_loss")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true);
      mt::Tensor y = F::nll_loss(x, indices(c["target"]),
                                 {.weight = tensor(c["weight"], dt),
                                  .ignore_index = c["ignore_index"].get<int64_t>(),
                                  .reduction = reduction(c)});
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
    });
  }
}

TEST(NnReference, MseAndBceWithLogits) {
  for (const json& c : ref("mse_loss")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = "mse " + c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), t = tensor(c["target"], dt, true);
      mt::Tensor y = F::mse_loss(x, t, reduction(c));
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
      expect_close_to_reference(t.grad(), c["gt"], tol, what + " gt");
    });
  }
  for (const json& c : ref("binary_cross_entropy_with_logits")) {
    each_mode([&](mt::DType dt, double tol, bool graph) {
      const std::string what = "bce " + c.at("name").get<std::string>() + " " + mode_name(dt, graph);
      mt::Tensor x = tensor(c["x"], dt, true), t = tensor(c["target"], dt, true);
      mt::Tensor y = F::binary_cross_entropy_with_logits(
          x, t,
          {.weight = tensor(c["weight"], dt), .pos_weight = tensor(c["pos_weight"], dt), .reduction = reduction(c)});
      expect_close_to_reference(y, c["y"], tol, what + " y");
      y.backward(tensor(c["gy"], dt), false, graph);
      expect_close_to_reference(x.grad(), c["gx"], tol, what + " gx");
      expect_close_to_reference(t.grad(), c["gt"], tol, what + " gt");
    });
  }
}
