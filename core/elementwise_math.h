// Per-element math, written once for the CPU and CUDA launchers (design §3).
// Each functor maps compute-type values (float for fp16/bf16/fp32, double for fp64)
// to a compute-type result; the launchers convert from and to storage types.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MT_HOST_DEVICE inline
#endif

namespace mantissa::math {

template <typename T>
MT_HOST_DEVICE T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// --- unary forward ---
struct Neg { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return -x; } };
struct Abs { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return x < T(0) ? -x : x; } };
struct Sign {
  template <typename T> MT_HOST_DEVICE T operator()(T x) const { return T((T(0) < x) - (x < T(0))); }
};
struct Exp { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::exp(x); } };
struct Log { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::log(x); } };
struct Log1p { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::log1p(x); } };
struct Sqrt { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::sqrt(x); } };
struct Rsqrt { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return T(1) / std::sqrt(x); } };
struct Sin { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::sin(x); } };
struct Cos { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::cos(x); } };
struct Tanh { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::tanh(x); } };
struct Sigmoid { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return sigmoid(x); } };
struct Relu { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : T(0); } };
struct Erf { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return std::erf(x); } };
struct Reciprocal { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return T(1) / x; } };
struct Square { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return x * x; } };
// gelu(x) = x * Phi(x), Phi the standard normal CDF.
struct GeluErf {
  template <typename T> MT_HOST_DEVICE T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
// gelu(x) ~= 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
struct GeluTanh {
  template <typename T> MT_HOST_DEVICE T operator()(T x) const {
    T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
};
struct Silu { template <typename T> MT_HOST_DEVICE T operator()(T x) const { return x * sigmoid(x); } };
struct PowScalar {
  double e;
  template <typename T> MT_HOST_DEVICE T operator()(T x) const {
    if (e == 2.0) return x * x;
    if (e == 0.5) return std::sqrt(x);
    return std::pow(x, T(e));
  }
};
struct Clamp {
  double lo, hi;
  template <typename T> MT_HOST_DEVICE T operator()(T x) const {
    // NaN propagates, as in PyTorch.
    if (x != x) return x;
    return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x);
  }
};

// --- binary forward ---
struct Add { template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const { return a + b; } };
struct Sub { template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const { return a - b; } };
struct Mul { template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const { return a * b; } };
struct Div { template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const { return a / b; } };
struct Maximum {
  template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
};
struct Minimum {
  template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a < b ? a : b;
  }
};
struct Pow { template <typename T> MT_HOST_DEVICE T operator()(T a, T b) const { return std::pow(a, b); } };

// --- fused backward formulas: (grad, saved) -> grad * f'(.) ---
struct ReluBackward {
  template <typename T> MT_HOST_DEVICE T operator()(T g, T x) const { return x > T(0) ? g : T(0); }
};
struct GeluErfBackward {
  template <typename T> MT_HOST_DEVICE T operator()(T g, T x) const {
    T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {
  template <typename T> MT_HOST_DEVICE T operator()(T g, T x) const {
    const T k = T(0.79788456080286535588);
    T x2 = x * x;
    T inner = k * (x + T(0.044715) * x2 * x);
    T th = std::tanh(inner);
    T dinner = k * (T(1) + T(3) * T(0.044715) * x2);
    return g * (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * dinner);
  }
};
struct SiluBackward {
  template <typename T> MT_HOST_DEVICE T operator()(T g, T x) const {
    T s = sigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
struct SigmoidBackwardFromOutput {
  template <typename T> MT_HOST_DEVICE T operator()(T g, T y) const { return g * y * (T(1) - y); }
};
struct TanhBackwardFromOutput {
  template <typename T> MT_HOST_DEVICE T operator()(T g, T y) const { return g * (T(1) - y * y); }
};

// --- optimizer and loss-scaling steps (applied per parameter element) ---

// Unscale a gradient by 1/scale and report whether it was finite.
struct UnscaleAndCheck {
  float inv_scale;
  MT_HOST_DEVICE float operator()(float g, bool& found_inf) const {
    if (!(g - g == 0.0f)) found_inf = true;  // true for inf and NaN
    return g * inv_scale;
  }
};

// One Adam/AdamW update of a single element; all moments in fp32.
struct AdamUpdate {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^t
  bool decoupled;                            // AdamW: decay the weight, not the gradient
  MT_HOST_DEVICE void operator()(float& w, float g, float& m, float& v) const {
    if (weight_decay != 0.0f) {
      if (decoupled) w -= lr * weight_decay * w;
      else g += weight_decay * w;
    }
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    float denom = std::sqrt(v / bias_correction2) + eps;
    w -= (lr / bias_correction1) * m / denom;
  }
};

// One SGD update with optional momentum / dampening / nesterov / weight decay.
struct SgdUpdate {
  float lr, momentum, dampening, weight_decay;
  bool nesterov, first_step;
  MT_HOST_DEVICE void operator()(float& w, float g, float& buf) const {
    if (weight_decay != 0.0f) g += weight_decay * w;
    if (momentum != 0.0f) {
      buf = first_step ? g : momentum * buf + (1.0f - dampening) * g;
      g = nesterov ? g + momentum * buf : buf;
    }
    w -= lr * g;
  }
};

}  // namespace mantissa::math
