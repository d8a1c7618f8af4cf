// distributed/ under `mpirun -np 2` (tests/distributed.cmake): collectives, DistributedDataParallel
// exactness against one process with the whole batch (fp32 and fp16 AMP, including a
// step that overflows on one rank only), no_sync, compressed gradients, model mismatch
// errors and rank-0 checkpoints. Every rank runs every test; a collective that one rank
// skips makes the other time out (MANTISSA_DIST_TIMEOUT) instead of hanging.
#include <gtest/gtest.h>
#include <mantissa.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "distributed/checkpoint.h"
#include "distributed/dist.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;

namespace {

int rank() { return mt::dist::rank(); }
int world() { return mt::dist::world_size(); }

// An MLP small enough for exact comparisons, big enough for several buckets.
struct Mlp : nn::Module {
  nn::Linear fc1{6, 16}, fc2{16, 16}, fc3{16, 3};
  Mlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  Tensor forward(const Tensor& x) override { return fc3(mt::relu(fc2(mt::relu(fc1(x))))); }
};

// The global batch of step `step`: identical on every rank (seeded by the step).
std::pair<Tensor, Tensor> global_batch(int step, int64_t rows) {
  mt::manual_seed(1000 + uint64_t(step));
  Tensor x = mt::randn({rows, 6});
  Tensor y = mt::randn({rows, 3});
  return {x, y};
}

Tensor my_rows(const Tensor& t) {
  const int64_t b = t.size(0) / world();
  return t.narrow(0, rank() * b, b).contiguous();
}

double max_abs_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  double m = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].to_vector<double>(), vb = pb[i].to_vector<double>();
    for (size_t k = 0; k < va.size(); ++k) m = std::max(m, std::abs(va[k] - vb[k]));
  }
  return m;
}

void copy_params(nn::Module& from, nn::Module& to) { to.load_state_dict(from.state_dict()); }

}  // namespace

TEST(Dist, WorldIsTwoRanks) {
  EXPECT_EQ(world(), 2);
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), world());
  mt::dist::barrier();
}

TEST(Dist, AllReduceEveryFloatingDtype) {
  for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16}) {
    // rank r holds (r + 1) * [1, 2, 3, 0.5]
    Tensor t = (mt::from_vector<float>({1, 2, 3, 0.5f}, {4}) * float(rank() + 1)).to(dt);
    mt::dist::all_reduce(t);
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{3, 6, 9, 1.5})) << mt::dtype_name(dt);
    Tensor m = mt::full({2}, double(rank() * 10 - 3), {.dtype = dt});
    mt::dist::all_reduce(m, mt::dist::ReduceOp::Max);
    EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{7, 7})) << mt::dtype_name(dt);
    mt::dist::all_reduce(m.fill_(double(rank())), mt::dist::ReduceOp::Min);
    EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{0, 0})) << mt::dtype_name(dt);
  }
}

TEST(Dist, Fp16AllReduceRoundsTheSumOnce) {
  // 2048 + 1 = 2049 is not a float16 (spacing 2 there): rounded to even, 2048.
  Tensor t = mt::full({1}, rank() == 0 ? 2048.0 : 1.0, {.dtype = mt::kFloat16});
  mt::dist::all_reduce(t);
  EXPECT_EQ(t.item<float>(), 2048.0f);  // 2049 rounded to even in fp16
  Tensor big = mt::full({1}, 40000.0, {.dtype = mt::kFloat16});
  mt::dist::all_reduce(big);
  EXPECT_TRUE(std::isinf(big.item<float>()));  // 80000 > fp16 max: the rounded result overflows
}

TEST(Dist, BroadcastAndAllGather) {
  for (mt::DType dt : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16}) {
    Tensor t = mt::full({3}, double(rank() + 5), {.dtype = dt});
    mt::dist::broadcast(t, 1);
    EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{6, 6, 6})) << mt::dtype_name(dt);
    Tensor g = mt::dist::all_gather(mt::full({2}, double(rank() + 1), {.dtype = dt}));
    EXPECT_EQ(g.sizes(), (mt::Shape{2, 2}));
    EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 1, 2, 2})) << mt::dtype_name(dt);
  }
  Tensor t = mt::zeros({2});
  EXPECT_THROW(mt::dist::broadcast(t, 2), mt::Error);
  EXPECT_THROW(mt::dist::all_reduce(mt::zeros({4, 4}).t()), mt::Error);  // not contiguous
}

TEST(Ddp, BroadcastsRankZerosParameters) {
  mt::manual_seed(7 + uint64_t(rank()));  // different initial weights per rank
  Mlp net;
  nn::DistributedDataParallel ddp(net);
  Tensor w = net.fc1.weight.clone();
  Tensor gathered = mt::dist::all_gather(w);
  EXPECT_EQ(gathered.select(0, 0).to_vector<float>(), gathered.select(0, 1).to_vector<float>());
}

// Two ranks with batch B == one process with batch 2B, after several SGD steps.
TEST(Ddp, MatchesOneProcessWithTheWholeBatchFp32) {
  const int64_t B = 8;
  mt::manual_seed(3);
  Mlp net, ref;
  copy_params(net, ref);
  // A tiny bucket cap: several buckets, launched while backward runs.
  nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 300 * 4 / 1048576.0});
  EXPECT_GT(ddp.bucket_sizes().size(), 2u);
  mt::optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
  mt::optim::SGD ref_opt(ref.parameters(), {.lr = 0.05, .momentum = 0.9});
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = global_batch(step, 2 * B);
    opt.zero_grad();
    F::mse_loss(ddp(my_rows(x)), my_rows(y)).backward();
    opt.step();
    ref_opt.zero_grad();
    F::mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  EXPECT_LT(max_abs_diff(net, ref), 2e-6);
  EXPECT_EQ(ddp.stats().reductions, 5);
  EXPECT_EQ(ddp.stats().buckets, 5 * int64_t(ddp.bucket_sizes().size()));
}

// fp16 autocast + dynamic GradScaler; at step 2 rank 1's input holds a value that
// overflows fp16, so only rank 1 sees inf locally: both ranks must skip that step.
TEST(Ddp, MatchesOneProcessUnderFp16AmpAndSkipsTogether) {
  const int64_t B = 8;
  mt::manual_seed(4);
  Mlp net, ref;
  copy_params(net, ref);
  nn::DistributedDataParallel ddp(net, {.bucket_cap_mb = 300 * 4 / 1048576.0});
  mt::optim::SGD opt(net.parameters(), {.lr = 0.05});
  mt::optim::SGD ref_opt(ref.parameters(), {.lr = 0.05});
  mt::amp::GradScaler scaler({.init_scale = 1024}), ref_scaler({.init_scale = 1024});
  std::vector<bool> took, ref_took;
  for (int step = 0; step < 5; ++step) {
    auto [x, y] = global_batch(step, 2 * B);
    if (step == 2) x.narrow(0, 2 * B - 1, 1).fill_(1e6);  // the last row: rank 1's shard
    Tensor loss, ref_loss;
    opt.zero_grad();
    {
      mt::amp::Autocast ac(mt::kHalf);
      loss = F::mse_loss(ddp(my_rows(x)), my_rows(y));
    }
    scaler.backward(loss);
    took.push_back(scaler.step(opt));
    scaler.update();
    ref_opt.zero_grad();
    {
      mt::amp::Autocast ac(mt::kHalf);
      ref_loss = F::mse_loss(ref(x), y);
    }
    ref_scaler.backward(ref_loss);
    ref_took.push_back(ref_scaler.step(ref_opt));
    ref_scaler.update();
  }
  EXPECT_EQ(took, (std::vector<bool>{true, true, false, true, true}));
  EXPECT_EQ(took, ref_took);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.scale(), ref_scaler.scale());
  // Every rank holds the same weights, and they match the one-process run to fp16
  // rounding of the forward (the backward through fp16 working copies rounds per rank).
  Tensor w = mt::dist::all_gather(net.fc2.weight);
  EXPECT_EQ(w.select(0, 0).to_vector<float>(), w.select(0, 1).to_vector<float>());
  EXPECT_LT(max_abs_diff(net, ref), 2e-3);
}

TEST(Ddp, NoSyncAccumulatesLocallyThenReducesTheSum) {
  const int64_t B = 4;
  mt::manual_seed(5);
  Mlp net, ref;
  copy_params(net, ref);
  nn::DistributedDataParallel ddp(net);
  auto [x1, y1] = global_batch(10, 2 * B);
  auto [x2, y2] = global_batch(11, 2 * B);
  {
    auto guard = ddp.no_sync();
    F::mse_loss(ddp(my_rows(x1)), my_rows(y1)).backward();
  }
  EXPECT_EQ(ddp.stats().reductions, 0);
  // Still local: the ranks' gradients differ.
  Tensor g = mt::dist::all_gather(net.fc1.weight.grad());
  EXPECT_NE(g.select(0, 0).to_vector<float>(), g.select(0, 1).to_vector<float>());
  F::mse_loss(ddp(my_rows(x2)), my_rows(y2)).backward();
  EXPECT_EQ(ddp.stats().reductions, 1);
  (F::mse_loss(ref(x1), y1) + F::mse_loss(ref(x2), y2)).backward();
  auto pn = net.parameters(), pr = ref.parameters();
  for (size_t i = 0; i < pn.size(); ++i) {
    auto a = pn[i].grad().to_vector<float>(), b = pr[i].grad().to_vector<float>();
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6) << "parameter " << i;
  }
}

// comm_dtype fp16/bf16 over MPI: each rank's gradient is rounded once to 16 bits, the
// ranks' values are added in fp32 (rank order) and averaged; nothing else is rounded.
TEST(Ddp, Fp16AndBf16CompressedGradientsAreRoundedOncePerRank) {
  for (mt::DType comm : {mt::kFloat16, mt::kBFloat16}) {
    mt::manual_seed(6);
    Mlp net, local;
    copy_params(net, local);
    nn::DistributedDataParallel ddp(net, {.comm_dtype = comm});
    auto [x, y] = global_batch(20, 16);
    F::mse_loss(ddp(my_rows(x)), my_rows(y)).backward();
    F::mse_loss(local(my_rows(x)), my_rows(y)).backward();  // this rank's own gradient
    auto pn = net.parameters(), pl = local.parameters();
    for (size_t i = 0; i < pn.size(); ++i) {
      Tensor each = mt::dist::all_gather(pl[i].grad());  // [2, ...] fp32
      Tensor expected = each.to(comm).to(mt::kFloat32).sum({0}) * 0.5;
      EXPECT_EQ(pn[i].grad().to_vector<float>(), expected.to_vector<float>()) << mt::dtype_name(comm) << " " << i;
      // ... which is the fp32 average to 16-bit rounding of the ranks' magnitudes.
      auto got = pn[i].grad().to_vector<double>(), exact = (each.sum({0}) * 0.5).to_vector<double>();
      auto mag = (each.abs().sum({0}) * 0.5).to_vector<double>();
      const double eps = comm == mt::kFloat16 ? 1.0 / 1024 : 1.0 / 128;
      for (size_t k = 0; k < got.size(); ++k) EXPECT_LE(std::abs(got[k] - exact[k]), eps * mag[k] + 1e-7);
    }
  }
}

TEST(Ddp, ParametersThatDifferInShapeAreNamed) {
  struct Net : nn::Module {
    nn::Linear fc;
    explicit Net(int64_t out) : fc(4, out) { register_module("fc", fc); }
  };
  Net net(rank() == 0 ? 3 : 5);
  try {
    nn::DistributedDataParallel ddp(net);
    FAIL() << "expected mantissa::Error";
  } catch (const mt::Error& e) {
    EXPECT_STREQ(e.what(),
                 "DistributedDataParallel: the model differs between ranks: 'fc.weight' is float32 [3, 4] on rank 0 "
                 "but float32 [5, 4] on rank 1");
  }
  // A different number of parameters.
  nn::Linear one(4, 4, /*bias=*/rank() == 0);
  try {
    nn::DistributedDataParallel ddp(one);
    FAIL() << "expected mantissa::Error";
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 has 2 parameters and buffers, rank 1 has 1"), std::string::npos)
        << e.what();
  }
}

TEST(Ddp, CheckpointIsWrittenByRankZeroOnly) {
  // One path for both ranks: rank 0's pid.
  Tensor pid = mt::full({1}, double(getpid()), {.dtype = mt::kInt64});
  mt::dist::broadcast(pid, 0);
  const std::string path = "/tmp/mt_dist_ckpt_" + std::to_string(pid.item<int64_t>()) + ".safetensors";
  mt::manual_seed(8 + uint64_t(rank()));
  Mlp net;
  nn::DistributedDataParallel ddp(net);
  mt::dist::save_checkpoint(path, {.model = &net}, {.epoch = 2, .extra = {}});
  // Any rank (any world size) can load it, and gets rank 0's weights.
  Mlp loaded;
  auto info = mt::optim::load_checkpoint(path, {.model = &loaded});
  EXPECT_EQ(info.epoch, 2);
  EXPECT_EQ(max_abs_diff(loaded, net), 0.0);
  mt::dist::barrier();
  if (rank() == 0) std::remove(path.c_str());
  // A failed write on rank 0 reaches every rank.
  try {
    mt::dist::save_checkpoint("/nonexistent-dir/x.safetensors", {.model = &net});
    FAIL() << "expected mantissa::Error";
  } catch (const mt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 could not write"), std::string::npos) << e.what();
  }
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mt::dist::init();
  const int rc = RUN_ALL_TESTS();
  // Both ranks agree on the outcome before finalising (a failure on one is a failure of the job).
  Tensor worst = mt::full({1}, double(rc), {.dtype = mt::kInt32});
  mt::dist::all_reduce(worst, mt::dist::ReduceOp::Max);
  mt::dist::finalize();
  return worst.item<int>();
}
