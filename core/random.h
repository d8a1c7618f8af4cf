// The seedable random number generator behind every random factory.
// The same seed gives the same numbers on every run and machine.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include "core/tensor.h"

namespace mantissa {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x6d616e74697373ULL) : engine_(seed) {}
  void seed(uint64_t s) { engine_.seed(s); }
  std::mt19937_64& engine() { return engine_; }
  double uniform();  // [0, 1)
  double normal();   // N(0, 1)
  // Serialized engine state (for checkpoints); set_state throws on malformed input.
  std::string get_state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

Tensor rand(const Shape& shape, const TensorOptions& opts = {});   // U[0, 1)
Tensor randn(const Shape& shape, const TensorOptions& opts = {});  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts = {.dtype = DType::Int64});
Tensor bernoulli(const Shape& shape, double p, const TensorOptions& opts = {});
Tensor bernoulli(const Tensor& p);  // each element 1 with probability p[i]
Tensor randperm(int64_t n);         // int64
// A dropout mask: each element 1 / (1 - p) with probability 1 - p, else 0 (0 <= p < 1).
// Counter-based (Philox, core/philox.h): one draw from the default generator seeds it, and
// the mask is a function of that seed alone, identical on the CPU and on a GPU.
Tensor dropout_mask(const Shape& shape, double p, const TensorOptions& opts = {});
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& opts = {});
Tensor normal(const Shape& shape, double mean, double stddev, const TensorOptions& opts = {});

}  // namespace mantissa
