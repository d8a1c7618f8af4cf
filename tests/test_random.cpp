// The counter-based generator behind dropout and rand / randn (core/philox.h): Random123's known
// answers for Philox4x32-10, the dropout mask's distribution, scaling and reproducibility, and
// the normal and uniform fills.
#include <gtest/gtest.h>
#include <mantissa.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/philox.h"

namespace mt = mantissa;
namespace F = mantissa::nn::functional;

namespace {

// Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter[4], key[2] -> result[4].
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const mt::math::Philox4 r = mt::math::philox4x32_10({{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i;
  }
}

TEST(Philox, UniformsAreInRangeAndUnbiased) {
  double sum = 0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) {
    const float u = mt::math::philox_uniform(12345, uint64_t(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);  // std of the mean: 0.29 / 256 = 0.0011
}

TEST(DropoutMask, KeepsOneMinusPScaled) {
  mt::manual_seed(5);
  for (mt::DType t : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16}) {
    const double p = 0.3;
    std::vector<double> m = mt::dropout_mask({200, 500}, p, {.dtype = t}).to_vector<double>();
    const double scale = double(mt::full({}, 1.0 / (1.0 - p), {.dtype = t}).item<double>());
    int64_t kept = 0;
    for (double v : m) {
      ASSERT_TRUE(v == 0.0 || v == scale) << v;
      kept += v != 0.0;
    }
    // 100 000 draws: the kept fraction's std is 0.0014.
    EXPECT_NEAR(double(kept) / double(m.size()), 1 - p, 0.01) << mt::dtype_name(t);
  }
}

// Every element of the mask is the scalar draw philox_uniform(seed, i) < 1 - p (the vector
// kernels run 32 blocks across registers): sizes that end inside a block and inside a 64-element
// chunk, one above the parallel grain (so a thread's range starts mid-chunk), each dtype.
TEST(DropoutMask, EqualsTheScalarDraw) {
  const double p = 0.35;
  for (mt::DType t : {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16}) {
    for (int64_t n : {1, 3, 5, 63, 64, 65, 130, 1001, 300007}) {
      mt::manual_seed(uint64_t(n) + 17);
      const uint64_t seed = mt::default_generator().next_u64();
      mt::manual_seed(uint64_t(n) + 17);
      const std::vector<double> m = mt::dropout_mask({n}, p, {.dtype = t}).to_vector<double>();
      const mt::math::DropoutKeep keep{seed, float(1.0 - p)};
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += (m[size_t(i)] != 0.0) != keep(uint64_t(i));
      EXPECT_EQ(wrong, 0) << mt::dtype_name(t) << " n=" << n;
    }
  }
}

TEST(DropoutMask, SeededAndFreshPerCall) {
  mt::manual_seed(9);
  mt::Tensor a = mt::dropout_mask({1000}, 0.5);
  mt::Tensor b = mt::dropout_mask({1000}, 0.5);
  mt::manual_seed(9);
  mt::Tensor c = mt::dropout_mask({1000}, 0.5);
  EXPECT_EQ(a.to_vector<float>(), c.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());
  // The mask of a larger tensor does not depend on the thread split: the same seed and a
  // size above the parallel grain give the same leading elements as a small one.
  mt::manual_seed(9);
  std::vector<float> big = mt::dropout_mask({300000}, 0.5).to_vector<float>();
  std::vector<float> av = a.to_vector<float>();
  EXPECT_EQ(std::vector<float>(big.begin(), big.begin() + 1000), av);
}

TEST(DropoutMask, FunctionalDropoutUsesIt) {
  mt::manual_seed(3);
  mt::Tensor x = mt::ones({64, 64}, {.requires_grad = true});
  mt::Tensor y = F::dropout(x, 0.25, true);
  mt::manual_seed(3);
  mt::Tensor mask = mt::dropout_mask({64, 64}, 0.25);
  EXPECT_EQ(y.to_vector<float>(), mask.to_vector<float>());
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), mask.to_vector<float>());
  EXPECT_THROW(mt::dropout_mask({2}, 1.0), mt::Error);
  EXPECT_THROW(mt::dropout_mask({2}, 0.5, {.dtype = mt::kInt64}), mt::Error);
}

}  // namespace

// F::dropout at the edges: a 0-dim and an empty input keep their shapes, a non-contiguous input
// gives 0 or x / (1 - p) at each element, NaN stays NaN (dropped too: NaN * 0, as torch), an
// integer input is an error.
TEST(DropoutMask, EdgeInputs) {
  namespace F = mt::nn::functional;
  mt::manual_seed(3);
  const double p = 0.25;
  EXPECT_EQ(F::dropout(mt::full({}, 2.0), p, true).dim(), 0);
  EXPECT_EQ(F::dropout(mt::zeros({0, 3}), p, true).sizes(), (mt::Shape{0, 3}));
  const mt::Tensor x = mt::randn({6, 5}).t();  // [5, 6] view, not contiguous
  const std::vector<double> xv = x.contiguous().to_vector<double>(), yv = F::dropout(x, p, true).to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i)
    EXPECT_TRUE(yv[i] == 0.0 || std::fabs(yv[i] - xv[i] / (1 - p)) <= 1e-6 * std::fabs(xv[i])) << i;
  const mt::Tensor nan = mt::full({64}, std::nan(""));
  const std::vector<double> yn = F::dropout(nan, p, true).to_vector<double>();
  for (size_t i = 0; i < yn.size(); ++i) EXPECT_TRUE(std::isnan(yn[i])) << i;  // NaN * 0 is NaN, as torch
  EXPECT_THROW(F::dropout(mt::ones({4}, {.dtype = mt::kInt64}), p, true), mt::Error);
}

// F::dropout draws its mask inside the multiply (one pass, the mask never stored) and its
// backward redraws it: both equal x * dropout_mask and g * dropout_mask of the same draw bit for
// bit, in every float type, for specials, a non-contiguous input and sizes that end mid-chunk
// and spread over threads.
TEST(DropoutMask, FusedDropoutIsInputTimesMaskBitForBit) {
  const double inf = std::numeric_limits<double>::infinity();
  for (mt::DType t : {mt::kFloat32, mt::kFloat64, mt::kBFloat16, mt::kFloat16})
    for (double p : {0.1, 0.5, 0.9})
      for (const mt::Shape& shape : {mt::Shape{3, 5}, mt::Shape{517, 389}, mt::Shape{1, 300}}) {
        mt::manual_seed(11);
        mt::Tensor x = (mt::randn(shape, {.dtype = mt::kFloat64}) * 3).to(t);
        std::vector<double> xv = x.to_vector<double>();
        const double specials[] = {std::nan(""), inf, -inf, -0.0, 1e-40, 65504.0};
        for (size_t k = 0; k < std::size(specials) && k < xv.size(); ++k) xv[k * 7 % xv.size()] = specials[k];
        x = mt::from_vector<double>(xv, shape).to(t);
        const mt::Tensor xt = x.t().contiguous().t();  // the same values, column-major
        mt::Tensor leaf = xt.detach();
        leaf.requires_grad_();
        const mt::Tensor g = mt::randn(shape, {.dtype = mt::kFloat64}).to(t);
        mt::manual_seed(5);
        const mt::Tensor y = F::dropout(leaf, p, true);
        const mt::Tensor gx = mt::autograd::grad({y}, {leaf}, {g})[0];  // raw: .grad would add it to 0
        mt::manual_seed(5);
        const mt::Tensor m = mt::dropout_mask(shape, p, {.dtype = t});
        const std::string what = std::string(mt::dtype_name(t)) + " p " + std::to_string(p) + " " + x.shape_str();
        // Bits, not values: NaN == NaN and -0 != +0 here.
        auto bits = [](const mt::Tensor& v) { return v.contiguous().to(mt::kFloat64).to_vector<double>(); };
        auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
          if (a.size() != b.size()) return false;
          for (size_t i = 0; i < a.size(); ++i)
            if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
          return true;
        };
        EXPECT_TRUE(same(bits(y), bits(x * m))) << what;
        EXPECT_TRUE(same(bits(gx), bits(g * m))) << what;
      }
}

// The keep bits that F::dropout saves for backward (1 bit per element instead of the mask):
// bit i % 8 of byte i / 8 is whether element i was kept, for a size that ends mid-word; the
// backward from them is g * mask (also from a strided view of the bits); bits that do not cover
// g's whole 64-bit words, or of another dtype, are an error.
TEST(DropoutMask, KeepBitsMarkTheKeptElements) {
  const int64_t n = 1000;
  const double p = 0.3;
  mt::Tensor bits;
  const mt::Tensor m = mt::dropout_with_seed(mt::ones({n}), p, 42, &bits);
  ASSERT_EQ(bits.dtype(), mt::kUInt8);
  ASSERT_EQ(bits.numel(), (n + 63) / 64 * 8);
  const std::vector<float> mv = m.to_vector<float>();
  const uint8_t* b = bits.data_ptr<uint8_t>();
  int64_t wrong = 0, kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool bit = (b[i / 8] >> (i % 8)) & 1;
    wrong += bit != (mv[size_t(i)] != 0.0f);
    kept += bit;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_NEAR(double(kept) / n, 1 - p, 0.05);
  const mt::Tensor g = mt::randn({n});
  EXPECT_EQ(mt::dropout_apply_kept(g, bits, p).to_vector<float>(), (g * m).to_vector<float>());
  EXPECT_THROW(mt::dropout_apply_kept(mt::randn({n + 200}), bits, p), mt::Error);
  EXPECT_THROW(mt::dropout_apply_kept(g, bits.to(mt::kInt32), p), mt::Error);
  // Enough bits for n elements but not the whole last 64-bit word the CPU kernel reads.
  EXPECT_THROW(mt::dropout_apply_kept(g, bits.slice(0, 0, (n + 7) / 8), p), mt::Error);
  // A strided view of the right bytes is made contiguous first.
  const mt::Tensor spread = mt::zeros({bits.numel(), 2}, {.dtype = mt::kUInt8});
  spread.select(1, 0).copy_(bits);
  EXPECT_EQ(mt::dropout_apply_kept(g, spread.select(1, 0), p).to_vector<float>(), (g * m).to_vector<float>());
}

// rand / randn / uniform / normal: one generator draw seeds counter-based values, element i a
// function of (seed, i) alone: a shorter tensor from the same seed is a prefix of a longer one,
// and one thread or two fill it alike. The moments of 2^20 normals (std of the mean 1e-3, of the
// variance 1.4e-3, of the fourth moment 1e-2) and the uniforms' range, in float and double.
TEST(CounterBasedFills, PrefixesThreadsAndMoments) {
  for (mt::DType dtype : {mt::kFloat32, mt::kFloat64}) {
    mt::manual_seed(11);
    const std::vector<double> long_draw = mt::randn({1000}, {.dtype = dtype}).to_vector<double>();
    mt::manual_seed(11);
    const std::vector<double> short_draw = mt::randn({77}, {.dtype = dtype}).to_vector<double>();
    EXPECT_TRUE(std::equal(short_draw.begin(), short_draw.end(), long_draw.begin()));

    const int64_t n = int64_t(1) << 20;
    std::vector<double> by_threads[2];
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      mt::manual_seed(3);
      by_threads[threads - 1] = mt::normal({n}, 2.0, 0.5, {.dtype = dtype}).to_vector<double>();
    }
    omp_set_num_threads(omp_get_num_procs());
    EXPECT_EQ(by_threads[0], by_threads[1]);
    double m1 = 0, m2 = 0, m4 = 0;
    for (double v : by_threads[0]) {
      const double z = (v - 2.0) / 0.5;
      m1 += z;
      m2 += z * z;
      m4 += z * z * z * z;
    }
    EXPECT_NEAR(m1 / double(n), 0.0, 5e-3);
    EXPECT_NEAR(m2 / double(n), 1.0, 7e-3);
    EXPECT_NEAR(m4 / double(n), 3.0, 5e-2);

    const std::vector<double> u = mt::uniform({n}, -1.0, 3.0, {.dtype = dtype}).to_vector<double>();
    double sum = 0;
    for (double v : u) {
      ASSERT_GE(v, -1.0);
      ASSERT_LT(v, 3.0);
      sum += v;
    }
    EXPECT_NEAR(sum / double(n), 1.0, 1e-2);  // std of the mean 1.1e-3
    const std::vector<double> r = mt::rand({n}, {.dtype = dtype}).to_vector<double>();
    EXPECT_LT(*std::max_element(r.begin(), r.end()), 1.0) << "rand never gives 1 (a double rounded to float could)";
  }
  // bf16 normals are the float draws rounded once; empty tensors draw nothing.
  mt::manual_seed(4);
  const mt::Tensor f = mt::randn({100});
  mt::manual_seed(4);
  EXPECT_EQ(mt::randn({100}, {.dtype = mt::kBFloat16}).to_vector<float>(), f.to(mt::kBFloat16).to_vector<float>());
  EXPECT_EQ(mt::randn({0, 3}).numel(), 0);
}
