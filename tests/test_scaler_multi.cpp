// One GradScaler for several models, losses and optimizers (a GAN's recipe): each loss through
// scaler.backward, each optimizer through step (and unscale_), one update() per iteration. In
// fp32 with a power-of-two scale, scaling and unscaling are exact, so the shared-scaler run must
// equal two separate unscaled runs bit for bit; an overflow skips the optimizers stepped after
// it in the iteration and backs the scale off once.
#include "test_util.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using mt::Tensor;
using testing::HasSubstr;

namespace {

struct Pair {
  nn::Linear a{4, 3}, b{3, 1};
  std::unique_ptr<mt::optim::Adam> oa, ob;
  Pair() {
    oa = std::make_unique<mt::optim::Adam>(a.parameters(), mt::optim::AdamOptions{.lr = 1e-2});
    ob = std::make_unique<mt::optim::Adam>(b.parameters(), mt::optim::AdamOptions{.lr = 1e-2});
  }
};

Pair make_pair_of_models() {
  mt::manual_seed(31);
  return Pair();
}

std::vector<float> values(nn::Module& m) {
  std::vector<float> v;
  for (auto& p : m.parameters())
    for (float e : p.to_vector<float>()) v.push_back(e);
  return v;
}

// The two losses of iteration i; `poison` multiplies one of them by inf.
Tensor loss_a(Pair& p, int i, bool poison) {
  mt::manual_seed(100 + i);
  Tensor l = F::mse_loss(p.a(mt::randn({8, 4})), mt::randn({8, 3}));
  return poison ? l * std::numeric_limits<double>::infinity() : l;
}
Tensor loss_b(Pair& p, int i, bool poison) {
  mt::manual_seed(200 + i);
  Tensor l = F::mse_loss(p.b(mt::randn({8, 3})), mt::randn({8, 1}));
  return poison ? l * std::numeric_limits<double>::infinity() : l;
}

}  // namespace

TEST(ScalerMulti, OneScalerTwoOptimizersEqualsTwoPlainRuns) {
  Pair plain = make_pair_of_models(), scaled = make_pair_of_models();
  mt::amp::GradScaler scaler({.init_scale = 1024});
  for (int i = 0; i < 5; ++i) {
    plain.oa->zero_grad();
    loss_a(plain, i, false).backward();
    plain.oa->step();
    plain.ob->zero_grad();
    loss_b(plain, i, false).backward();
    plain.ob->step();

    scaled.oa->zero_grad();
    scaler.backward(loss_a(scaled, i, false));
    EXPECT_FALSE(scaler.unscale_(*scaled.oa));  // clipping would go here
    EXPECT_TRUE(scaler.step(*scaled.oa));
    scaled.ob->zero_grad();
    scaler.backward(loss_b(scaled, i, false));
    EXPECT_TRUE(scaler.step(*scaled.ob));
    scaler.update();
  }
  EXPECT_EQ(values(scaled.a), values(plain.a));
  EXPECT_EQ(values(scaled.b), values(plain.b));
  EXPECT_EQ(scaler.skipped_steps(), 0);
}

TEST(ScalerMulti, AnOverflowSkipsTheOptimizersSteppedAfterItAndBacksOffOnce) {
  for (int poisoned : {0, 1}) {  // the first loss or the second
    SCOPED_TRACE(poisoned == 0 ? "first loss" : "second loss");
    Pair p = make_pair_of_models();
    mt::amp::GradScaler scaler({.init_scale = 1024});
    p.oa->zero_grad();
    scaler.backward(loss_a(p, 0, poisoned == 0));
    const std::vector<float> a0 = values(p.a), b0 = values(p.b);
    const bool took_a = scaler.step(*p.oa);
    p.ob->zero_grad();
    scaler.backward(loss_b(p, 0, poisoned == 1));
    const bool took_b = scaler.step(*p.ob);
    scaler.update();
    // An overflow in the first loss skips both; in the second, only the second optimizer.
    EXPECT_EQ(took_a, poisoned == 1);
    EXPECT_FALSE(took_b);
    EXPECT_EQ(values(p.a) == a0, poisoned == 0);
    EXPECT_EQ(values(p.b), b0);
    EXPECT_EQ(scaler.scale(), 512.0);
    EXPECT_EQ(scaler.skipped_steps(), 1);
    // The next, clean iteration steps both.
    p.oa->zero_grad();
    p.ob->zero_grad();
    scaler.backward(loss_a(p, 1, false));
    scaler.backward(loss_b(p, 1, false));
    EXPECT_TRUE(scaler.step(*p.oa));
    EXPECT_TRUE(scaler.step(*p.ob));
    scaler.update();
    EXPECT_NE(values(p.b), b0);
    EXPECT_EQ(scaler.skipped_steps(), 1);
  }
}

TEST(ScalerMulti, EachOptimizerStepsAndUnscalesOncePerIteration) {
  Pair p = make_pair_of_models();
  mt::amp::GradScaler scaler;
  scaler.backward(loss_a(p, 0, false) + loss_b(p, 0, false));
  scaler.unscale_(*p.oa);
  EXPECT_THAT([&] { scaler.unscale_(*p.oa); }, testing::ThrowsMessage<mt::Error>(HasSubstr("already called")));
  scaler.step(*p.oa);
  scaler.step(*p.ob);
  EXPECT_THAT([&] { scaler.step(*p.oa); }, testing::ThrowsMessage<mt::Error>(HasSubstr("already called")));
  EXPECT_THAT([&] { scaler.unscale_(*p.ob); }, testing::ThrowsMessage<mt::Error>(HasSubstr("already called")));
  scaler.update();
  scaler.step(*p.oa);  // a new iteration
}
