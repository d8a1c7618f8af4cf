// distributed/ on GPUs (NCCL), one GPU per rank, under `mpirun -np 2` (tests/distributed.cmake and
// tools/dist-gpu-check.sh). Every test skips, on every rank alike, where there are fewer
// GPUs than ranks or no NCCL.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>

#include "cuda/nccl.h"
#include "distributed/dist.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;

#define REQUIRE_GPU_PER_RANK()                                                                       \
  do {                                                                                               \
    if (!mt::cuda::nccl::kAvailable || mt::cuda_device_count() < mt::dist::world_size())             \
      GTEST_SKIP() << "needs NCCL and one GPU per rank (" << mt::cuda_device_count() << " GPUs for " \
                   << mt::dist::world_size() << " ranks)";                                           \
  } while (0)

namespace {
mt::Device my_gpu() { return mt::Device::cuda(mt::dist::local_rank() % mt::cuda_device_count()); }

struct Mlp : nn::Module {
  nn::Linear fc1{6, 16}, fc2{16, 3};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(mt::relu(fc1(x))); }
};
}  // namespace

TEST(DistGpu, CollectivesOnEveryFloatingDtype) {
  REQUIRE_GPU_PER_RANK();
  const int r = mt::dist::rank(), w = mt::dist::world_size();
  for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16}) {
    Tensor t = mt::full({4}, double(r + 1), {.dtype = dt, .device = my_gpu()});
    mt::dist::all_reduce(t);
    EXPECT_EQ(t.to(mt::Device::cpu()).to_vector<double>(), std::vector<double>(4, w * (w + 1) / 2.0));
    Tensor b = mt::full({2}, double(r), {.dtype = dt, .device = my_gpu()});
    mt::dist::broadcast(b, w - 1);
    EXPECT_EQ(b.to(mt::Device::cpu()).to_vector<double>(), std::vector<double>(2, w - 1));
    Tensor g = mt::dist::all_gather(mt::full({1}, double(r), {.dtype = dt, .device = my_gpu()}));
    EXPECT_EQ(g.to(mt::Device::cpu()).to_vector<double>()[size_t(w - 1)], double(w - 1));
  }
}

// Ranks with batch B == one GPU with batch w*B, fp16 autocast, one step overflowing on the last rank.
TEST(DistGpu, DdpMatchesOneGpuUnderFp16Amp) {
  REQUIRE_GPU_PER_RANK();
  const int r = mt::dist::rank(), w = mt::dist::world_size();
  const int64_t B = 8;
  mt::manual_seed(4);
  Mlp net, ref;
  ref.load_state_dict(net.state_dict());
  net.to(my_gpu());
  ref.to(my_gpu());
  nn::DistributedDataParallel ddp(net);
  mt::optim::SGD opt(net.parameters(), {.lr = 0.05});
  mt::optim::SGD ref_opt(ref.parameters(), {.lr = 0.05});
  mt::amp::GradScaler scaler({.init_scale = 1024}), ref_scaler({.init_scale = 1024});
  for (int step = 0; step < 4; ++step) {
    mt::manual_seed(100 + uint64_t(step));
    Tensor x = mt::randn({w * B, 6}), y = mt::randn({w * B, 3});
    if (step == 1) x.narrow(0, w * B - 1, 1).fill_(1e6);
    x = x.to(my_gpu());
    y = y.to(my_gpu());
    Tensor loss, ref_loss;
    opt.zero_grad();
    {
      mt::amp::Autocast ac(mt::kHalf, true, mt::DeviceType::CUDA);
      loss = F::mse_loss(ddp(x.narrow(0, r * B, B).contiguous()), y.narrow(0, r * B, B).contiguous());
    }
    scaler.backward(loss);
    scaler.step(opt);
    scaler.update();
    ref_opt.zero_grad();
    {
      mt::amp::Autocast ac(mt::kHalf, true, mt::DeviceType::CUDA);
      ref_loss = F::mse_loss(ref(x), y);
    }
    ref_scaler.backward(ref_loss);
    ref_scaler.step(ref_opt);
    ref_scaler.update();
  }
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), ref_scaler.scale());
  auto pa = net.parameters(), pb = ref.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto a = pa[i].to(mt::Device::cpu()).to_vector<float>(), b = pb[i].to(mt::Device::cpu()).to_vector<float>();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 2e-3);
  }
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mt::dist::init();
  const int rc = RUN_ALL_TESTS();
  Tensor worst = mt::full({1}, double(rc), {.dtype = mt::kInt32});
  mt::dist::all_reduce(worst, mt::dist::ReduceOp::Max);
  mt::dist::finalize();
  return worst.item<int>();
}
