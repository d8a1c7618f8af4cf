#include "core/random.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/backend.h"
#include "core/cpu/random_fill.h"
#include "core/error.h"
#include "core/launch.h"
#include "core/shape.h"

namespace mantissa {

Generator::Generator(const Generator& other) {
  std::lock_guard<std::mutex> lock(other.mu_);
  engine_ = other.engine_;
  has_spare_ = other.has_spare_;
  spare_ = other.spare_;
}

Generator& Generator::operator=(const Generator& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  engine_ = other.engine_;
  has_spare_ = other.has_spare_;
  spare_ = other.spare_;
  return *this;
}

void Generator::seed(uint64_t s) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_.seed(s);
}

uint64_t Generator::next_u64() { return Locked(*this).next_u64(); }
double Generator::uniform() { return Locked(*this).uniform(); }
double Generator::normal() { return Locked(*this).normal(); }

double Generator::uniform_unlocked() {
  // 53 random bits -> [0, 1), independent of the standard library's distributions.
  return double(engine_() >> 11) * (1.0 / 9007199254740992.0);
}

double Generator::normal_unlocked() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Box-Muller: two uniforms give two independent normals.
  double u1 = uniform_unlocked(), u2 = uniform_unlocked();
  if (u1 < 1e-300) u1 = 1e-300;
  double r = std::sqrt(-2.0 * std::log(u1)), th = 2.0 * M_PI * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

std::string Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  os << engine_ << ' ' << has_spare_ << ' ';
  os.precision(17);
  os << spare_;
  return os.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream is(state);
  std::mt19937_64 e;
  bool has = false;
  double sp = 0;
  is >> e >> has >> sp;
  MT_CHECK(!is.fail(), "Generator::set_state", "malformed generator state (", state.size(), " bytes)");
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = e;
  has_spare_ = has;
  spare_ = sp;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

namespace {
// Draws in float64 into tensor memory (so a shape too big is a clear mantissa::Error from
// the allocator, not std::bad_alloc), then converts to the requested dtype and device.
// The default generator's lock is held over the whole tensor; next(g) draws from the Locked g.
template <typename Fn>
Tensor generate(const char* op, const Shape& shape, const TensorOptions& opts, Fn next) {
  const int64_t n = checked_numel(shape, op);
  Tensor v = make_tensor(shape, DType::Float64, Device::cpu());
  double* p = v.data_ptr<double>();
  {
    Generator::Locked g(default_generator());
    for (int64_t i = 0; i < n; ++i) p[i] = next(g);
  }
  Tensor t = launch::convert(v, opts.dtype, opts.device);
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

// rand, randn, normal, uniform: one draw of the default generator seeds the tensor's
// counter-based values (core/cpu/random_fill.h), drawn on the threads in the tensor's dtype
// (float for every dtype but float64), then converted to the requested dtype and device.
template <typename Fill>
Tensor counter_based(const char* op, const Shape& shape, const TensorOptions& opts, Fill fill) {
  checked_numel(shape, op);
  const bool fp64 = opts.dtype == DType::Float64;
  Tensor v = make_tensor(shape, fp64 ? DType::Float64 : DType::Float32, Device::cpu());
  const uint64_t seed = default_generator().next_u64();
  if (fp64)
    fill(v.data_ptr<double>(), v.numel(), seed);
  else
    fill(v.data_ptr<float>(), v.numel(), seed);
  Tensor t = launch::convert(v, opts.dtype, opts.device);
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

// The fills of U[low, high) and N(mean, stddev^2) for counter_based.
auto uniform_values(double low, double high) {
  return [=]<typename T>(T* out, int64_t n, uint64_t seed) { cpu::uniform_fill(out, n, seed, T(low), T(high)); };
}
auto normal_values(double mean, double stddev) {
  return [=]<typename T>(T* out, int64_t n, uint64_t seed) { cpu::normal_fill(out, n, seed, T(mean), T(stddev)); };
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& opts) {
  return counter_based("uniform", shape, opts, uniform_values(low, high));
}
Tensor normal(const Shape& shape, double mean, double stddev, const TensorOptions& opts) {
  return counter_based("normal", shape, opts, normal_values(mean, stddev));
}
Tensor rand(const Shape& shape, const TensorOptions& opts) {
  return counter_based("rand", shape, opts, uniform_values(0, 1));
}
Tensor randn(const Shape& shape, const TensorOptions& opts) {
  return counter_based("randn", shape, opts, normal_values(0, 1));
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts) {
  MT_CHECK(high > low, "randint", "empty range [", low, ", ", high, ")");
  uint64_t span = uint64_t(high - low);
  return generate("randint", shape, opts,
                  [&](Generator::Locked& g) { return double(low + int64_t(g.next_u64() % span)); });
}

Tensor bernoulli(const Shape& shape, double p, const TensorOptions& opts) {
  MT_CHECK(p >= 0 && p <= 1, "bernoulli", "probability must be in [0, 1], got ", p);
  return generate("bernoulli", shape, opts, [&](Generator::Locked& g) { return g.uniform() < p ? 1.0 : 0.0; });
}

Tensor bernoulli(const Tensor& p) {
  std::vector<double> probs = p.to_vector<double>();
  size_t i = 0;
  for (double q : probs) MT_CHECK(q >= 0 && q <= 1, "bernoulli", "probability must be in [0, 1], got ", q);
  return generate("bernoulli", p.sizes(), {.dtype = p.dtype(), .device = p.device()},
                  [&](Generator::Locked& g) { return g.uniform() < probs[i++] ? 1.0 : 0.0; });
}

Tensor randperm(int64_t n) {
  MT_CHECK(n >= 0, "randperm", "n must be non-negative, got ", n);
  Tensor t = make_tensor({n}, DType::Int64, Device::cpu());
  int64_t* v = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  Generator::Locked g(default_generator());
  for (int64_t i = n - 1; i > 0; --i) std::swap(v[i], v[g.next_u64() % uint64_t(i + 1)]);
  return t;
}

Tensor dropout_mask(const Shape& shape, double p, const TensorOptions& opts) {
  MT_CHECK(p >= 0 && p < 1, "dropout_mask", "probability must be in [0, 1), got ", p);
  MT_CHECK(is_floating(opts.dtype), "dropout_mask", "expected a floating dtype, got ", dtype_name(opts.dtype));
  const uint64_t seed = default_generator().next_u64();
  Tensor mask = make_tensor(shape, opts.dtype, opts.device);
  backend_for(opts.device).dropout(Tensor(), mask, Tensor(), p, seed);
  return mask;
}

Tensor dropout_with_seed(const Tensor& x, double p, uint64_t seed, Tensor* keep_bits) {
  MT_CHECK(p >= 0 && p < 1, "dropout", "probability must be in [0, 1), got ", p);
  MT_CHECK(is_floating(x.dtype()), "dropout", "expected a floating-point input, got ", dtype_name(x.dtype()));
  const Tensor xc = launch::contiguous(x);
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  if (keep_bits) *keep_bits = make_tensor({(x.numel() + 63) / 64 * 8}, DType::UInt8, x.device());
  backend_for(x.device()).dropout(xc, out, keep_bits ? *keep_bits : Tensor(), p, seed);
  return out;
}

Tensor dropout_apply_kept(const Tensor& g, const Tensor& keep_bits, double p) {
  // The kernels read the bits as whole 64-bit words (the CPU) or bytes up to the last word
  // dropout_with_seed wrote: ceil(n / 64) * 8 bytes, as it allocates them.
  const int64_t need = (g.numel() + 63) / 64 * 8;
  MT_CHECK(keep_bits.dtype() == DType::UInt8 && keep_bits.numel() >= need && keep_bits.device() == g.device(),
           "dropout", "keep bits of ", keep_bits.numel(), " bytes (", dtype_name(keep_bits.dtype()), ", ",
           keep_bits.device(), ") do not cover ", g.numel(), " elements on ", g.device(), " (", need,
           " bytes of uint8)");
  const Tensor gc = launch::contiguous(g), bits = launch::contiguous(keep_bits);
  Tensor out = make_tensor(g.sizes(), g.dtype(), g.device());
  backend_for(g.device()).dropout_backward(gc, bits, out, p);
  return out;
}

}  // namespace mantissa
