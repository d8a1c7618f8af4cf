// One CPU-vs-CUDA forward and backward case per entry of the nn kernel list (MT_NN_KERNELS,
// core/nn_kernels.h), each through the public op that calls the kernel. Without a GPU the
// table of cases is still checked against the list: a new kernel fails
// CudaNnList.EveryKernelHasACaseThatReachesIt until it has a case here whose op, run on the
// CPU, opens the kernel's profiler range (the profiled twin names it). With a GPU every case
// compares the op's output and its input gradients between the CPU and the GPU.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/nn_kernels.h"
#include "gpu_test.h"

namespace mt = mantissa;
namespace F = mantissa::nn::functional;
using mt::Tensor;

namespace {

// An op and its inputs (float32 on the CPU; floating inputs that require grad get gradients).
struct Case {
  std::function<std::vector<Tensor>()> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> op;
};

Tensor leaf(const mt::Shape& shape) { return mt::randn(shape).requires_grad_(); }
Tensor ids(const std::vector<int64_t>& v, const mt::Shape& shape) {
  return mt::from_vector(v, shape, {.dtype = mt::kInt64});
}

Case conv2d_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 7, 6}), leaf({4, 3, 3, 2}), leaf({4})};
          },
          [](const auto& in) {
            return F::conv2d(in[0], in[1], in[2], {.stride = {2, 1}, .padding = 1});
          }};
}
Case unfold_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 5, 4})};
          },
          [](const auto& in) {
            return F::unfold(in[0], {2, 3}, {.padding = 1});
          }};
}
Case fold_case() {  // cols [N, C KH KW, L]: a 5 x 4 output in 2 x 2 blocks has L = 4 * 3
  return {[] {
            return std::vector<Tensor>{leaf({2, 12, 12})};
          },
          [](const auto& in) {
            return F::fold(in[0], {5, 4}, {2, 2});
          }};
}
Case max_pool_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 7, 6})};
          },
          [](const auto& in) {
            return F::max_pool2d(in[0], {3, 3}, {.stride = 2, .padding = 1});
          }};
}
Case avg_pool_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 7, 6})};
          },
          [](const auto& in) {
            return F::avg_pool2d(in[0], {3, 2}, {.stride = 2, .padding = 1});
          }};
}
Case adaptive_pool_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 7, 6})};
          },
          [](const auto& in) {
            return F::adaptive_avg_pool2d(in[0], {3, 4});
          }};
}
Case upsample_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 5, 4})};
          },
          [](const auto& in) {
            return F::interpolate(in[0], {.scale_factor = {1.7, 2.0}, .mode = "bilinear", .align_corners = false});
          }};
}
Case layer_norm_case() {
  return {[] {
            return std::vector<Tensor>{leaf({4, 6}), leaf({6}), leaf({6})};
          },
          [](const auto& in) { return F::layer_norm(in[0], {6}, in[1], in[2]); }};
}
Case group_norm_case() {  // 2 groups of 3 channels, 5 x 2 positions each
  return {[] {
            return std::vector<Tensor>{leaf({2, 6, 5, 2}), leaf({6}), leaf({6})};
          },
          [](const auto& in) { return F::group_norm(in[0], 2, in[1], in[2]); }};
}
Case batch_norm_case() {  // training: batch statistics, their apply and the backward
  return {[] {
            return std::vector<Tensor>{leaf({4, 3, 5}), leaf({3}), leaf({3})};
          },
          [](const auto& in) { return F::batch_norm(in[0], {}, {}, in[1], in[2], /*training=*/true); }};
}
Case cross_entropy_case() {
  return {[] {
            return std::vector<Tensor>{leaf({5, 7}), ids({0, 6, 3, 3, 1}, {5})};
          },
          [](const auto& in) { return F::cross_entropy(in[0], in[1]); }};
}
Case attention_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 4, 8}), leaf({2, 5, 8}), leaf({2, 5, 6})};
          },
          [](const auto& in) { return mt::scaled_dot_product_attention(in[0], in[1], in[2]); }};
}
Case softmax_case() {
  return {[] { return std::vector<Tensor>{leaf({3, 7})}; }, [](const auto& in) { return mt::softmax(in[0], 1); }};
}
Case triangle_case() {
  return {[] { return std::vector<Tensor>{leaf({3, 4, 5})}; }, [](const auto& in) { return mt::tril(in[0], 1); }};
}
Case embedding_case() {  // repeated rows: the backward sums them
  return {[] {
            return std::vector<Tensor>{ids({1, 4, 1, 0, 1, 5}, {2, 3}), leaf({6, 4})};
          },
          [](const auto& in) { return F::embedding(in[0], in[1]); }};
}

// Two LSTM / GRU steps (the second reads the first's states), h' and c' joined.
Case lstm_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 12}), leaf({2, 3, 12}), leaf({3, 3})};
          },
          [](const std::vector<Tensor>& in) {
            auto [h, c] = F::lstm_cell_gates(in[0].select(0, 0), in[1].select(0, 0), in[2]);
            std::tie(h, c) = F::lstm_cell_gates(in[0].select(0, 1), in[1].select(0, 1) + mt::cat({h, h, h, h}, 1), c);
            return mt::cat({h, c});
          }};
}
Case gru_case() {
  return {[] {
            return std::vector<Tensor>{leaf({2, 3, 9}), leaf({2, 3, 9}), leaf({3, 3})};
          },
          [](const std::vector<Tensor>& in) {
            Tensor h = F::gru_cell_gates(in[0].select(0, 0), in[1].select(0, 0), in[2]);
            return F::gru_cell_gates(in[0].select(0, 1), in[1].select(0, 1) + mt::cat({h, h, h}, 1), h);
          }};
}

// The case of each kernel; a forward kernel and its backward share their op's case.
const std::map<std::string, Case>& cases() {
  static const std::map<std::string, Case> c = {
      {"conv2d_forward", conv2d_case()},
      {"conv2d_backward", conv2d_case()},
      {"im2col", unfold_case()},
      {"col2im", fold_case()},
      {"max_pool2d", max_pool_case()},
      {"max_pool2d_backward", max_pool_case()},
      {"avg_pool2d", avg_pool_case()},
      {"avg_pool2d_backward", avg_pool_case()},
      {"adaptive_avg_pool2d", adaptive_pool_case()},
      {"adaptive_avg_pool2d_backward", adaptive_pool_case()},
      {"layer_norm", layer_norm_case()},
      {"layer_norm_backward", layer_norm_case()},
      {"group_norm", group_norm_case()},
      {"group_norm_backward", group_norm_case()},
      {"batch_norm_stats", batch_norm_case()},
      {"batch_norm_apply", batch_norm_case()},
      {"batch_norm_backward", batch_norm_case()},
      {"cross_entropy", cross_entropy_case()},
      {"cross_entropy_backward", cross_entropy_case()},
      {"attention_forward", attention_case()},
      {"attention_backward", attention_case()},
      {"softmax_backward", softmax_case()},
      {"triangle", triangle_case()},
      {"embedding_backward", embedding_case()},
      {"lstm_cell", lstm_case()},
      {"lstm_cell_backward", lstm_case()},
      {"gru_cell", gru_case()},
      {"gru_cell_backward", gru_case()},
      {"upsample", upsample_case()},
      {"upsample_backward", upsample_case()},
  };
  return c;
}

std::vector<std::string> listed_kernels() {
#define MT_NAME(name, params) #name,
  return {MT_NN_KERNELS(MT_NAME)};
#undef MT_NAME
}

// The op's output and the gradients of its inputs that require grad, on `device`; the
// upstream gradient is (i % 5 - 2) * 0.5 + 0.25 in row-major order.
std::vector<Tensor> run(const Case& c, const std::vector<Tensor>& host_inputs, mt::Device device) {
  std::vector<Tensor> in;
  for (const Tensor& x : host_inputs) {
    Tensor d = x.detach().to(device);
    if (x.requires_grad()) d.requires_grad_();
    in.push_back(d);
  }
  Tensor y = c.op(in);
  std::vector<double> up(size_t(y.numel()));
  for (size_t i = 0; i < up.size(); ++i) up[i] = double(int64_t(i % 5) - 2) * 0.5 + 0.25;
  y.backward(mt::from_vector(up, {y.numel()}, {.dtype = y.dtype()}).reshape(y.sizes()).to(device));
  std::vector<Tensor> out{y.to(mt::Device::cpu())};
  for (const Tensor& x : in)
    if (x.requires_grad()) out.push_back(x.grad().to(mt::Device::cpu()));
  return out;
}

}  // namespace

TEST(CudaNnList, EveryKernelHasACaseThatReachesIt) {
  std::set<std::string> listed;
  for (const std::string& name : listed_kernels()) {
    listed.insert(name);
    auto it = cases().find(name);
    if (it == cases().end()) {
      ADD_FAILURE() << name << " (MT_NN_KERNELS) has no CPU-vs-CUDA case in this file";
      continue;
    }
    mt::profiler::Profile p;
    (void)run(it->second, it->second.inputs(), mt::Device::cpu());
    p.stop();
    bool reached = false;
    for (const auto& e : p.events()) reached = reached || e.name == name;
    EXPECT_TRUE(reached) << "the case of " << name << " does not run that kernel on the CPU";
  }
  for (const auto& [name, c] : cases()) EXPECT_TRUE(listed.count(name)) << name << " is not in MT_NN_KERNELS";
}

TEST(CudaNnList, EveryKernelMatchesTheCpuForwardAndBackward) {
  REQUIRE_GPU();
  for (const std::string& name : listed_kernels()) {
    auto it = cases().find(name);
    ASSERT_NE(it, cases().end()) << name;
    mt::manual_seed(7);
    const std::vector<Tensor> inputs = it->second.inputs();
    const std::vector<Tensor> want = run(it->second, inputs, mt::Device::cpu());
    const std::vector<Tensor> got = run(it->second, inputs, mt::Device::cuda(0));
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t k = 0; k < want.size(); ++k) {
      const std::string what = name + (k == 0 ? " output" : " gradient of input " + std::to_string(k - 1));
      ASSERT_EQ(got[k].sizes(), want[k].sizes()) << what;
      const std::vector<double> g = got[k].to_vector<double>(), w = want[k].to_vector<double>();
      int reported = 0;
      for (size_t i = 0; i < w.size(); ++i)  // fp32 on both, accumulated in another order
        if (!(std::fabs(g[i] - w[i]) <= 1e-5 + 1e-4 * std::fabs(w[i])) && reported++ < 5)
          ADD_FAILURE() << what << " [" << i << "]: " << g[i] << " on the GPU, " << w[i] << " on the CPU";
    }
  }
}
