// Per-element math, written once for the CPU and CUDA launchers, and the elementwise op lists
// at the end of this file (docs/adding-an-op.md). The optimizer and loss-scaling steps are in
// core/step_math.h.
// Each functor maps compute-type values (float for fp16/bf16/fp32, double for fp64)
// to a compute-type result; the launchers convert from and to storage types.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/dtype_dispatch.h"  // MT_HOST_DEVICE
#if !defined(__CUDACC__)
#include <unsupported/Eigen/SpecialFunctions>
#endif

namespace mantissa::math {

// The two parts of e^x for float x within [-104, 89] (or NaN): e^r by Cephes' polynomial, with
// x = n ln2 + r and |r| <= ln2 / 2, and n. Plain float and integer arithmetic (n by adding
// 1.5 * 2^23, no conversion calls) that `omp simd` loops vectorize; exp_fast and
// math::exp_shifted put the two together.
struct ExpParts {
  float y;    // e^r, in [0.7, 1.42]
  int32_t n;  // the power of two
};
MT_HOST_DEVICE ExpParts exp_parts(float xc) {
  const float shifted = xc * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
#if defined(__CUDA_ARCH__)
  const int32_t ni = __float_as_int(shifted) - 0x4B400000;
#else
  const int32_t ni = std::bit_cast<int32_t>(shifted) - 0x4B400000;
#endif
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {p * r * r + r + 1.0f, ni};
}

// 2^e as a float for e in [-126, 127].
MT_HOST_DEVICE float pow2_float(int32_t e) {
#if defined(__CUDA_ARCH__)
  return __int_as_float((e + 127) << 23);
#else
  return std::bit_cast<float>((e + 127) << 23);
#endif
}

// exp(x) for float without a library call, so `omp simd` loops vectorize it (the nn kernels,
// gelu's backward), within 1 ulp of expf. 2^n applied in two halves, so that with x clamped to
// [-104, 89] the results below -87 are expf's denormals and those above 88.72 are +inf; NaN
// stays NaN (the clamps compare false). The exp op and sigmoid keep libmvec's expf: 1.2x slower
// than this on fp32, but this one inlined twice into the bf16 word-pair loop ran 18 % slower.
// The CUDA nn kernels call it too, so both devices round alike.
MT_HOST_DEVICE float exp_fast(float x) {
  const ExpParts e = exp_parts(x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x));
  const int32_t n1 = e.n >> 1;  // each half within a normal float's exponent
  return e.y * pow2_float(n1) * pow2_float(e.n - n1);
}

// exp in the compute type: the vectorizable float version, libm for double (gradcheck).
MT_HOST_DEVICE float exp_acc(float x) { return exp_fast(x); }
MT_HOST_DEVICE double exp_acc(double x) { return std::exp(x); }

template <typename T>
MT_HOST_DEVICE T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// erf in the compute type. float on the CPU: Eigen's rational interpolant (a few ulp, clamped to
// +-1 beyond |x| = 4, NaN stays NaN), plain arithmetic that vectorizes inside `omp simd` loops;
// libmvec's erff made gelu 2.3x slower. double (gradcheck) and CUDA: the library's erf.
template <typename T>
MT_HOST_DEVICE T erf_acc(T x) {
#if !defined(__CUDACC__)
  if constexpr (std::is_same_v<T, float>) return Eigen::internal::generic_fast_erf_float(x);
#endif
  return std::erf(x);
}

// Stateless functors whose body is one expression, one line each (x: the input; a, b: the
// operands; g, y: a gradient and the forward's output).
#define MT_ELEMENTWISE_FUNCTOR(Name, Ret, Params, expr) \
  struct Name {                                         \
    template <typename T>                               \
    MT_HOST_DEVICE Ret operator() Params const {        \
      return expr;                                      \
    }                                                   \
  }
#define MT_UNARY_FUNCTOR(Name, expr) MT_ELEMENTWISE_FUNCTOR(Name, T, (T x), expr)
#define MT_UNARY_PREDICATE(Name, expr) MT_ELEMENTWISE_FUNCTOR(Name, bool, (T x), expr)
#define MT_BINARY_FUNCTOR(Name, expr) MT_ELEMENTWISE_FUNCTOR(Name, T, (T a, T b), expr)
#define MT_BINARY_PREDICATE(Name, expr) MT_ELEMENTWISE_FUNCTOR(Name, bool, (T a, T b), expr)
#define MT_BACKWARD_FROM_OUTPUT(Name, expr) MT_ELEMENTWISE_FUNCTOR(Name, T, (T g, T y), expr)

// --- unary forward ---
MT_UNARY_FUNCTOR(Neg, -x);
// fabs for floats: abs(-0.0) is +0.0 (PyTorch), and it is one bit operation.
struct Abs {
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);
    else
      return x < T(0) ? T(-x) : x;
  }
};
MT_UNARY_FUNCTOR(Sign, T((T(0) < x) - (x < T(0))));
MT_UNARY_FUNCTOR(Exp, std::exp(x));
MT_UNARY_FUNCTOR(Log, std::log(x));
MT_UNARY_FUNCTOR(Log1p, std::log1p(x));
MT_UNARY_FUNCTOR(Sqrt, std::sqrt(x));
MT_UNARY_FUNCTOR(Rsqrt, T(1) / std::sqrt(x));
MT_UNARY_FUNCTOR(Sin, std::sin(x));
MT_UNARY_FUNCTOR(Cos, std::cos(x));
MT_UNARY_FUNCTOR(Tanh, std::tanh(x));
MT_UNARY_FUNCTOR(Sigmoid, sigmoid(x));
// NaN propagates (NaN < 0 is false), as in PyTorch: a diverging run must stay visible.
MT_UNARY_FUNCTOR(Relu, x < T(0) ? T(0) : x);
MT_UNARY_FUNCTOR(Erf, erf_acc(x));
MT_UNARY_FUNCTOR(Reciprocal, T(1) / x);
MT_UNARY_FUNCTOR(Square, x* x);
// gelu(x) = x * Phi(x), Phi the standard normal CDF.
MT_UNARY_FUNCTOR(GeluErf, T(0.5) * x * (T(1) + erf_acc(x * T(0.70710678118654752440))));
// gelu(x) ~= 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
struct GeluTanh {
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
};
MT_UNARY_FUNCTOR(Silu, x* sigmoid(x));
// softplus(x) = log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (PyTorch).
struct Softplus {
  double beta, threshold;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    const T bx = T(beta) * x;
    return bx > T(threshold) ? x : std::log1p(std::exp(bx)) / T(beta);
  }
};
// mish(x) = x tanh(softplus(x)), as torch computes it: exp(x) overflows to inf for large x,
// whose log1p and tanh give 1, so mish(x) = x there without softplus's threshold.
MT_UNARY_FUNCTOR(Mish, x* std::tanh(std::log1p(std::exp(x))));
// logsigmoid(x) = log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), as torch computes it.
MT_UNARY_FUNCTOR(LogSigmoid, (x < T(0) ? x : T(0)) - std::log1p(std::exp(-std::fabs(x))));
// x ^ e: the exponents PyTorch takes without pow (2, 3, 0.5, -0.5, -1, -2) by products, sqrt and
// division as it computes them (the list's own Square, Sqrt, Rsqrt and Reciprocal among them), 1
// and 0 as x and 1 (pow's own results for every x, NaN included; pow(x, 1) is what pow(x, 2)'s
// backward asked for, and pow took 2-10 ns an element, most on negative bases), integer
// exponents by PowInteger, others by pow. with_pow_kind runs a caller with the functor for e, so
// that the CPU loops choose once per call rather than per element: the branch kept GCC from
// vectorizing (pow of bf16 ran at 6 ns an element, 1.5x PyTorch's time).
MT_UNARY_FUNCTOR(PowOne, x);
MT_UNARY_FUNCTOR(PowZero, ((void)x, T(1)));
MT_UNARY_FUNCTOR(Cube, x* x* x);
MT_UNARY_FUNCTOR(InvSquare, T(1) / (x * x));
struct PowGeneral {
  double e;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    return std::pow(x, T(e));
  }
};
// An integer exponent: pow(|x|, e) with x's sign where e is odd (C's pow(x, e) for every x: -0,
// inf and NaN included); libmvec's vector powf leaves negative bases to its scalar path (10 ns an
// element: pow(randn, 4) ran at 2.3x PyTorch's time).
template <bool Odd>
struct PowInteger {
  double e;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    const T r = std::pow(std::fabs(x), T(e));
    return Odd ? std::copysign(r, x) : r;
  }
};
template <typename Run>
MT_HOST_DEVICE void with_pow_kind(double e, Run&& run) {
  if (e == 1.0) return run(PowOne{});
  if (e == 0.0) return run(PowZero{});
  if (e == 2.0) return run(Square{});
  if (e == 3.0) return run(Cube{});
  if (e == 0.5) return run(Sqrt{});
  if (e == -0.5) return run(Rsqrt{});
  if (e == -1.0) return run(Reciprocal{});
  if (e == -2.0) return run(InvSquare{});
  if (std::trunc(e) == e && std::fabs(e) < 0x1p53) {
    if (std::fmod(e, 2.0) == 0.0) return run(PowInteger<false>{e});
    return run(PowInteger<true>{e});
  }
  return run(PowGeneral{e});
}
struct PowScalar {
  double e;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    T y{};
    with_pow_kind(e, [&](auto f) { y = f(x); });
    return y;
  }
};
// leaky_relu: slope x where x <= 0 (NaN stays NaN: NaN > 0 is false, NaN slope is NaN).
struct LeakyRelu {
  double slope;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    return x > T(0) ? x : x * T(slope);
  }
};
// elu: alpha (e^x - 1) where x <= 0, by expm1 (its relative accuracy near 0), x elsewhere.
struct Elu {
  double alpha;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    return x > T(0) ? x : T(alpha) * std::expm1(x);
  }
};
// smooth-l1 of a difference d (beta > 0): 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta
// (smooth_l1_loss and huber_loss before their reduction).
struct SmoothL1 {
  double beta;
  template <typename T>
  MT_HOST_DEVICE T operator()(T d) const {
    const T a = std::fabs(d);
    return a < T(beta) ? T(0.5) * d * d / T(beta) : a - T(0.5 * beta);
  }
};
struct Clamp {
  double lo, hi;
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    // NaN propagates, as in PyTorch.
    if (x != x) return x;
    return x < T(lo) ? T(lo) : (x > T(hi) ? T(hi) : x);
  }
};

// --- binary forward ---
MT_BINARY_FUNCTOR(Add, a + b);
MT_BINARY_FUNCTOR(Sub, a - b);
MT_BINARY_FUNCTOR(Mul, a* b);
MT_BINARY_FUNCTOR(Div, a / b);
struct Maximum {
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
};
struct Minimum {
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    if (a != a) return a;
    if (b != b) return b;
    return a < b ? a : b;
  }
};
MT_BINARY_FUNCTOR(Pow, std::pow(a, b));

// Integer floor division, as torch's div with rounding_mode='floor'; the op checks for zero
// divisors before launching (0 here only keeps the kernel defined).
struct FloorDivInt {
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    if (b == T(0)) return T(0);
    T q = a / b;
    return (q * b != a && ((a < T(0)) != (b < T(0)))) ? T(q - 1) : q;
  }
};

// Comparisons and logical ops: inputs in the compute type, output bool.
MT_BINARY_PREDICATE(Eq, a == b);
MT_BINARY_PREDICATE(Ne, a != b);
MT_BINARY_PREDICATE(Lt, a < b);
MT_BINARY_PREDICATE(Le, a <= b);
MT_BINARY_PREDICATE(Gt, a > b);
MT_BINARY_PREDICATE(Ge, a >= b);
MT_BINARY_PREDICATE(LogicalAnd, a != T(0) && b != T(0));
MT_BINARY_PREDICATE(LogicalOr, a != T(0) || b != T(0));
MT_UNARY_PREDICATE(LogicalNot, !(x != T(0)));
// x - x is 0 for finite x and NaN for inf/NaN: no isfinite() needed on either side.
MT_UNARY_PREDICATE(IsFinite, x - x == T(0));

// --- fused backward formulas: (grad, saved) -> grad * f'(.) ---
// The activations with a parameter (the op's scalars, launch::binary's s0 and s1), of their
// input x, with PyTorch's gradient at the kinks and at NaN.
struct LeakyReluBackward {  // the slope at 0 and at NaN
  double slope;
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    return x > T(0) ? g : g * T(slope);
  }
};
struct EluBackward {  // alpha e^x at 0, NaN at NaN
  double alpha;
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    return x > T(0) ? g : g * exp_acc(x) * T(alpha);
  }
};
struct HardtanhBackward {  // 0 at and beyond the bounds and at NaN
  double lo, hi;
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    return x > T(lo) && x < T(hi) ? g : T(0);
  }
};
struct SmoothL1Backward {  // of the difference d: g clamp(d / beta, -1, 1), NaN at NaN
  double beta;
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T d) const {
    return d < T(-beta) ? -g : (d > T(beta) ? g : d / T(beta) * g);
  }
};
struct AddScaled {  // a + alpha b in one pass (add / sub / add_ with an alpha, floating only)
  double alpha;
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    return a + T(alpha) * b;
  }
};
struct SquareBackward {  // g 2x (PyTorch's mse_loss backward: 2 (input - target) g)
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    return g * (x + x);
  }
};
struct ReluBackward {
  // x is relu's output; PyTorch's threshold_backward passes g unless x <= 0 (so NaN passes g).
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    return x <= T(0) ? T(0) : g;
  }
};
struct GeluErfBackward {
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    T cdf = T(0.5) * (T(1) + erf_acc(x * T(0.70710678118654752440)));
    T pdf = exp_acc(T(-0.5) * x * x) * T(0.39894228040143267794);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    const T k = T(0.79788456080286535588);
    T x2 = x * x;
    T inner = k * (x + T(0.044715) * x2 * x);
    T th = std::tanh(inner);
    T dinner = k * (T(1) + T(3) * T(0.044715) * x2);
    return g * (T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * dinner);
  }
};
struct SiluBackward {
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    T s = sigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
MT_BACKWARD_FROM_OUTPUT(SigmoidBackwardFromOutput, g* y*(T(1) - y));
MT_BACKWARD_FROM_OUTPUT(TanhBackwardFromOutput, g*(T(1) - y * y));

// ---------------------------------------------------------------- the elementwise op lists
// One line per op; everything else is derived from these lists: the UnaryOp/BinaryOp enums
// and op names (core/backend.h), the CPU and CUDA dispatch with each domain's dtype rules
// (core/elementwise_dispatch.h), profiler range names, the op's autocast category
// (amp/autocast_policy.cpp), and for a unary op its public function, its differentiable op with
// the backward formula (autograd/ops.h, autograd/ops_elementwise.cpp) and its rows in the
// gradcheck, reference and edge tests. A functor with parameters takes the op's scalars (a, b)
// as its members, in order (PowScalar{a}, Clamp{a, b}).
//
// X(Enum, name, functor, domain, autocast category[, gradcheck inputs, op])
//   name    the op's name in errors, profiler ranges and the autocast table (#name), and for a
//           unary op with a generated or one-tensor function, that function: mantissa::name(x)
//   domain  Numeric: every dtype but bool, out of the input's dtype
//           Floating: floating dtypes, out of the input's dtype (the op computes an integer
//             input in float32, as torch's exp)
//           FloatingOnly: floating dtypes; the op refuses any other ("expected a floating-point
//             input"), as torch's activations
//           FloatingToBool / AnyToBool: out is bool
//           Arithmetic (binary): every dtype; integers apply IntegerForm<functor>
// Unary ops only:
//   gradcheck inputs  the float64 inputs tests/test_gradcheck.cpp checks it on: Any (in [-2, 2]),
//           Pos (in [0.3, 2.5]), Away (|x| >= 0.2: kinks and poles at 0), or NoGradcheck (not
//           differentiable, or checked by its own lines there)
//   op      Input(formula) / Output(formula[, fused]): the public function mantissa::name(x) and
//             its differentiable op are generated (autograd/ops_elementwise.cpp); the backward is
//             `formula`, an expression of the upstream gradient g and the saved input x (Input)
//             or output y (Output) made of differentiable mantissa ops (so double backward
//             works); `fused`, a binary entry below, computes the same in one kernel when no
//             graph of the backward is built. The formula is expanded only in autograd/.
//           Custom: mantissa::name(x) is declared from the list and written by hand in
//             autograd/ops_elementwise.cpp (bool inputs or other special cases)
//           Args: the op takes more arguments (scalars, a mode); written and declared by hand
// clang-format off
#define MT_UNARY_OPS(X)                                                                                 \
  X(Neg, neg, Neg, Numeric, PassThrough, Any, Custom)                                                   \
  X(Abs, abs, Abs, Numeric, PassThrough, Away, Custom)                                                  \
  X(Sign, sign, Sign, Numeric, PassThrough, NoGradcheck, Custom)                                        \
  X(Exp, exp, Exp, Floating, Fp32, Any, Output(g * y))                                                  \
  X(Log, log, Log, Floating, Fp32, Pos, Input(g / x))                                                   \
  X(Log1p, log1p, Log1p, Floating, Fp32, Pos, Input(g / (x + 1.0)))                                     \
  X(Sqrt, sqrt, Sqrt, Floating, PassThrough, Pos, Output(g / (y * 2.0)))                                \
  X(Rsqrt, rsqrt, Rsqrt, Floating, Fp32, Pos, Output(g * (y * y * y) * -0.5))                           \
  X(Sin, sin, Sin, Floating, PassThrough, Any, Input(g * cos(x)))                                       \
  X(Cos, cos, Cos, Floating, PassThrough, Any, Input(-(g * sin(x))))                                    \
  X(Tanh, tanh, Tanh, Floating, PassThrough, Any, Output(g * (1.0 - y * y), TanhBackwardFromOutput))    \
  X(Sigmoid, sigmoid, Sigmoid, Floating, PassThrough, Any,                                              \
    Output(g * y * (1.0 - y), SigmoidBackwardFromOutput))                                               \
  /* PyTorch's threshold_backward: g unless y <= 0 (so NaN passes g) */                                 \
  X(Relu, relu, Relu, Numeric, PassThrough, Away,                                                       \
    Output(g * logical_not(y <= 0).to(g.dtype()), ReluBackward))                                        \
  X(GeluErf, gelu, GeluErf, FloatingOnly, PassThrough, NoGradcheck, Args) /* approximate "none" */      \
  X(GeluTanh, gelu_tanh, GeluTanh, FloatingOnly, PassThrough, NoGradcheck, Args) /* gelu(x, "tanh") */  \
  X(Silu, silu, Silu, FloatingOnly, PassThrough, Any,                                                   \
    Input([&] { Tensor s = sigmoid(x); return g * s * (x * (1.0 - s) + 1.0); }(), SiluBackward))        \
  X(Softplus, softplus, Softplus, FloatingOnly, Fp32, NoGradcheck, Args) /* a: beta, b: threshold */    \
  /* torch's mish_backward: t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) */                        \
  X(Mish, mish, Mish, FloatingOnly, PassThrough, Any,                                                   \
    Input([&] { Tensor t = tanh(log1p(exp(x))); return g * (t + x * sigmoid(x) * (1.0 - t * t)); }()))  \
  X(LogSigmoid, logsigmoid, LogSigmoid, FloatingOnly, PassThrough, Any, Input(g * sigmoid(-x)))          \
  X(Erf, erf, Erf, Floating, PassThrough, Any, Input(g * exp(-(x * x)) * kTwoOverSqrtPi))               \
  X(Reciprocal, reciprocal, Reciprocal, Floating, Fp32, Away, Output(-(g * y * y)))                     \
  X(Square, square, Square, Numeric, PassThrough, Any, Custom)                                          \
  X(LogicalNot, logical_not, LogicalNot, AnyToBool, PassThrough, NoGradcheck, Custom)                   \
  X(PowScalar, pow_scalar, PowScalar, Floating, Fp32, NoGradcheck, Args) /* x ^ a */                    \
  X(Clamp, clamp, Clamp, Numeric, PassThrough, NoGradcheck, Args)        /* min(max(x, a), b) */        \
  X(LeakyRelu, leaky_relu, LeakyRelu, FloatingOnly, PassThrough, NoGradcheck, Args) /* a: slope */      \
  X(Elu, elu, Elu, FloatingOnly, PassThrough, NoGradcheck, Args)                    /* a: alpha */      \
  /* the elementwise smooth-l1 of a difference (smooth_l1_loss, huber_loss); a: beta */                 \
  X(SmoothL1, smooth_l1, SmoothL1, FloatingOnly, PassThrough, NoGradcheck, Args)                        \
  X(IsFinite, isfinite, IsFinite, FloatingToBool, PassThrough, NoGradcheck, Custom)
// clang-format on

// Selecting unary entries by their op column (the tests and autograd/ generate from these):
// MT_UNARY_IF_ONE_TENSOR(op, tokens) gives tokens for an op called as mantissa::name(x) (Input,
// Output, Custom) and nothing for Args; MT_UNARY_IF_GENERATED(op, tokens) gives them for Input
// and Output only. The op column itself (its formula) is not expanded here.
#define MT_PP_KEEP(...) __VA_ARGS__
#define MT_PP_DROP(...)
#define MT_PP_CAT(a, b) MT_PP_CAT_(a, b)
#define MT_PP_CAT_(a, b) a##b
#define MT_UNARY_IF_ONE_TENSOR(op, ...) MT_PP_CAT(MT_UNARY_ONE_TENSOR_, op)(__VA_ARGS__)
#define MT_UNARY_ONE_TENSOR_Input(...) MT_PP_KEEP
#define MT_UNARY_ONE_TENSOR_Output(...) MT_PP_KEEP
#define MT_UNARY_ONE_TENSOR_Custom MT_PP_KEEP
#define MT_UNARY_ONE_TENSOR_Args MT_PP_DROP
#define MT_UNARY_IF_GENERATED(op, ...) MT_PP_CAT(MT_UNARY_GENERATED_, op)(__VA_ARGS__)
#define MT_UNARY_GENERATED_Input(...) MT_PP_KEEP
#define MT_UNARY_GENERATED_Output(...) MT_PP_KEEP
#define MT_UNARY_GENERATED_Custom MT_PP_DROP
#define MT_UNARY_GENERATED_Args MT_PP_DROP

#define MT_BINARY_OPS(X)                                                                           \
  X(Add, add, Add, Arithmetic, PassThrough)                                                        \
  X(Sub, sub, Sub, Arithmetic, PassThrough)                                                        \
  X(Mul, mul, Mul, Arithmetic, PassThrough)                                                        \
  X(Div, div, Div, Arithmetic, PassThrough)                                                        \
  X(Maximum, maximum, Maximum, Arithmetic, PassThrough)                                            \
  X(Minimum, minimum, Minimum, Arithmetic, PassThrough)                                            \
  X(Pow, pow, Pow, Floating, Fp32)                                                                 \
  X(Eq, eq, Eq, AnyToBool, PassThrough)                                                            \
  X(Ne, ne, Ne, AnyToBool, PassThrough)                                                            \
  X(Lt, lt, Lt, AnyToBool, PassThrough)                                                            \
  X(Le, le, Le, AnyToBool, PassThrough)                                                            \
  X(Gt, gt, Gt, AnyToBool, PassThrough)                                                            \
  X(Ge, ge, Ge, AnyToBool, PassThrough)                                                            \
  X(LogicalAnd, logical_and, LogicalAnd, AnyToBool, PassThrough)                                   \
  X(LogicalOr, logical_or, LogicalOr, AnyToBool, PassThrough)                                      \
  /* Fused backward formulas: (grad, x) -> grad * f'(x) */                                         \
  X(ReluBackward, relu_backward, ReluBackward, Floating, PassThrough)                              \
  X(GeluErfBackward, gelu_backward, GeluErfBackward, Floating, PassThrough)                        \
  X(GeluTanhBackward, gelu_tanh_backward, GeluTanhBackward, Floating, PassThrough)                 \
  X(SiluBackward, silu_backward, SiluBackward, Floating, PassThrough)                              \
  X(SigmoidBackwardFromOutput, sigmoid_backward, SigmoidBackwardFromOutput, Floating, PassThrough) \
  X(TanhBackwardFromOutput, tanh_backward, TanhBackwardFromOutput, Floating, PassThrough)          \
  X(LeakyReluBackward, leaky_relu_backward, LeakyReluBackward, Floating, PassThrough)              \
  X(EluBackward, elu_backward, EluBackward, Floating, PassThrough)                                 \
  X(HardtanhBackward, hardtanh_backward, HardtanhBackward, Floating, PassThrough)                  \
  X(SmoothL1Backward, smooth_l1_backward, SmoothL1Backward, Floating, PassThrough)                 \
  X(SquareBackward, square_backward, SquareBackward, Floating, PassThrough)                        \
  X(AddScaled, add_scaled, AddScaled, Floating, PassThrough)

// Reductions (kernels: core/cpu/reduce.cpp, cuda/reduce.cu). X(Enum, name, autocast category)
#define MT_REDUCE_OPS(X)         \
  X(Sum, sum, Fp32)              \
  X(Prod, prod, Fp32)            \
  X(Max, max, PassThrough)       \
  X(Min, min, PassThrough)       \
  X(ArgMax, argmax, PassThrough) \
  X(ArgMin, argmin, PassThrough)

// The integer version of an Arithmetic binary functor (division floors on integers).
template <typename F>
struct IntegerForm {
  using type = F;
};
template <>
struct IntegerForm<Div> {
  using type = FloorDivInt;
};

// A functor built from an op's scalar arguments: F{a, b}, F{a} or F{}, whichever F takes.
template <typename F>
MT_HOST_DEVICE F make_functor(double a, double b) {
  if constexpr (requires { F{a, b}; })
    return F{a, b};
  else if constexpr (requires { F{a}; })
    return F{a};
  else
    return F{};
}

}  // namespace mantissa::math
