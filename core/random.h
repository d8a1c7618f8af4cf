// The seedable random number generator behind every random factory.
// The same seed gives the same numbers on every run and machine.
//
// A Generator is safe for concurrent use: every draw holds its mutex, and a factory holds it
// for the whole tensor, so two threads drawing at once each get a contiguous run of the stream
// (which thread gets which run is up to the scheduler; a single-threaded program's numbers are
// the same as without the lock). rand, randn, uniform and normal take one draw, the seed of
// the tensor's counter-based values (core/cpu/random_fill.h: any number of threads fill it
// alike); randint, bernoulli and randperm draw every element from the stream.
#pragma once
#include <cstdint>
#include <mutex>
#include <random>
#include <string>

#include "core/tensor.h"

namespace mantissa {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x6d616e74697373ULL) : engine_(seed) {}
  Generator(const Generator& other);  // copies the state under other's lock
  Generator& operator=(const Generator& other);
  void seed(uint64_t s);
  uint64_t next_u64();  // one raw 64-bit draw of the engine
  double uniform();     // [0, 1)
  double normal();      // N(0, 1)
  // Serialized engine state (for checkpoints); set_state throws on malformed input.
  std::string get_state() const;
  void set_state(const std::string& state);

  // The unlocked draws, for a caller that holds the lock over many of them (Locked below).
  class Locked {
   public:
    explicit Locked(Generator& g) : g_(g), lock_(g.mu_) {}
    uint64_t next_u64() { return g_.engine_(); }
    double uniform() { return g_.uniform_unlocked(); }
    double normal() { return g_.normal_unlocked(); }

   private:
    Generator& g_;
    std::lock_guard<std::mutex> lock_;
  };

 private:
  double uniform_unlocked();
  double normal_unlocked();

  mutable std::mutex mu_;
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
// x * m for the dropout mask m of `seed` (a value of default_generator().next_u64(), as
// dropout_mask draws; element i of x's logical order), in one pass without m in memory. With
// keep_bits, also m's keep bits (uint8, bit i % 8 of byte i / 8: n / 8 bytes where m would take
// n elements) for dropout_apply_kept. No autograd: nn::functional::dropout records it.
Tensor dropout_with_seed(const Tensor& x, double p, uint64_t seed, Tensor* keep_bits = nullptr);
// g * m for the m whose keep bits dropout_with_seed wrote (g of x's shape and dtype): its backward.
Tensor dropout_apply_kept(const Tensor& g, const Tensor& keep_bits, double p);
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& opts = {});
Tensor normal(const Shape& shape, double mean, double stddev, const TensorOptions& opts = {});

}  // namespace mantissa
