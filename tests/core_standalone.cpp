// core/ on its own: this test links mantissa::core only (no autograd, nn, optim or data), so
// it fails to link when core starts calling into the layers above it again.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/launch.h"
#include "core/nn_kernels.h"
#include "core/random.h"
#include "core/safetensors.h"

namespace mt = mantissa;

TEST(CoreStandalone, FactoriesConvertAndMarkRequiresGrad) {
  mt::Tensor a = mt::from_vector<double>({1.5, -2, 3}, {3}, {.dtype = mt::DType::Float32, .requires_grad = true});
  EXPECT_EQ(a.dtype(), mt::DType::Float32);
  EXPECT_TRUE(a.requires_grad());
  EXPECT_TRUE(a.is_leaf());
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.5f, -2.f, 3.f}));
  mt::Tensor r = mt::randn({4, 5}, {.dtype = mt::DType::BFloat16});
  EXPECT_EQ(r.dtype(), mt::DType::BFloat16);
  EXPECT_EQ(r.sizes(), (mt::Shape{4, 5}));
  EXPECT_EQ(mt::arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_THROW(mt::zeros({2}, {.dtype = mt::DType::Int64, .requires_grad = true}), mt::Error);
}

TEST(CoreStandalone, KernelsRunThroughTheRegistry) {
  mt::Tensor a = mt::from_vector<float>({1, 2, 3, 4}, {2, 2});
  mt::Tensor b = mt::full({2, 2}, 10.0);
  mt::Tensor sum = mt::launch::binary(mt::BinaryOp::Add, a, b, mt::DType::Float32, mt::DType::Float32);
  EXPECT_EQ(sum.to_vector<float>(), (std::vector<float>{11, 12, 13, 14}));
  mt::Tensor rows = mt::launch::reduce(mt::ReduceOp::Sum, a, {1}, false, mt::DType::Float32);
  EXPECT_EQ(rows.to_vector<float>(), (std::vector<float>{3, 7}));
  mt::Tensor e = mt::launch::unary(mt::UnaryOp::Exp, mt::zeros({3}));
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 1, 1}));

  // max_pool2d 2x2 over one 2x4 plane: the maximum of each window and its flat index.
  mt::Tensor x = mt::from_vector<float>({1, 5, 2, 0, 3, 4, 8, 7}, {1, 1, 2, 4});
  mt::Pool2dGeometry g{.N = 1, .C = 1, .H = 2, .W = 4, .OH = 1, .OW = 2, .KH = 2, .KW = 2, .SH = 2, .SW = 2};
  mt::Tensor y = mt::empty({1, 1, 1, 2});
  mt::Tensor idx = mt::empty({1, 1, 1, 2}, {.dtype = mt::DType::Int64});
  mt::nn_kernels_for(mt::Device::cpu(), "max_pool2d").max_pool2d(x, y, idx, g);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 8}));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{1, 6}));
}

TEST(CoreStandalone, SafetensorsRoundTrip) {
  const std::string path = ::testing::TempDir() + "core_standalone.safetensors";
  mt::Tensor w = mt::from_vector<float>({0.25f, -1, 7, 3}, {2, 2}, {.dtype = mt::DType::Float16});
  mt::Tensor steps = mt::from_vector<int64_t>({42});
  // A transposed (non-contiguous) view is written in row-major order.
  mt::save_safetensors(path, {{"w", w}, {"wt", mt::make_view(w, {2, 2}, {1, 2}, 0)}, {"steps", steps}},
                       {{"format", "pt"}});
  mt::SafeTensors back = mt::load_safetensors(path);
  std::remove(path.c_str());
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.tensors["w"].dtype(), mt::DType::Float16);
  EXPECT_EQ(back.tensors["w"].to_vector<float>(), (std::vector<float>{0.25f, -1, 7, 3}));
  EXPECT_EQ(back.tensors["wt"].to_vector<float>(), (std::vector<float>{0.25f, 7, -1, 3}));
  EXPECT_EQ(back.tensors["steps"].to_vector<int64_t>(), (std::vector<int64_t>{42}));
  EXPECT_EQ(back.metadata["format"], "pt");
}
