// Elementwise ops and their backward formulas. Backward formulas use differentiable
// ops when a graph of the backward is requested (create_graph), and the fused kernels
// from core/elementwise_math.h otherwise. The one-tensor unary ops of that file's list are generated
// from their lines (MT_UNARY_DEFINITION below).
#include <algorithm>
#include <cmath>

#include "amp/autocast.h"
#include "autograd/op_helpers.h"
#include "core/elementwise_dispatch.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(where, Promote);

namespace mantissa {

using namespace detail;

namespace detail {

namespace {
int category(DType t) { return t == DType::Bool ? 0 : (is_integral(t) ? 1 : 2); }
}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za != zb) {
    // The 0-dim operand counts only when its category (bool < integer < floating) is higher,
    // and then with its own dtype (torch.result_type); wrap_scalar gives Python scalars theirs.
    const Tensor& z = za ? a : b;
    const Tensor& t = za ? b : a;
    return category(z.dtype()) <= category(t.dtype()) ? t.dtype() : z.dtype();
  }
  return promote_types(a.dtype(), b.dtype());
}

std::string describe(std::initializer_list<Tensor> ts) {
  std::string s;
  for (const Tensor& t : ts) {
    if (!s.empty()) s += " and ";
    s += t.defined() ? t.shape_str() + " (" + dtype_name(t.dtype()) + ")" : "undefined";
  }
  return s;
}

}  // namespace detail

namespace {

// Forward of a floating unary op (integers are computed as float32).
Tensor unary_float(UnaryOp op, const Tensor& x, double a = 0, double b = 0) {
  Tensor xf = is_floating(x.dtype()) ? x : launch::cast(x, DType::Float32);
  return launch::unary(op, xf, a, b);
}

// Defines a unary op whose backward needs the input x.
Tensor unary_with_input(const char* name, UnaryOp op, const Tensor& x0,
                        const std::function<Tensor(const Tensor& g, const Tensor& x)>& backward) {
  Tensor x = amp::autocast_one(amp::list_policy(op), x0);
  Tensor y = unary_float(op, x);
  if (needs_grad({x})) {
    record(name, {x}, y, [sx = SavedTensor(x), backward](const Tensor& g, const std::vector<bool>&) {
      return Grads{backward(g, sx.unpack())};
    });
  }
  return y;
}

constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// The FloatingOnly ops (the activations) take floating inputs only, as PyTorch's (the Floating
// ones, exp, sin, ..., accept integers and compute in float32).
void check_floating_activation(const char* name, const Tensor& x) {
  MT_CHECK(is_floating(x.dtype()), name, "expected a floating-point input, got ", describe({x}));
}

// A generated unary op (an Input or Output entry of MT_UNARY_OPS): the domain's input check,
// autocast through its list entry, the kernel (an integer input computed in float32 unless the
// domain is Numeric), and the backward formula of the entry on the saved input or output.
using elementwise::Domain;
struct SaveInput {};
struct SaveOutput {};
template <Domain D, typename Save>
Tensor listed_unary(UnaryOp op, const Tensor& x0, Save, Tensor (*backward)(const Tensor& g, const Tensor& saved)) {
  const char* name = op_name(op);
  if constexpr (D == Domain::FloatingOnly) check_floating_activation(name, x0);
  Tensor x = amp::autocast_one(amp::list_policy(op), x0);
  Tensor y = D == Domain::Numeric ? launch::unary(op, x) : unary_float(op, x);
  if (needs_grad({x})) {
    if constexpr (std::is_same_v<Save, SaveInput>)
      record(name, {x}, y, [sx = SavedTensor(x), backward](const Tensor& g, const std::vector<bool>&) {
        return Grads{backward(g, sx.unpack())};
      });
    else
      record(name, {x}, y, [sy = SavedTensor(y, true), backward](const Tensor& g, const std::vector<bool>&) {
        return Grads{backward(g, sy.unpack())};
      });
  }
  return y;
}

}  // namespace

// The op column of an entry, Input(formula[, fused]) or Output(formula[, fused]): what is saved
// and the backward g * f'(.), through the fused kernel when no graph of the backward is built.
#define MT_BACKWARD_Input(formula, ...) SaveInput{}, MT_BACKWARD_FORMULA(x, formula, __VA_ARGS__)
#define MT_BACKWARD_Output(formula, ...) SaveOutput{}, MT_BACKWARD_FORMULA(y, formula, __VA_ARGS__)
#define MT_BACKWARD_FORMULA(saved, formula, ...)                                                                    \
  [](const Tensor& g, const Tensor& saved) -> Tensor {                                                              \
    __VA_OPT__(                                                                                                     \
        if (!GradMode::is_enabled()) return launch::binary(BinaryOp::__VA_ARGS__, g, saved, g.dtype(), g.dtype());) \
    return formula;                                                                                                 \
  }
#define MT_UNARY_DEFINITION(Enum, name, F, domain, policy, gradcheck, op) \
  MT_UNARY_IF_GENERATED(                                                  \
      op, Tensor name(const Tensor& x) { return listed_unary<Domain::domain>(UnaryOp::Enum, x, MT_BACKWARD_##op); })
MT_UNARY_OPS(MT_UNARY_DEFINITION)
#undef MT_UNARY_DEFINITION
#undef MT_BACKWARD_FORMULA
#undef MT_BACKWARD_Output
#undef MT_BACKWARD_Input

Tensor neg(const Tensor& x) {
  MT_CHECK(x.dtype() != DType::Bool, "neg", "negation of a bool tensor is not supported, use logical_not");
  Tensor y = launch::unary(UnaryOp::Neg, x);
  if (needs_grad({x})) record("neg", {x}, y, [](const Tensor& g, auto&) { return Grads{-g}; });
  return y;
}

Tensor abs(const Tensor& x) {
  Tensor y = launch::unary(UnaryOp::Abs, x);
  if (needs_grad({x}))
    record("abs", {x}, y, [sx = SavedTensor(x)](const Tensor& g, auto&) { return Grads{g * sign(sx.unpack())}; });
  return y;
}

Tensor sign(const Tensor& x) {
  if (x.dtype() == DType::Bool) return x.clone();  // sign of a bool is itself (PyTorch)
  Tensor y = launch::unary(UnaryOp::Sign, x);
  if (needs_grad({x})) record("sign", {x}, y, [](const Tensor& g, auto&) { return Grads{zeros_like(g)}; });
  return y;
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  MT_CHECK(approximate == "none" || approximate == "tanh", "gelu", "approximate must be 'none' or 'tanh', got '",
           approximate, "'");
  check_floating_activation("gelu", x);
  if (approximate == "tanh") {
    return unary_with_input("gelu", UnaryOp::GeluTanh, x, [](const Tensor& g, const Tensor& x) {
      return fused_backward(BinaryOp::GeluTanhBackward, g, x, [&] {
        const double k = 0.79788456080286535588, c = 0.044715;
        Tensor th = tanh((x + x * x * x * c) * k);
        Tensor dinner = (x * x * (3 * c) + 1.0) * k;
        return g * ((th + 1.0) * 0.5 + x * 0.5 * (1.0 - th * th) * dinner);
      });
    });
  }
  return unary_with_input("gelu", UnaryOp::GeluErf, x, [](const Tensor& g, const Tensor& x) {
    return fused_backward(BinaryOp::GeluErfBackward, g, x, [&] {
      Tensor cdf = (erf(x * kInvSqrt2) + 1.0) * 0.5;
      Tensor pdf = exp(x * x * -0.5) * kInvSqrt2Pi;
      return g * (cdf + x * pdf);
    });
  });
}
Tensor softplus(const Tensor& x0, double beta, double threshold) {
  MT_CHECK(beta != 0 && std::isfinite(beta), "softplus", "beta must be finite and non-zero, got ", beta);
  check_floating_activation("softplus", x0);
  Tensor x = amp::autocast_one(amp::list_policy(UnaryOp::Softplus), x0);
  Tensor y = unary_float(UnaryOp::Softplus, x, beta, threshold);
  if (needs_grad({x})) {
    // d/dx = sigmoid(beta x), and 1 where the forward passed x through.
    record("softplus", {x}, y, [sx = SavedTensor(x), beta, threshold](const Tensor& g, const std::vector<bool>&) {
      Tensor bx = sx.unpack() * beta;
      return Grads{where(bx > threshold, g, g * sigmoid(bx))};
    });
  }
  return y;
}
Tensor square(const Tensor& x) {
  if (x.dtype() == DType::Bool) return square(x.to(DType::Int64));  // int64, as PyTorch
  Tensor y = launch::unary(UnaryOp::Square, x);
  if (needs_grad({x}))
    record("square", {x}, y, [sx = SavedTensor(x)](const Tensor& g, auto&) {
      const Tensor x = sx.unpack();  // floating: integer squares carry no gradient
      return Grads{fused_backward(BinaryOp::SquareBackward, g, x, [&] { return g * x * 2.0; })};
    });
  return y;
}

Tensor pow(const Tensor& x0, const Scalar& e) {
  // An integer (or bool) tensor to an integer power stays integer (torch.pow(int64, 3) is
  // int64), through the integer kernel of pow(tensor, tensor).
  if (!is_floating(x0.dtype()) && !e.is_floating()) {
    MT_CHECK(e.to_int() >= 0, "pow", "integers to negative integer powers are not allowed, got exponent ", e.to_int(),
             " for ", describe({x0}));
    return pow(x0, wrap_scalar(e, x0));
  }
  Tensor x = amp::autocast_one(amp::list_policy(UnaryOp::PowScalar), x0);
  double ed = e.to_double();
  Tensor y = unary_float(UnaryOp::PowScalar, x, ed);
  if (needs_grad({x})) {
    record("pow", {x}, y, [sx = SavedTensor(x), ed](const Tensor& g, auto&) {
      if (ed == 0.0) return Grads{zeros_like(g)};
      if (ed == 1.0) return Grads{g};
      // x^2: 2 x g in two passes (pow(x, 1), the product and the scale were three).
      if (ed == 2.0) return Grads{g * (sx.unpack() * 2.0)};
      return Grads{g * pow(sx.unpack(), ed - 1.0) * ed};
    });
  }
  return y;
}

namespace {
// a^b for integer dtype t by squaring, wrapping on overflow as PyTorch's integer pow (the same
// products in the same order, so the same residues); a negative exponent gives 0, except for
// bases 1 and -1. One pass per bit of the largest exponent, which is read on the host.
Tensor integer_pow(const Tensor& a, const Tensor& b, DType t) {
  Tensor base = a.to(t), e = b.to(t);
  const Tensor zero = zeros({}, {.dtype = t, .device = a.device()});
  const Tensor one = full({}, 1, {.dtype = t, .device = a.device()});
  const Tensor two = full({}, 2, {.dtype = t, .device = a.device()});
  Tensor r = ones(broadcast_shapes(a.sizes(), b.sizes(), "pow"), {.dtype = t, .device = a.device()});
  if (r.numel() == 0) return r;
  const int64_t emax = max(e).to(DType::Int64).item<int64_t>();
  auto floor_half = [&](const Tensor& v) { return launch::binary(BinaryOp::Div, v, two, t, t); };
  auto is_odd = [&](const Tensor& v) { return floor_half(v) * two != v; };
  Tensor rest = where(e < zero, zero, e);
  for (int64_t left = emax; left > 0; left /= 2) {
    r = where(is_odd(rest), r * base, r);
    base = base * base;
    rest = floor_half(rest);
  }
  if (t != DType::UInt8) {  // the only unsigned integer dtype
    Tensor minus_one = zeros({}, {.dtype = t, .device = a.device()}) - one;
    Tensor odd_negative = where(a.to(t) == minus_one, where(is_odd(e), minus_one, one), zero);
    r = where(e < zero, where(a.to(t) == one, one, odd_negative), r);
  }
  return r.to(t);
}
}  // namespace

Tensor pow(const Tensor& a0, const Tensor& b0) {
  auto in = amp::autocast_many(amp::list_policy(BinaryOp::Pow), {a0, b0});
  const Tensor &a = in[0], &b = in[1];
  MT_CHECK(a.dtype() != DType::Bool || b.dtype() != DType::Bool, "pow", "not implemented for bool tensors, got ",
           describe({a, b}));
  DType t = result_type(a, b);  // integers stay integers (torch.pow(int64, int64) is int64)
  if (!is_floating(t)) return integer_pow(a, b, t);
  Tensor y = launch::binary(BinaryOp::Pow, a, b, t, t);
  if (needs_grad({a, b})) {
    record("pow", {a, b}, y,
           [sa = SavedTensor(a), sb = SavedTensor(b), sy = SavedTensor(y, true)](const Tensor& g, auto& need) {
             Tensor a = sa.unpack(), b = sb.unpack();
             Tensor ga, gb;
             // As PyTorch: d/da is 0 where b == 0 (0^0 included), b a^(b-1) elsewhere (so ±inf
             // at a == 0 for b < 1); d/db = a^b log a is 0 where a == 0 and b >= 0.
             if (need[0]) ga = grad_for(where(b == 0.0, zeros_like(g), g * b * pow(a, b - 1.0)), a);
             if (need[1]) {
               Tensor ya = sy.unpack();
               gb = grad_for(where(logical_and(a == 0.0, b >= 0.0), zeros_like(g), g * ya * log(a)), b);
             }
             return Grads{ga, gb};
           });
  }
  return y;
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  MT_CHECK(lo || hi, "clamp", "at least one of min and max must be given");
  if (x.dtype() == DType::Bool) return clamp(x.to(DType::Int64), lo, hi);  // int64, as PyTorch
  if (!is_floating(x.dtype())) {
    // Integers clamp through maximum/minimum with the bounds as 0-dim tensors: exact, no
    // missing bound converted to an integer (the float kernel's +-inf), the result dtype
    // promoted with a floating bound, and min > max giving max, as PyTorch.
    Tensor y = lo ? maximum(x, wrap_scalar(*lo, x)) : x;
    return hi ? minimum(y, wrap_scalar(*hi, x)) : y;
  }
  double l = lo ? lo->to_double() : -INFINITY, h = hi ? hi->to_double() : INFINITY;
  // min > max gives max everywhere (PyTorch's min(max(x, lo), hi)); NaN still propagates.
  Tensor y = launch::unary(UnaryOp::Clamp, x, std::min(l, h), h);
  if (needs_grad({x})) {
    // Passes where lo <= x <= hi (so nowhere when lo > hi), as PyTorch.
    record("clamp", {x}, y, [sx = SavedTensor(x), l, h](const Tensor& g, auto&) {
      Tensor x = sx.unpack();
      return Grads{g * logical_and(x >= l, x <= h).to(g.dtype())};
    });
  }
  return y;
}

Tensor isfinite(const Tensor& x) {
  if (!is_floating(x.dtype())) return ones(x.sizes(), {.dtype = DType::Bool, .device = x.device()});
  return launch::unary_to(UnaryOp::IsFinite, x, DType::Bool);
}
Tensor logical_not(const Tensor& x) { return launch::unary_to(UnaryOp::LogicalNot, x, DType::Bool); }

// ---------------------------------------------------------------- binary

Tensor wrap_scalar(const Scalar& s, const Tensor& like) {
  DType t = promote_with_scalar(like.dtype(), s.is_floating());
  if (s.is_floating() && !is_floating(like.dtype()))
    t = DType::Float32;
  else if (!s.is_floating())
    t = like.dtype() == DType::Bool ? DType::Int64 : like.dtype();
  else
    t = like.dtype();
  return full({}, s.is_floating() ? Scalar(s.to_double()) : Scalar(s.to_int()), {.dtype = t, .device = like.device()});
}

namespace {
Tensor arith(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, double s0 = 0) {
  MT_CHECK(a.defined() && b.defined(), name, "undefined tensor");
  launch::check_same_device(name, {a, b});
  DType t = result_type(a, b);
  if (op == BinaryOp::Div) t = float_type(t);  // true division
  broadcast_shapes(a.sizes(), b.sizes(), name);
  return launch::binary(op, a, b, t, t, s0);
}
Tensor compare(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  launch::check_same_device(name, {a, b});
  broadcast_shapes(a.sizes(), b.sizes(), name);
  return launch::binary(op, a, b, result_type(a, b), DType::Bool);
}
}  // namespace

namespace {
// a + alpha b and a - alpha b, in the promoted dtype of a and b (alpha is applied after the
// promotion, as PyTorch does, so it neither changes the result dtype nor rounds in b's).
Tensor add_sub(const char* name, BinaryOp op, const Tensor& a0, const Tensor& b0, const Scalar& alpha) {
  auto in = amp::autocast_many(amp::list_policy(op), {a0, b0});
  const Tensor &a = in[0], &b = in[1];
  MT_CHECK(a.defined() && b.defined(), name, "undefined tensor");
  const bool unit = alpha.is_floating() ? alpha.to_double() == 1.0 : alpha.to_int() == 1;
  const DType t = result_type(a, b);
  MT_CHECK(unit || is_floating(t) || !alpha.is_floating(), name,
           "for integral input tensors, alpha must not be a floating point number, got ", alpha.to_double(), " for ",
           describe({a, b}));
  // Floating a + alpha b in one pass (AddScaled; a product and a sum took two: EMA updates 1.13x
  // PyTorch's); integers, never differentiable, scale b first.
  const bool fused = !unit && is_floating(t);
  const double scale = op == BinaryOp::Sub ? -alpha.to_double() : alpha.to_double();
  const Tensor bs = unit || fused ? b : (b.dtype() == t ? b : b.to(t)) * alpha;
  Tensor y = fused ? arith(name, BinaryOp::AddScaled, a, b, scale) : arith(name, op, a, bs);
  if (needs_grad({a, bs})) {
    const double gb = fused ? scale : (op == BinaryOp::Sub ? -1.0 : 1.0);  // d y / d bs
    record(op == BinaryOp::Sub ? "sub" : "add", {a, bs}, y,
           [sa = a.sizes(), ta = a.dtype(), sb = bs.sizes(), tb = bs.dtype(), gb](const Tensor& g, auto& need) {
             Tensor gbs;
             if (need[1])
               gbs = gb == 1.0 ? grad_for(g, sb, tb) : gb == -1.0 ? -grad_for(g, sb, tb) : grad_for(g * gb, sb, tb);
             return Grads{need[0] ? grad_for(g, sa, ta) : Tensor(), gbs};
           });
  }
  return y;
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return add_sub("add", BinaryOp::Add, a, b, alpha); }

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  MT_CHECK(a.dtype() != DType::Bool && b.dtype() != DType::Bool, "sub",
           "subtraction with a bool tensor is not supported (to invert a mask use logical_not), got ",
           describe({a, b}));
  return add_sub("sub", BinaryOp::Sub, a, b, alpha);
}

Tensor mul(const Tensor& a0, const Tensor& b0) {
  auto in = amp::autocast_many(amp::list_policy(BinaryOp::Mul), {a0, b0});
  const Tensor &a = in[0], &b = in[1];
  Tensor y = arith("mul", BinaryOp::Mul, a, b);
  if (needs_grad({a, b})) {
    // Each operand is saved only when the other's gradient needs it (as in PyTorch), so
    // `y.mul_(c)` on a non-leaf does not invalidate its own node.
    record("mul", {a, b}, y,
           [sa = SavedTensor(b.requires_grad() ? a : Tensor()), sb = SavedTensor(a.requires_grad() ? b : Tensor()),
            sza = a.sizes(), ta = a.dtype(), szb = b.sizes(), tb = b.dtype()](const Tensor& g, auto& need) {
             return Grads{need[0] ? grad_for(g * sb.unpack(), sza, ta) : Tensor(),
                          need[1] ? grad_for(g * sa.unpack(), szb, tb) : Tensor()};
           });
  }
  return y;
}

Tensor div(const Tensor& a0, const Tensor& b0) {
  auto in = amp::autocast_many(amp::list_policy(BinaryOp::Div), {a0, b0});
  const Tensor &a = in[0], &b = in[1];
  Tensor y = arith("div", BinaryOp::Div, a, b);
  if (needs_grad({a, b})) {
    // d/da = g / b, d/db = -((g / b) a) / b: g / b shared, four passes for both gradients where
    // g / b and -(g ((a / b) / b)) took five. a is kept only for b's gradient (see mul); not the
    // output, which the user may change in place (PyTorch's div saves a and b). Never b * b,
    // which would underflow in fp16 (and in fp32 below 3e-23) where the quotients do not.
    record("div", {a, b}, y,
           [sa = SavedTensor(b.requires_grad() ? a : Tensor()), sb = SavedTensor(b), sza = a.sizes(), ta = a.dtype()](
               const Tensor& g, auto& need) {
             const Tensor b = sb.unpack();
             const Tensor ga = g / b;
             return Grads{need[0] ? grad_for(ga, sza, ta) : Tensor(),
                          need[1] ? grad_for(-((ga * sa.unpack()) / b), b) : Tensor()};
           });
  }
  return y;
}

namespace {
// maximum/minimum: the gradient goes to the selected input, split evenly on ties. As PyTorch
// 1.13, an input loses only where the other is strictly better, so with a NaN operand (no
// comparison holds) both inputs get the whole gradient.
Tensor extremum(const char* name, BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor y = arith(name, op, a, b);
  if (needs_grad({a, b})) {
    bool is_max = op == BinaryOp::Maximum;
    record(name, {a, b}, y, [sa = SavedTensor(a), sb = SavedTensor(b), is_max](const Tensor& g, auto& need) {
      Tensor a = sa.unpack(), b = sb.unpack();
      Tensor share = where(a == b, g * 0.5, g);
      // A full zero tensor, not a broadcast 0-dim one: where's contiguous path vectorizes and
      // splits across threads, the broadcast one does not (2-3x slower fwd+bwd at 4 M).
      Tensor z = zeros_like(share);
      Tensor ga = need[0] ? grad_for(where(is_max ? a < b : a > b, z, share), a) : Tensor();
      Tensor gb = need[1] ? grad_for(where(is_max ? a > b : a < b, z, share), b) : Tensor();
      return Grads{ga, gb};
    });
  }
  return y;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum("maximum", BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum("minimum", BinaryOp::Minimum, a, b); }

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", BinaryOp::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return compare("logical_and", BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return compare("logical_or", BinaryOp::LogicalOr, a, b); }

Tensor where(const Tensor& cond, const Tensor& a0, const Tensor& b0) {
  MT_CHECK(cond.dtype() == DType::Bool, "where", "condition must be a bool tensor, got ", dtype_name(cond.dtype()));
  launch::check_same_device("where", {cond, a0, b0});
  auto in = amp::autocast_many(autocast_where, {a0, b0});
  DType t = result_type(in[0], in[1]);
  Tensor a = in[0].dtype() == t ? in[0] : in[0].to(t);
  Tensor b = in[1].dtype() == t ? in[1] : in[1].to(t);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor y = make_tensor(shape, t, a.device());
  backend_for(a.device()).where(cond, a, b, y);
  if (needs_grad({a, b})) {
    record("where", {a, b}, y, [c = cond, sa = a.sizes(), sb = b.sizes(), t](const Tensor& g, auto& need) {
      Tensor z = zeros({}, {.dtype = g.dtype(), .device = g.device()});
      Tensor ga = need[0] ? sum_to(where(c, g, z), sa) : Tensor();
      Tensor gb = need[1] ? sum_to(where(c, z, g), sb) : Tensor();
      (void)t;
      return Grads{ga, gb};
    });
  }
  return y;
}

namespace {
// Whether `value` converts to dtype t without overflow (PyTorch's check: finite values beyond a
// float type's range, or beyond an integer type's, are refused; NaN and inf convert to float
// types; a float value converts to an integer type within [lowest, max] (so -0.5 does not fit
// uint8), an integer one to uint8 also from -255, wrapping).
bool fits(const Scalar& value, DType t) {
  const double v = value.to_double();
  auto within = [&](double lo, double hi) { return !(v < lo || v > hi); };  // NaN: no overflow check
  switch (t) {
    case DType::Float16:
      return !std::isfinite(v) || std::fabs(v) <= 65504.0;
    case DType::BFloat16:
    case DType::Float32:
      return !std::isfinite(v) || std::fabs(v) <= 3.4028234663852886e38;
    case DType::Int64:
      return !value.is_floating() || within(-9223372036854775808.0, 9223372036854775807.0);
    case DType::Int32:
      return value.is_floating() ? within(INT32_MIN, INT32_MAX)
                                 : (value.to_int() >= INT32_MIN && value.to_int() <= INT32_MAX);
    case DType::UInt8:
      return value.is_floating() ? within(0, 255) : (value.to_int() >= -255 && value.to_int() <= 255);
    default:
      return true;
  }
}
}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  MT_CHECK(mask.dtype() == DType::Bool, "masked_fill", "mask must be a bool tensor, got ", dtype_name(mask.dtype()));
  MT_CHECK(fits(value, x.dtype()), "masked_fill", "value ", value.to_double(), " cannot be converted to ",
           dtype_name(x.dtype()), " without overflow (input ", describe({x}), ")");
  Tensor v = full({}, value, {.dtype = x.dtype(), .device = x.device()});
  Tensor y = where(mask, v, x);
  MT_CHECK(y.sizes() == x.sizes(), "masked_fill", "mask of shape ", mask.shape_str(),
           " does not broadcast to the input shape ", x.shape_str());
  return y;
}

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, wrap_scalar(b, a)); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, wrap_scalar(b, a)); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, wrap_scalar(b, a)); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, wrap_scalar(b, a)); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(wrap_scalar(a, b), b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(wrap_scalar(a, b), b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(wrap_scalar(a, b), b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(wrap_scalar(a, b), b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, wrap_scalar(b, a)); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, wrap_scalar(b, a)); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, wrap_scalar(b, a)); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, wrap_scalar(b, a)); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, wrap_scalar(b, a)); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, wrap_scalar(b, a)); }

}  // namespace mantissa
