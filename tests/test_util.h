// Helpers shared by the test files.
#pragma once
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mantissa.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

// EXPECT_ERROR(stmt, HasSubstr("matmul"), HasSubstr("[2, 3]")): stmt throws mantissa::Error with
// a message matching every matcher.
#define EXPECT_ERROR(stmt, ...) \
  EXPECT_THAT([&] { (void)(stmt); }, testing::ThrowsMessage<::mantissa::Error>(testing::AllOf(__VA_ARGS__)))

namespace mantissa::test {

// `got` against a tensor {"shape": [...], "data": [...]} that a tools/gen_reference*.py script
// wrote: same shape, every element within tol * (1 + |want|). A null reference (no gradient
// in PyTorch) expects an undefined tensor.
inline void expect_close_to_reference(const Tensor& got, const nlohmann::json& want, double tol,
                                      const std::string& what) {
  if (want.is_null()) {
    EXPECT_FALSE(got.defined()) << what;
    return;
  }
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_EQ(got.sizes(), want.at("shape").get<Shape>()) << what;
  const std::vector<double> g = got.to_vector<double>();
  const std::vector<double> w = want.at("data").get<std::vector<double>>();
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " element " << i;
}

// The committed reference fixture tests/fixtures/<name>, parsed once per process; a missing file
// fails the test naming the generator that writes it.
inline const nlohmann::json& load_fixture(const std::string& name, const std::string& generator) {
  static std::map<std::string, nlohmann::json> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::ifstream f(std::string(MANTISSA_TEST_DIR) + "/fixtures/" + name);
  EXPECT_TRUE(f.good()) << "missing tests/fixtures/" << name << " (run " << generator << ")";
  return cache[name] = f.good() ? nlohmann::json::parse(f) : nlohmann::json::object();
}

// How many bf16 steps apart two values are that are exactly bf16 (ordered bit patterns: +-0
// are 0 apart, 0 and the least denormal 1); NaN against anything but NaN is far apart.
inline int64_t bf16_steps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1 << 20;
  auto ordered = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const int64_t m = int64_t(u >> 16);
    return m & 0x8000 ? -(m & 0x7FFF) : m;
  };
  return std::abs(ordered(a) - ordered(b));
}

// A two-level module tree (Net > block > fc, and head) for the profiler tests: input [*, 4],
// output [*, 3].
struct Block : nn::Module {
  nn::Linear fc{4, 6};
  Block() { register_module("fc", fc); }
  Tensor forward(const Tensor& x) override { return relu(fc(x)); }
};

struct Net : nn::Module {
  Block block;
  nn::Linear head{6, 3};
  Net() {
    register_module("block", block);
    register_module("head", head);
  }
  Tensor forward(const Tensor& x) override { return head(block(x)); }
};

}  // namespace mantissa::test
