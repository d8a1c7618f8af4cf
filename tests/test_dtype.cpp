// DType metadata, PyTorch's type-promotion table, and the exact bit patterns of
// float16 / bfloat16 conversions (round-to-nearest-even, overflow, subnormals).
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/half.h"

namespace mt = mantissa;

namespace {

constexpr mt::DType kAll[] = {mt::kFloat32, mt::kFloat64, mt::kFloat16, mt::kBFloat16,
                              mt::kInt64,   mt::kInt32,   mt::kUInt8,   mt::kBool};

// float -> float16 through the tensor cast, read back as raw bits.
uint16_t half_bits(float v) {
  mt::Tensor h = mt::from_vector<float>({v}).to(mt::kHalf);
  return h.data_ptr<uint16_t>()[0];
}
uint16_t half_bits_from_double(double v) {
  mt::Tensor h = mt::from_vector<double>({v}).to(mt::kHalf);
  return h.data_ptr<uint16_t>()[0];
}
uint16_t bf16_bits(float v) {
  mt::Tensor h = mt::from_vector<float>({v}).to(mt::kBFloat16);
  return h.data_ptr<uint16_t>()[0];
}
// Raw 16-bit patterns -> float through the tensor cast.
std::vector<float> from_bits(const std::vector<uint16_t>& bits, mt::DType t) {
  return mt::from_blob(bits.data(), {int64_t(bits.size())}, t).to(mt::kFloat).to_vector<float>();
}
float from_bits(uint16_t bits, mt::DType t) { return from_bits(std::vector<uint16_t>{bits}, t)[0]; }

}  // namespace

TEST(DType, ElementSizesAndNames) {
  EXPECT_EQ(mt::element_size(mt::kFloat32), 4u);
  EXPECT_EQ(mt::element_size(mt::kFloat64), 8u);
  EXPECT_EQ(mt::element_size(mt::kFloat16), 2u);
  EXPECT_EQ(mt::element_size(mt::kBFloat16), 2u);
  EXPECT_EQ(mt::element_size(mt::kInt64), 8u);
  EXPECT_EQ(mt::element_size(mt::kInt32), 4u);
  EXPECT_EQ(mt::element_size(mt::kUInt8), 1u);
  EXPECT_EQ(mt::element_size(mt::kBool), 1u);

  EXPECT_STREQ(mt::dtype_name(mt::kFloat32), "float32");
  EXPECT_STREQ(mt::dtype_name(mt::kFloat64), "float64");
  EXPECT_STREQ(mt::dtype_name(mt::kFloat16), "float16");
  EXPECT_STREQ(mt::dtype_name(mt::kBFloat16), "bfloat16");
  EXPECT_STREQ(mt::dtype_name(mt::kInt64), "int64");
  EXPECT_STREQ(mt::dtype_name(mt::kInt32), "int32");
  EXPECT_STREQ(mt::dtype_name(mt::kUInt8), "uint8");
  EXPECT_STREQ(mt::dtype_name(mt::kBool), "bool");

  std::ostringstream os;
  os << mt::kBFloat16;
  EXPECT_EQ(os.str(), "bfloat16");

  // Tensors report the element size of their dtype.
  for (mt::DType t : kAll) EXPECT_EQ(mt::zeros({3, 5}, {.dtype = t}).nbytes(), 15 * mt::element_size(t)) << t;
}

TEST(DType, Categories) {
  for (mt::DType t : kAll) {
    const bool fl = t == mt::kFloat32 || t == mt::kFloat64 || t == mt::kFloat16 || t == mt::kBFloat16;
    EXPECT_EQ(mt::is_floating(t), fl) << t;
    EXPECT_EQ(mt::is_reduced_float(t), t == mt::kFloat16 || t == mt::kBFloat16) << t;
    EXPECT_EQ(mt::is_integral(t), !fl) << t;
    EXPECT_EQ(mt::is_integral(t, false), !fl && t != mt::kBool) << t;
  }
}

// torch.promote_types for every pair, written out from PyTorch's table.
TEST(DType, PromoteTypesMatchesPyTorchTable) {
  using mt::kBFloat16, mt::kBool, mt::kFloat16, mt::kFloat32, mt::kFloat64, mt::kInt32, mt::kInt64, mt::kUInt8;
  // Rows and columns in kAll order: f32 f64 f16 bf16 i64 i32 u8 bool.
  const mt::DType table[8][8] = {
      /* f32  */ {kFloat32, kFloat64, kFloat32, kFloat32, kFloat32, kFloat32, kFloat32, kFloat32},
      /* f64  */ {kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64, kFloat64},
      /* f16  */ {kFloat32, kFloat64, kFloat16, kFloat32, kFloat16, kFloat16, kFloat16, kFloat16},
      /* bf16 */ {kFloat32, kFloat64, kFloat32, kBFloat16, kBFloat16, kBFloat16, kBFloat16, kBFloat16},
      /* i64  */ {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt64, kInt64, kInt64},
      /* i32  */ {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt32, kInt32},
      /* u8   */ {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kUInt8},
      /* bool */ {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool},
  };
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(mt::promote_types(kAll[i], kAll[j]), table[i][j]) << kAll[i] << " + " << kAll[j];
}

// Binary ops on two dimensioned tensors produce promote_types of their dtypes.
TEST(DType, TensorTensorOpsFollowPromotion) {
  for (mt::DType a : kAll)
    for (mt::DType b : kAll) {
      if (a == mt::kBool && b == mt::kBool) continue;  // bool + bool is logical or in torch; not tested here
      mt::Tensor x = mt::ones({2}, {.dtype = a}), y = mt::ones({2}, {.dtype = b});
      mt::Tensor z = x + y;
      EXPECT_EQ(z.dtype(), mt::promote_types(a, b)) << a << " + " << b;
      EXPECT_EQ(z.to_vector<double>(), (std::vector<double>{2, 2})) << a << " + " << b;
      EXPECT_EQ((x == y).dtype(), mt::kBool);
    }
}

TEST(DType, TensorScalarPromotion) {
  auto i32 = mt::from_vector<int32_t>({1, 2});
  auto i64 = mt::from_vector<int64_t>({1, 2});
  auto u8 = mt::from_vector<uint8_t>({1, 2});
  auto f16 = mt::ones({2}, {.dtype = mt::kHalf});
  auto bf16 = mt::ones({2}, {.dtype = mt::kBFloat16});
  auto f64 = mt::ones({2}, {.dtype = mt::kDouble});
  auto b = mt::from_vector<bool>({true, false});

  // A float scalar lifts an integral tensor to the default float type.
  EXPECT_EQ((i32 * 1.5).dtype(), mt::kFloat32);
  EXPECT_EQ((i32 * 1.5).to_vector<float>(), (std::vector<float>{1.5f, 3.0f}));
  EXPECT_EQ((i64 + 0.5).dtype(), mt::kFloat32);
  EXPECT_EQ((u8 * 2.0).dtype(), mt::kFloat32);
  // An int scalar keeps the tensor's type, even a narrow one.
  EXPECT_EQ((i32 + 1).dtype(), mt::kInt32);
  EXPECT_EQ((u8 + 1).dtype(), mt::kUInt8);
  EXPECT_EQ((u8 + 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  // A float scalar never widens a float tensor.
  EXPECT_EQ((f16 + 1.0).dtype(), mt::kFloat16);
  EXPECT_EQ((bf16 * 2.0).dtype(), mt::kBFloat16);
  EXPECT_EQ((f64 * 2.0f).dtype(), mt::kFloat64);
  EXPECT_EQ((2.0 * f16).dtype(), mt::kFloat16);
  // bool tensors become int64 with int scalars, float32 with float scalars.
  EXPECT_EQ((b + 1).dtype(), mt::kInt64);
  EXPECT_EQ((b + 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ((b + 1.5).dtype(), mt::kFloat32);
  // True division of integers is float32.
  EXPECT_EQ((i64 / 2).dtype(), mt::kFloat32);
  EXPECT_EQ((i64 / 2).to_vector<float>(), (std::vector<float>{0.5f, 1.0f}));
  // Comparisons give bool.
  EXPECT_EQ((i32 > 1.5).dtype(), mt::kBool);
  EXPECT_EQ((i32 > 1.5).to_vector<bool>(), (std::vector<bool>{false, true}));
}

// A 0-dim tensor takes part in promotion only when its category (bool < int < float) is
// higher than the dimensioned operand's, and then with its own dtype (torch.result_type).
TEST(DType, ZeroDimTensorPromotion) {
  auto i32 = mt::from_vector<int32_t>({1, 2});
  auto f16 = mt::ones({2}, {.dtype = mt::kHalf});
  auto b = mt::from_vector<bool>({true, false});
  auto u8 = mt::from_vector<uint8_t>({1, 2});
  EXPECT_EQ((f16 + mt::scalar_tensor(1.0, {.dtype = mt::kDouble})).dtype(), mt::kFloat16);
  EXPECT_EQ((i32 + mt::scalar_tensor(2, {.dtype = mt::kInt64})).dtype(), mt::kInt32);
  EXPECT_EQ((i32 + mt::scalar_tensor(2.5, {.dtype = mt::kDouble})).dtype(), mt::kFloat64);
  EXPECT_EQ((u8 * mt::scalar_tensor(2.5, {.dtype = mt::kHalf})).dtype(), mt::kFloat16);
  EXPECT_EQ((b + mt::scalar_tensor(3, {.dtype = mt::kInt32})).dtype(), mt::kInt32);
  EXPECT_EQ((mt::scalar_tensor(3, {.dtype = mt::kInt32}) + b).dtype(), mt::kInt32);
  // Two 0-dim tensors promote normally.
  EXPECT_EQ((mt::scalar_tensor(1, {.dtype = mt::kInt64}) + mt::scalar_tensor(1.0, {.dtype = mt::kHalf})).dtype(),
            mt::kFloat16);
  EXPECT_EQ((mt::scalar_tensor(1.0, {.dtype = mt::kFloat}) + mt::scalar_tensor(1.0, {.dtype = mt::kDouble})).dtype(),
            mt::kFloat64);
}

// ---------------------------------------------------------------- float16

TEST(Float16, KnownBitPatterns) {
  EXPECT_EQ(half_bits(1.0f), 0x3C00);
  EXPECT_EQ(half_bits(-2.0f), 0xC000);
  EXPECT_EQ(half_bits(0.5f), 0x3800);
  EXPECT_EQ(half_bits(65504.0f), 0x7BFF);  // largest finite
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);                     // the sign of zero survives
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(half_bits(std::ldexp(1023.0f, -24)), 0x03FF);  // largest subnormal
}

TEST(Float16, Overflow) {
  EXPECT_EQ(half_bits(65519.0f), 0x7BFF);  // below the midpoint to 2^16: rounds down
  EXPECT_EQ(half_bits(65520.0f), 0x7C00);  // the midpoint rounds to even, which is inf
  EXPECT_EQ(half_bits(-65520.0f), 0xFC00);
  EXPECT_EQ(half_bits(1e6f), 0x7C00);
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xFC00);
}

TEST(Float16, RoundsToNearestEven) {
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);             // half the smallest subnormal: tie to even (0)
  EXPECT_EQ(half_bits(-std::ldexp(1.0f, -25)), 0x8000);            // ... keeping the sign
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);             // 1.5 ulp: tie to even (2)
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);   // just above the tie rounds up
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie between 0x3C00 and 0x3C01
  EXPECT_EQ(half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie between 0x3C01 and 0x3C02
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // above the tie
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -12)), 0x3C00);                          // below the tie
  // Subnormal results from normal float inputs round the same way.
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -16) + std::ldexp(1.0f, -25)), 0x0100);  // tie, even stays
  // The same rounding from float64 sources.
  EXPECT_EQ(half_bits_from_double(1.0 + std::ldexp(1.0, -11)), 0x3C00);
  EXPECT_EQ(half_bits_from_double(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);
  EXPECT_EQ(half_bits_from_double(65520.0), 0x7C00);
  EXPECT_EQ(half_bits_from_double(std::ldexp(1.0, -24)), 0x0001);
}

TEST(Float16, NaNStaysNaN) {
  uint16_t b = half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(b & 0x7C00, 0x7C00);
  EXPECT_NE(b & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(from_bits(0x7E00, mt::kHalf)));
  EXPECT_TRUE(std::isnan(from_bits(0xFC01, mt::kHalf)));
  // NaN survives arithmetic in float16 tensors as well.
  mt::Tensor h = mt::from_vector<float>({std::nanf(""), 1.0f}).to(mt::kHalf);
  std::vector<float> r = (h * 2.0).to_vector<float>();
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_EQ(r[1], 2.0f);
}

TEST(Float16, DecodesToFloat) {
  std::vector<float> v = from_bits({0x3C00, 0x7BFF, 0x0001, 0x0400, 0x7C00, 0xFC00, 0x8000, 0x3555}, mt::kHalf);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 65504.0f);
  EXPECT_EQ(v[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[3], std::ldexp(1.0f, -14));
  EXPECT_EQ(v[4], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[5], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[6], 0.0f);
  EXPECT_TRUE(std::signbit(v[6]));
  EXPECT_EQ(v[7], 0.333251953125f);  // float16's nearest to 1/3
  EXPECT_EQ(half_bits(1.0f / 3.0f), 0x3555);
}

TEST(Float16, EveryBitPatternRoundTrips) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  mt::Tensor h = mt::from_blob(all.data(), {65536}, mt::kHalf);
  mt::Tensor back = h.to(mt::kFloat).to(mt::kHalf);
  mt::Tensor via_double = h.to(mt::kDouble).to(mt::kHalf);
  const uint16_t* p = back.data_ptr<uint16_t>();
  const uint16_t* q = via_double.data_ptr<uint16_t>();
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    bool nan = (i & 0x7C00) == 0x7C00 && (i & 0x03FF) != 0;
    if (nan) {
      mismatches += !((p[i] & 0x7C00) == 0x7C00 && (p[i] & 0x03FF) != 0);
      continue;
    }
    mismatches += p[i] != all[i];
    mismatches += q[i] != all[i];
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Float16, ElementAccessAsHalf) {
  mt::Tensor h = mt::from_vector<float>({1.0f, 65504.0f, 65520.0f}).to(mt::kHalf);
  std::vector<mt::Half> v = h.to_vector<mt::Half>();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(Eigen::numext::bit_cast<uint16_t>(v[0]), 0x3C00);
  EXPECT_EQ(Eigen::numext::bit_cast<uint16_t>(v[1]), 0x7BFF);
  EXPECT_EQ(Eigen::numext::bit_cast<uint16_t>(v[2]), 0x7C00);
  // from_vector<Half> stores the bits unchanged.
  mt::Tensor h2 = mt::from_vector<mt::Half>(v);
  EXPECT_EQ(h2.dtype(), mt::kHalf);
  EXPECT_EQ(h2.data_ptr<uint16_t>()[1], 0x7BFF);
  EXPECT_EQ(h.select(0, 0).item<float>(), 1.0f);
}

// ---------------------------------------------------------------- bfloat16

TEST(BFloat16, KnownBitPatterns) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16_bits(-2.5f), 0xC020);
  EXPECT_EQ(bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7F80);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);                          // tie between 0x3F80 and 0x3F81
  EXPECT_EQ(bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);                      // tie between 0x3F81 and 0x3F82
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);  // above the tie
  EXPECT_EQ(bf16_bits(1.0f + std::ldexp(1.0f, -9)), 0x3F80);                          // below the tie
}

TEST(BFloat16, LargeValuesDoNotOverflow) {
  // bfloat16 has float32's exponent range: what overflows float16 is finite here.
  EXPECT_EQ(bf16_bits(65520.0f), 0x4780);  // 65536
  EXPECT_EQ(from_bits(0x4780, mt::kBFloat16), 65536.0f);
  EXPECT_EQ(bf16_bits(1e38f), 0x7E96);
  EXPECT_TRUE(std::isfinite(from_bits(bf16_bits(1e38f), mt::kBFloat16)));
  EXPECT_TRUE(std::isfinite(from_bits(bf16_bits(3e38f), mt::kBFloat16)));
  EXPECT_NEAR(from_bits(bf16_bits(1e38f), mt::kBFloat16), 1e38f, 1e38f / 128);
  EXPECT_EQ(bf16_bits(1e-38f), 0x006D);  // a float32 subnormal stays representable
}

TEST(BFloat16, NaNStaysNaN) {
  uint16_t b = bf16_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(b & 0x7F80, 0x7F80);
  EXPECT_NE(b & 0x007F, 0);
  // A NaN whose payload sits only in the low 16 bits must not round into infinity.
  uint32_t low_payload = 0x7F800001;
  float f;
  std::memcpy(&f, &low_payload, 4);
  uint16_t b2 = bf16_bits(f);
  EXPECT_EQ(b2 & 0x7F80, 0x7F80);
  EXPECT_NE(b2 & 0x007F, 0);
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  mt::Tensor h = mt::from_blob(all.data(), {65536}, mt::kBFloat16);
  std::vector<float> f = h.to(mt::kFloat).to_vector<float>();
  const uint16_t* p = h.to(mt::kFloat).to(mt::kBFloat16).data_ptr<uint16_t>();
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    // bfloat16 -> float32 is exact: the bits are the float's top half.
    uint32_t want = i << 16, got;
    std::memcpy(&got, &f[i], 4);
    bool nan = (i & 0x7F80) == 0x7F80 && (i & 0x007F) != 0;
    if (nan) {
      mismatches += !std::isnan(f[i]);
      continue;
    }
    mismatches += got != want;
    mismatches += p[i] != all[i];
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(BFloat16, ConvertsToAndFromOtherTypes) {
  mt::Tensor x = mt::from_vector<int64_t>({-3, 0, 7, 257}).to(mt::kBFloat16);
  // 257 needs 9 significant bits; bfloat16 has 8: it rounds to even (256).
  EXPECT_EQ(x.to_vector<int64_t>(), (std::vector<int64_t>{-3, 0, 7, 256}));
  mt::Tensor h = x.to(mt::kHalf);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{-3, 0, 7, 256}));
  EXPECT_EQ(mt::from_vector<float>({0.0f, 0.5f}).to(mt::kBFloat16).to(mt::kBool).to_vector<bool>(),
            (std::vector<bool>{false, true}));
}
