// Vector math for the CPU kernels whose time goes into a transcendental function: exp over a
// row of floats (the exp op, softmax, log_softmax, attention's scores) and the AVX-512 forms of
// the elementwise functors exp, tanh, sigmoid, silu, gelu (both forms) and the backward of the
// last two, leaky_relu, elu, smooth-l1 and their backward, hardtanh's backward (the unary and
// binary launchers' contiguous loops). tanh is Eigen's branch-free
// rational (2x libmvec's tanhf in fp32 and bf16; Cephes' tanhf, with both branches and a
// division per vector, had been 7 % faster in fp32 and 10 % slower in bf16), and a smaller
// rational for bf16 results (tanh16).
// exp on AVX-512: Cephes' reduction (as math::exp_parts), a degree-6 minimax polynomial, and 2^n
// applied by one vscalefps, which also gives expf's denormals below -87 and +inf above 88.72
// with no selects: 13 vector operations per 16 floats against about 22 for math::exp_fast's
// integer-built powers of two as GCC vectorizes them (fp32 exp 30 -> 50 GB/s on Zen 5, one
// thread, with Cephes' polynomial; 5 % more with this one). Elsewhere: math::exp_fast in an
// `omp simd` loop. Both within 1.3 ulp of expf, with its denormals, infinities and NaN.
// A result rounded to bf16 (8 significant bits) does not need that: the forms take a tag,
// Fp32Result or Bf16Result, and the bf16 one (the bf16 -> bf16 elementwise loops, softmax and
// log_softmax with a bf16 output; not their backward, whose g - exp(y) s cancels) runs exp16's
// cheaper twin, 7 vector operations instead of 13 (within 3.4e-6 of e^x): bf16 exp 1.7x,
// sigmoid/silu 1.5x, softmax 1.2-1.45x faster on Zen 5, one thread.
#pragma once
#include <cstdint>
#include <type_traits>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/cpu/loops.h"
#include "core/elementwise_math.h"
#include "core/half.h"

namespace mantissa::cpu {

// How accurate a vector form must be: for an fp32 result (exp within 1.3 ulp of expf) or for a
// result that will be rounded to bf16 (exp's 3.4e-6 relative is under a thousandth of a bf16
// step: over all 65536 bf16 inputs, exp, tanh, sigmoid, silu and gelu's tanh form each round a
// few results one step away from the fp32 kernel's, tests/test_vector_math.cpp). Strided bf16 inputs
// go through the scalar functors (fp32 accuracy), so they can differ from a contiguous copy's
// result by that one step just as rarely.
struct Fp32Result {};
struct Bf16Result {};
template <typename T>
using ResultPrecision = std::conditional_t<std::is_same_v<T, BFloat16>, Bf16Result, Fp32Result>;

#if defined(__AVX512F__)
// e^(r + n ln2_lo) 2^n for exp16's reduction, r = x - n ln2_hi: the low part of ln 2 added, the
// polynomial, the scaling.
inline __m512 exp_poly_scale(__m512 n, __m512 r) {
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(0.00140612409f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.00837901141f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.0416647755f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.166663662f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.50000006f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
// e^x for 16 floats: n = round(x log2 e), r = x - n ln 2 (ln 2 in two parts, Cephes'), e^r by a
// degree-6 polynomial with p(0) = 1 (Remez, 2.6e-9 relative on [-ln2/2, ln2/2]) in Horner form,
// times 2^n by vscalefps, which gives expf's denormals below -87.3, 0 below -103.97 and inf
// above 88.72. x is clamped to [-104, 89] first (NaN kept: vmaxps/vminps return their second
// operand when one is NaN): for larger |x|, x - n ln 2 is no longer small (and inf - inf is
// NaN). 13 vector operations, within 1.16 ulp of double exp from -110 to 90 (Cephes' own
// polynomial, 1 + r + r^2 P(r): 15 operations, 1.24 ulp; 5 % slower). A vfixupimmps of the
// infinities instead of the clamp gave inf for exp(-2e14), and vrangeps, a one-operation
// clamp, returns the bound for NaN.
// exp16 of an x known to be at most 89 or NaN (softmax's x - max, attention's s - lse): the
// same results without the upper bound, one operation fewer on the exp's dependency chain (on
// Zen 5, whose exps wait on their latency: fp32 softmax rows +7-14 %, log_softmax rows +5 %).
inline __m512 exp16_nonpositive(__m512 x, Fp32Result = {}) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), kNearest);
  return exp_poly_scale(n, _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
}
// (The two bounds commute, NaN included: vminps / vmaxps return their second operand for NaN.)
inline __m512 exp16(__m512 x, Fp32Result = {}) { return exp16_nonpositive(_mm512_min_ps(_mm512_set1_ps(89.0f), x)); }

// 2^t for exp16's bf16 form (below).
inline __m512 exp2_bf16(__m512 t) {
  const __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // t - floor(t)
  __m512 p = _mm512_set1_ps(0.0135557419f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.0520323701f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.241379768f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.693032146f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, t);  // p 2^floor(t)
}
// e^x = 2^t, t = x log2(e), for a bf16 result: 2^(t - floor(t)) by a degree-4 polynomial whose
// relative error is at most 3.4e-6 on [0, 1] (Remez, with p(0) = 1 and p(1) = 2 exactly in
// float Horner: a softmax row's maximum contributes exactly 1, so log_softmax's log(sum) keeps
// its relative accuracy for a confident row, and t just below an integer, where t - floor(t)
// rounds to 1 (x a denormal, or just below a row's maximum), gives 2^ceil(t) rather than the
// polynomial's largest error), then times 2^floor(t) by vscalefps, which floors t itself:
// vreduceps in round-down mode and vscalefps agree on the integer part, so no rounding operation
// is needed (7 operations; with round-to-nearest on [-1/2, 1/2], 8 and 3.6e-6). t's own
// rounding adds up to 2^-24 |t| ln 2 (5e-6 at the ends of the range). vreduceps gives 0 for
// +-inf, so no clamp is needed: scalef by +-inf makes inf and 0, NaN stays NaN.
inline __m512 exp16(__m512 x, Bf16Result) { return exp2_bf16(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f))); }
inline __m512 exp16_nonpositive(__m512 x, Bf16Result) { return exp16(x, Bf16Result{}); }

// e^-x, bit for bit exp16(-x) without the negation: x clamped to [-89, 104], n = round(x (-log2 e))
// (the same product as (-x) log2 e), r = -x - n ln 2 by fnmsub (the same sum, rounded once);
// the bf16 form's t = x (-log2 e) likewise.
inline __m512 exp16_neg(__m512 x, Fp32Result = {}) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  x = _mm512_max_ps(_mm512_set1_ps(-89.0f), _mm512_min_ps(_mm512_set1_ps(104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(-1.44269504088896341f)), kNearest);
  return exp_poly_scale(n, _mm512_fnmsub_ps(n, _mm512_set1_ps(0.693359375f), x));
}
inline __m512 exp16_neg(__m512 x, Bf16Result) {
  return exp2_bf16(_mm512_mul_ps(x, _mm512_set1_ps(-1.44269504088896341f)));
}

// 1 / (1 + e^-x), as math::sigmoid: 0 below -88.7 (e^-x is inf), NaN kept.
template <typename R = Fp32Result>
inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16_neg(x, R{})));
}

// 2u for gelu's tanh form, u = sqrt(2/pi) (x + 0.044715 x^3): 0.5 (1 + tanh(u)) is
// sigmoid(2u), one exp and a division instead of libmvec's tanhf (and more accurate where
// tanh(u) rounds to -1 and 1 + tanh(u) cancels).
inline __m512 gelu_tanh_2u(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 u = _mm512_mul_ps(x, _mm512_fmadd_ps(x2, _mm512_set1_ps(0.044715f), _mm512_set1_ps(1.0f)));
  return _mm512_mul_ps(u, _mm512_set1_ps(2.0f * 0.79788456080286535588f));
}

// The AVX-512 form of an elementwise functor, for those that have one (kHasVectorForm): the
// unary ones of x, the backward ones of (g, x), the arithmetic ones of (a, b); R is the
// result's precision (Fp32Result, Bf16Result), which picks the exp of those built on one and
// tanh's rational.
template <typename R = Fp32Result>
inline __m512 vector_form(math::Exp, __m512 x) {
  return exp16(x, R{});
}
// tanh for an fp32 result: Eigen's packet tanh, a 13/6 rational clamped at +-7.9988 (where it
// is exactly +-1), x itself below 4e-4; within 5 ulp of double tanh, NaN, +-0 and +-inf as tanhf.
// For a bf16 result: x P(x^2) / Q(x^2), degrees 2 and 3 in x^2 with P(0) = Q(0) = 1, fitted for
// relative error (1.7e-7 on (0, 3.6]), x clamped to +-3.6, where tanh already rounds to +-1 in
// bf16 (above 0.998046875, the midpoint below 1); NaN kept (the clamp's second operands), -0 and
// tiny x come out as x. 10 operations against Eigen's 17 and a select.
inline __m512 tanh16(__m512 x, Bf16Result) {
  x = _mm512_min_ps(_mm512_set1_ps(3.6f), _mm512_max_ps(_mm512_set1_ps(-3.6f), x));
  const __m512 z = _mm512_mul_ps(x, x), one = _mm512_set1_ps(1.0f);
  __m512 p = _mm512_fmadd_ps(z, _mm512_set1_ps(0.00180275575f), _mm512_set1_ps(0.118768014f));
  p = _mm512_fmadd_ps(p, z, one);
  __m512 q = _mm512_fmadd_ps(z, _mm512_set1_ps(7.68204554e-05f), _mm512_set1_ps(0.0191719271f));
  q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(0.452100247f));
  q = _mm512_fmadd_ps(q, z, one);
  return _mm512_div_ps(_mm512_mul_ps(x, p), q);
}
inline __m512 tanh16(__m512 x, Fp32Result) { return Eigen::internal::generic_fast_tanh_float(x); }
template <typename R = Fp32Result>
inline __m512 vector_form(math::Tanh, __m512 x) {
  return tanh16(x, R{});
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::Sigmoid, __m512 x) {
  return sigmoid16<R>(x);
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::Silu, __m512 x) {
  return _mm512_mul_ps(x, sigmoid16<R>(x));
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::GeluTanh, __m512 x) {
  return _mm512_mul_ps(x, sigmoid16<R>(gelu_tanh_2u(x)));
}
// g s (1 + x (1 - s)), s = sigmoid(x).
template <typename R = Fp32Result>
inline __m512 vector_form(math::SiluBackward, __m512 g, __m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f), s = sigmoid16<R>(x);
  return _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_fmadd_ps(x, _mm512_sub_ps(one, s), one));
}
// g (s + x s (1 - s) u'), s = sigmoid(2u) = 0.5 (1 + tanh(u)), 0.5 (1 - tanh(u)^2) = 2 s (1 - s),
// u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
template <typename R = Fp32Result>
inline __m512 vector_form(math::GeluTanhBackward, __m512 g, __m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f), s = sigmoid16<R>(gelu_tanh_2u(x));
  const __m512 du = _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(3.0f * 0.044715f), one);
  const __m512 t = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_sub_ps(one, s)), du);
  return _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_fmadd_ps(t, _mm512_set1_ps(2.0f * 0.79788456080286535588f), one));
}

// erf(x / sqrt 2): Eigen's packet erf (generic_fast_erf_float: x clamped to +-4, x P(x^2) / Q(x^2),
// degrees 6 and 4 in x^2) with the 1 / sqrt 2 folded into its coefficients (the k-th times
// 2^(-k/2), rounded once from double): one multiplication fewer for gelu (erf form) and its
// backward. x is clamped at +-5.4, where these coefficients give exactly +-1 (at +-4 sqrt 2 they
// give 1 + 2^-23, and Phi(-inf) = 0 needs -1: gelu(-inf) = -inf * 0 = NaN, as torch); the true
// 1 + erf there is 6.7e-8, so gelu(x) for x < -5.4 is -0 where it is -1.8e-7 or less.
// Within 4.2 ulp of |x| of double x Phi(x) over [-6, 6] (the Eigen form: 4.4).
inline __m512 erf_of_x_over_sqrt2(__m512 x) {
  // The bounds first: vminps / vmaxps return the second operand when one is NaN, so NaN stays NaN.
  x = _mm512_max_ps(_mm512_set1_ps(-5.4f), _mm512_min_ps(_mm512_set1_ps(5.4f), x));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_fmadd_ps(x2, _mm512_set1_ps(-3.011990180e-12f), _mm512_set1_ps(6.122398699e-10f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-9.285302127e-08f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-5.031512501e-06f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-1.299292198e-04f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-1.044608769e-03f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(-1.138161402e-02f));
  __m512 q = _mm512_fmadd_ps(x2, _mm512_set1_ps(-9.103794696e-07f), _mm512_set1_ps(-2.667175613e-05f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-4.207067541e-04f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-3.686664626e-03f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(-1.426473912e-02f));
  return _mm512_div_ps(_mm512_mul_ps(x, p), q);
}
// Phi(x) = 0.5 + 0.5 erf(x / sqrt 2), the standard normal CDF, by one fma (one rounding where
// 0.5 x (1 + erf) took two for gelu, and one operation fewer).
inline __m512 normal_cdf16(__m512 x) {
  const __m512 half = _mm512_set1_ps(0.5f);
  return _mm512_fmadd_ps(erf_of_x_over_sqrt2(x), half, half);
}
// x Phi(x); gelu(-0) = -0 and gelu(-inf) = -inf * 0 = NaN, as torch.
template <typename R = Fp32Result>
inline __m512 vector_form(math::GeluErf, __m512 x) {
  return _mm512_mul_ps(x, normal_cdf16(x));
}
// g (Phi(x) + x phi(x)), the density's exp by exp16 (of -x^2 / 2 <= 0: exp16_nonpositive).
template <typename R = Fp32Result>
inline __m512 vector_form(math::GeluErfBackward, __m512 g, __m512 x) {
  const __m512 cdf = normal_cdf16(x);
  const __m512 pdf = _mm512_mul_ps(exp16_nonpositive(_mm512_mul_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-0.5f)), R{}),
                                   _mm512_set1_ps(0.39894228040143267794f));
  return _mm512_mul_ps(g, _mm512_fmadd_ps(x, pdf, cdf));
}

// clamp (lo <= hi: the op makes it so): vmaxps / vminps return their second operand when one is
// NaN or both are zeros, so x goes second: NaN propagates and -0 stays -0, as the scalar functor.
// bf16 clamp then takes the in-register path (it ran at a quarter of memcpy through map_acc).
template <typename R = Fp32Result>
inline __m512 vector_form(math::Clamp c, __m512 x) {
  return _mm512_min_ps(_mm512_set1_ps(float(c.hi)), _mm512_max_ps(_mm512_set1_ps(float(c.lo)), x));
}

// The activations with a parameter, smooth-l1 and their backward, as selects on a compare mask:
// an ordered compare is false for NaN, so NaN takes the same branch as in the scalar functors.
inline __mmask16 positive16(__m512 x) { return _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ); }
template <typename R = Fp32Result>
inline __m512 vector_form(math::LeakyRelu f, __m512 x) {
  return _mm512_mask_blend_ps(positive16(x), _mm512_mul_ps(x, _mm512_set1_ps(float(f.slope))), x);
}
// alpha expm1(x) for x <= 0 as 2 t / (1 - t), t = tanh(x / 2): the tanh's relative accuracy near 0
// carries over (e^x - 1 cancels there), and 1 - t >= 1. min(0, x) keeps NaN (vminps returns its
// second operand); -inf gives t = -1 and -alpha.
template <typename R = Fp32Result>
inline __m512 vector_form(math::Elu f, __m512 x) {
  const __m512 t = tanh16(_mm512_mul_ps(_mm512_min_ps(_mm512_setzero_ps(), x), _mm512_set1_ps(0.5f)), R{});
  const __m512 em1 = _mm512_div_ps(_mm512_add_ps(t, t), _mm512_sub_ps(_mm512_set1_ps(1.0f), t));
  return _mm512_mask_blend_ps(positive16(x), _mm512_mul_ps(em1, _mm512_set1_ps(float(f.alpha))), x);
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::SmoothL1 f, __m512 d) {
  const __m512 a = _mm512_abs_ps(d), beta = _mm512_set1_ps(float(f.beta));
  const __m512 inner = _mm512_div_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), d), d), beta);
  const __m512 outer = _mm512_sub_ps(a, _mm512_set1_ps(float(0.5 * f.beta)));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, beta, _CMP_LT_OQ), outer, inner);
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::LeakyReluBackward f, __m512 g, __m512 x) {
  return _mm512_mask_blend_ps(positive16(x), _mm512_mul_ps(g, _mm512_set1_ps(float(f.slope))), g);
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::EluBackward f, __m512 g, __m512 x) {
  const __m512 neg = _mm512_mul_ps(_mm512_mul_ps(g, exp16(x)), _mm512_set1_ps(float(f.alpha)));
  return _mm512_mask_blend_ps(positive16(x), neg, g);
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::HardtanhBackward f, __m512 g, __m512 x) {
  const __mmask16 inside = _mm512_cmp_ps_mask(x, _mm512_set1_ps(float(f.lo)), _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(x, _mm512_set1_ps(float(f.hi)), _CMP_LT_OQ);
  return _mm512_maskz_mov_ps(inside, g);
}
template <typename R = Fp32Result>
inline __m512 vector_form(math::SmoothL1Backward f, __m512 g, __m512 d) {
  const __m512 beta = _mm512_set1_ps(float(f.beta));
  __m512 r = _mm512_mul_ps(_mm512_div_ps(d, beta), g);
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(d, beta, _CMP_GT_OQ), r, g);
  const __m512 neg_g = _mm512_sub_ps(_mm512_set1_ps(-0.0f), g);  // -g, signed zeros included
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(d, _mm512_set1_ps(float(-f.beta)), _CMP_LT_OQ), r, neg_g);
}

// a + b, a - b, a b, a / b: one instruction each, so that bf16 -> bf16 arithmetic takes the
// in-register path of the functors above (vector_form_block, core/cpu/elementwise.cpp) rather
// than map_acc's integer rounding; bf16 add of a bias row ran at half of memcpy through it.
#define MT_ARITHMETIC_VECTOR_FORM(Functor, instruction)          \
  template <typename R = Fp32Result>                             \
  inline __m512 vector_form(math::Functor, __m512 a, __m512 b) { \
    return instruction(a, b);                                    \
  }
MT_ARITHMETIC_VECTOR_FORM(Add, _mm512_add_ps)
MT_ARITHMETIC_VECTOR_FORM(Sub, _mm512_sub_ps)
MT_ARITHMETIC_VECTOR_FORM(Mul, _mm512_mul_ps)
MT_ARITHMETIC_VECTOR_FORM(Div, _mm512_div_ps)
#undef MT_ARITHMETIC_VECTOR_FORM

template <typename F>
constexpr bool kHasVectorForm = requires(__m512 v) {
  vector_form(F{}, v);
};
template <typename F>
constexpr bool kHasBinaryVectorForm = requires(__m512 v) {
  vector_form(F{}, v, v);
};

// y[i] = f(x[i]...) for i in [0, n), 16 at a time, over one input (x) or two (a backward's g,
// x); y may be an input. R: the precision the results are for.
template <typename R = Fp32Result, typename F, typename... X>
void map_floats(F f, float* y, int64_t n, const X*... x) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, vector_form<R>(f, _mm512_loadu_ps(x + i)...));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, vector_form<R>(f, _mm512_maskz_loadu_ps(m, x + i)...));
  }
}

#else
template <typename F>
constexpr bool kHasVectorForm = false;
template <typename F>
constexpr bool kHasBinaryVectorForm = false;
#endif

// y[i] = e^(x[i] - shift) for i in [0, n), x float or bf16 (widened as it is read); y may be x.
// Returns the sum of the y[i] when Sum (softmax's denominator, added as the exps are made: two
// accumulators of alternate vectors, then the tail, so the order depends on n only). R: the
// precision of the results the exps go into (Bf16Result: exp16's cheaper twin on AVX-512).
// Store = false: only the sum is wanted (log_softmax), y is scratch that AVX-512 does not touch.
// NonPositive: x[i] - shift <= 0 or NaN for every i (shift a maximum of the x), as for softmax.
template <bool Sum = false, typename R = Fp32Result, bool Store = true, bool NonPositive = false, typename T>
inline float exp_floats(const T* x, float* y, int64_t n, float shift = 0.0f) {
  static_assert(kLoad16Type<T>, "exp_floats reads float or bf16");
  int64_t i = 0;
#if defined(__AVX512F__)
  auto exp_of = [](__m512 v) { return NonPositive ? exp16_nonpositive(v, R{}) : exp16(v, R{}); };
  const __m512 s = _mm512_set1_ps(shift);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = exp_of(_mm512_sub_ps(load16(x + i), s));
    const __m512 e1 = exp_of(_mm512_sub_ps(load16(x + i + 16), s));
    if constexpr (Store) {
      _mm512_storeu_ps(y + i, e0);
      _mm512_storeu_ps(y + i + 16, e1);
    }
    if constexpr (Sum) {
      a0 = _mm512_add_ps(a0, e0);
      a1 = _mm512_add_ps(a1, e1);
    }
  }
  for (; i < n; i += 16) {  // the last 1-31; masked-off lanes add 0
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_of(_mm512_sub_ps(load16(x + i, m), s)));
    if constexpr (Store) _mm512_mask_storeu_ps(y + i, m, e);
    if constexpr (Sum) a0 = _mm512_add_ps(a0, e);
  }
  if constexpr (Sum) return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
  return 0.0f;
#else
  if constexpr (std::is_same_v<T, BFloat16>) {
    // Widened into y, then the fp32 loop: a bf16 row's exps and their sum come out of the same
    // vectorized loop as its fp32 copy's, in the same order (the autocast softmax's promise);
    // GCC's own loop reading bf16 summed in another order.
    widen_block(x, y, n);
    return exp_floats<Sum, R>(static_cast<const float*>(y), y, n, shift);
  } else {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = i; k < n; ++k) {
      y[k] = math::exp_fast(x[k] - shift);
      if constexpr (Sum) sum += y[k];
    }
    return sum;
  }
#endif
}

}  // namespace mantissa::cpu
