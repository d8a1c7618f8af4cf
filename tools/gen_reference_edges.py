#!/usr/bin/python3
"""Writes tests/fixtures/reference_edges.json: PyTorch 1.13 references for tests/test_op_edges.cpp.

    /usr/bin/python3 tools/gen_reference_edges.py      # from the repository root

Two parts:
* "running_stats": batch_norm running estimates kept in fp16/bf16, updated once (issue 26,
  item 18): the float64 update momentum * batch + (1 - momentum) * running, rounded once.
* "sweep": every elementwise op of the lists in core/elementwise_math.h (read from that file,
  so a new list entry appears here without editing this script, and the generator fails until
  the entry has a torch counterpart below), every reduction of REDUCTIONS and every nn, shape
  and loss op of NN_OPS, over 0-dim, empty,
  size-1, contiguous, transposed, stepped and expanded inputs, each dtype, with NaN, +-inf, -0.0,
  huge and denormal values. References are computed in float64 and rounded once to the result
  dtype (integer inputs: computed by torch in their own dtype); gradients are float64 autograd
  of a fixed upstream gradient, rounded to the input's dtype. A case torch refuses on an
  integer or bool dtype is recorded as {"error": true}: the op must throw mantissa::Error.

Format: tensors are {"shape": [...], "data": [...]} with NaN and inf as the strings "nan",
"inf", "-inf" and -0.0 as "-0" (JSON has no such numbers).
"""
import json
import math
import os
import re

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NAN, INF = float("nan"), float("inf")

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8,
          "bool": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
FLOATS = ["float32", "float64", "float16", "bfloat16"]


def enc_value(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0 and math.copysign(1, v) < 0:
        return "-0"
    return v


def enc(t):
    t = t.detach()
    vals = t.flatten().tolist() if not t.is_floating_point() else t.double().flatten().tolist()
    return {"shape": list(t.shape), "data": [enc_value(v) for v in vals]}


# ---------------------------------------------------------------- running statistics (item 18)

def running_stats():
    cases = []
    g = torch.Generator().manual_seed(26)
    for name in ("float16", "bfloat16"):
        dt = DTYPES[name]
        x = (torch.randn(8, 6, generator=g) * 30 + 100).to(dt)
        rm = (torch.rand(6, generator=g) * 500 + 200).to(dt)
        rv = (torch.rand(6, generator=g) * 400 + 100).to(dt)
        momentum = 0.1
        xd = x.double()
        mean = xd.mean(0)
        var = xd.var(0, unbiased=True)
        new_mean = (momentum * mean + (1 - momentum) * rm.double()).to(dt)
        new_var = (momentum * var + (1 - momentum) * rv.double()).to(dt)
        # The old three-rounding update, kept to show the case tells the two apart.
        three_mean = (rm.float() * (1 - momentum)).to(dt).float() + (mean.float() * momentum).to(dt).float()
        three_var = (rv.float() * (1 - momentum)).to(dt).float() + (var.float() * momentum).to(dt).float()
        assert not (torch.equal(three_mean.to(dt), new_mean) and torch.equal(three_var.to(dt), new_var)), \
            "data does not separate one rounding from three"
        cases.append({"dtype": name, "x_shape": list(x.shape), "x": x.double().flatten().tolist(),
                      "running_mean": rm.double().tolist(), "running_var": rv.double().tolist(),
                      "momentum": momentum, "new_mean": new_mean.double().tolist(),
                      "new_var": new_var.double().tolist()})
    return cases


# ---------------------------------------------------------------- the sweep

def op_list(macro):
    """The (name, domain) pairs of an X-macro list in core/elementwise_math.h."""
    src = open(os.path.join(ROOT, "core", "elementwise_math.h")).read()
    body = src[src.index("#define " + macro + "(X)"):]
    body = body[:body.index("\n\n")]
    return [(m.group(1), m.group(2)) for m in re.finditer(r'X\(\w+, (\w+), \w+, (\w+)', body)]


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp, "log": torch.log,
    # torch 1.13's float64 CPU log1p overflows near the top of the range (log1p(9e307) = inf,
    # the true value 709.09): log(x) is log1p(x) to the last bit there.
    "log1p": lambda x: (torch.where(x > 1e300, torch.log(x.clamp(min=1e300)), torch.log1p(x))
                        if x.dtype == torch.float64 else torch.log1p(x)), "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "softplus": lambda x: F.softplus(x, beta=1, threshold=20), "mish": F.mish, "logsigmoid": F.logsigmoid, "erf": torch.erf,
    "reciprocal": torch.reciprocal, "square": torch.square, "logical_not": torch.logical_not,
    # clamp's bounds are >= 0: torch converts a negative bound of a uint8 clamp to uint8 first
    # (clamp(uint8 0, -1, 2) is 2), which Mantissa does not copy (tests/test_op_edges.cpp, item 2).
    "pow_scalar": lambda x: torch.pow(x, 3), "clamp": lambda x: torch.clamp(x, 0, 2), "isfinite": torch.isfinite,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1), "elu": lambda x: F.elu(x, 1.5),
    # the elementwise smooth-l1 of a difference: the unreduced loss against zeros
    "smooth_l1": lambda x: F.smooth_l1_loss(x, target(x, 0.0), reduction="none", beta=1.0),
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "pow": torch.pow, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
    "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    # add / sub with an alpha (one pass, a + alpha b): refused for integers, as torch
    "add_scaled": lambda a, b: torch.add(a, b, alpha=0.5),
}
# Reductions (the MT_REDUCE_OPS kernels and the ops built on them), each over the last dim
# and, where the op has the form, over all elements.
REDUCTIONS = {
    "sum_all": lambda x: torch.sum(x), "sum_last": lambda x: torch.sum(x, -1),
    "mean_all": lambda x: torch.mean(x), "mean_last": lambda x: torch.mean(x, -1),
    "prod_last": lambda x: torch.prod(x, -1),
    "amax_last": lambda x: torch.amax(x, -1), "amin_last": lambda x: torch.amin(x, -1),
    "max_all": lambda x: torch.max(x), "min_all": lambda x: torch.min(x),
    "max_last": lambda x: torch.max(x, -1).values, "min_last": lambda x: torch.min(x, -1).values,
    "argmax_last": lambda x: torch.argmax(x, -1), "argmin_last": lambda x: torch.argmin(x, -1),
    "var_last": lambda x: torch.var(x, -1), "std_last": lambda x: torch.std(x, -1),
    "logsumexp_last": lambda x: torch.logsumexp(x, -1),
}

def target(x, v=0.25):
    """A loss target of x's shape holding v (float32 for an integer x)."""
    return torch.full(x.shape, v, dtype=x.dtype if x.is_floating_point() else torch.float32)


# The nn, shape and loss ops a model is written with, each of one tensor (a loss against a
# constant target): not in the elementwise lists, so listed here and in NN_OPS of the test.
NN_OPS = {
    "softmax_last": lambda x: F.softmax(x, -1), "softmax_first": lambda x: F.softmax(x, 0),
    "log_softmax_last": lambda x: F.log_softmax(x, -1), "log_softmax_first": lambda x: F.log_softmax(x, 0),
    "cumsum_last": lambda x: torch.cumsum(x, -1), "cumprod_last": lambda x: torch.cumprod(x, -1),
    "cat_last": lambda x: torch.cat([x, x], -1), "flatten": lambda x: torch.flatten(x),
    "sort_last": lambda x: torch.sort(x, -1).values, "norm_all": lambda x: torch.norm(x),
    "all": torch.all, "any": torch.any, "layer_norm_last": lambda x: F.layer_norm(x, x.shape[-1:]),
    "masked_fill": lambda x: x.masked_fill(x > 1, -1.5),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.1), "elu": F.elu, "hardtanh": lambda x: F.hardtanh(x, -2, 2),
    "mse_loss": lambda x: F.mse_loss(x, target(x)), "l1_loss": lambda x: F.l1_loss(x, target(x)),
    "smooth_l1_loss": lambda x: F.smooth_l1_loss(x, target(x), beta=0.5),
    "huber_loss": lambda x: F.huber_loss(x, target(x), delta=0.5),
    "bce": lambda x: F.binary_cross_entropy(torch.sigmoid(x), target(x, 0.75)),
}

# float-only in torch as in Mantissa
FLOAT_ONLY_REDUCTIONS = {"mean_all", "mean_last", "var_last", "std_last", "logsumexp_last"}


def pool(name):
    """Special and ordinary values of a dtype, as float64 (exactly representable)."""
    if name in FLOATS:
        fi = torch.finfo(DTYPES[name])
        v = [NAN, 1.5, -INF, -0.0, 0.75, INF, -2.25, fi.max / 2, -0.3, fi.tiny / 4, 2.0, -fi.max / 4, 0.0, 3.1]
    elif name == "bool":
        v = [1, 0, 0, 1, 1, 0, 1]
    elif name == "uint8":
        v = [3, 0, 255, 7, 1, 128, 2, 9]
    else:
        big = 2 ** 62 if name == "int64" else 2 ** 30
        v = [3, -1, 0, big, -7, 2, -big, 5, 1]
    return v


# layout -> (base shape, view applied to the base)
LAYOUTS = {
    "scalar": ([], lambda t: t),
    "empty": ([0], lambda t: t),
    "one": ([1], lambda t: t),
    "contig": ([2, 3], lambda t: t),
    "t": ([3, 2], lambda t: t.t()),
    "step": ([2, 6], lambda t: t[:, ::2]),
    "expand": ([1, 3], lambda t: t.expand(2, 3)),
}
REDUCE_LAYOUTS = dict(LAYOUTS, empty_rows=([2, 0], lambda t: t))


def make(name, shape, shift):
    p = pool(name)
    n = math.prod(shape)
    vals = [p[(i + shift) % len(p)] for i in range(n)]
    t = torch.tensor(vals, dtype=torch.float64).reshape(shape)
    return t.to(DTYPES[name])


def upstream(shape):
    """The fixed upstream gradient; tests/test_op_edges.cpp builds the same one."""
    n = math.prod(shape)
    return torch.tensor([(i % 5 - 2) * 0.5 + 0.25 for i in range(n)], dtype=torch.float64).reshape(shape)


def reference(fn, inputs):
    """(output, its dtype, input gradients or None) of fn on inputs. Floating cases are computed
    in float64 from the inputs converted to their common dtype (as torch's type promotion does
    before computing) and rounded once to the result dtype; gradients are rounded through the
    result dtype to each input's. torch decides the result dtype (fp16/bf16, which torch's CPU
    kernels do not all take, stand in as float32 for that decision)."""
    floats = [t.is_floating_point() for t in inputs]
    reduced = any(t.dtype in (torch.float16, torch.bfloat16) for t in inputs)
    probe = fn(*[t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in inputs])
    common = inputs[0].dtype if len(inputs) == 1 else torch.result_type(*inputs)
    out_dtype = probe.dtype
    if reduced and out_dtype.is_floating_point:
        out_dtype = common
    if not common.is_floating_point:
        common = out_dtype if out_dtype.is_floating_point else None  # e.g. exp(int64): float32
    if common is None:
        return probe, out_dtype, None

    def promoted(t):
        return t.to(common).double()
    if not all(floats) or not out_dtype.is_floating_point:
        return fn(*[promoted(t) for t in inputs]).to(out_dtype), out_dtype, None
    leaves = [t.double().requires_grad_() for t in inputs]
    y = fn(*[promoted(l) for l in leaves])
    grads = None
    if y.requires_grad:
        g = torch.autograd.grad(y, leaves, upstream(list(y.shape)), allow_unused=True)
        grads = [(gr if gr is not None else torch.zeros_like(l)).to(out_dtype).to(t.dtype)
                 for gr, l, t in zip(g, leaves, inputs)]
    return y.detach().to(out_dtype), out_dtype, grads


def case(fn, bases, views):
    def composed(*xs):
        return fn(*[v(x) for v, x in zip(views, xs)])
    try:
        out, out_dtype, grads = reference(composed, bases)
    except (RuntimeError, IndexError):
        return {"error": True}
    c = {"out": enc(out), "out_dtype": NAMES[out_dtype]}
    if grads is not None:
        c["grads"] = [enc(g) for g in grads]
    return c


def sweep():
    unary_cases, binary_cases, reduce_cases = [], [], []
    for name, domain in op_list("MT_UNARY_OPS"):
        fn = UNARY[name]  # a KeyError here: a new list entry needs its torch counterpart above
        for dt in DTYPES:
            for layout, (shape, view) in LAYOUTS.items():
                base = make(dt, shape, len(name))
                c = case(fn, [base], [view])
                if name == "gelu_tanh" and dt != "float64":
                    # x * x overflows fp32 at |x| > 1.8e19 and the gradient is NaN there, in
                    # torch's own fp32 kernel as well: no float64 yardstick for it.
                    c.pop("grads", None)
                if name == "pow_scalar" and dt != "float64" and layout == "expand":
                    # 3 x^2 of the pool's fi.max / 4 overflows before the expand's sum of the
                    # two rows' opposite upstream signs: torch's own fp32 backward is NaN
                    # (inf - inf) there too, so float64 is no yardstick for it.
                    c.pop("grads", None)
                c.update({"op": name, "dtype": dt, "layout": layout, "x": enc(base)})
                unary_cases.append(c)
    pairs = [("float32", "float32"), ("float64", "float64"), ("float16", "float16"), ("bfloat16", "bfloat16"),
             ("float64", "float32"), ("float16", "float32"), ("bfloat16", "float16"), ("int64", "int64"),
             ("int32", "int64"), ("uint8", "int64"), ("uint8", "uint8"), ("bool", "bool"), ("int64", "float32"),
             ("bool", "float32"), ("int32", "float16")]
    layout_pairs = [("contig", "contig"), ("t", "step"), ("contig", "one"), ("scalar", "contig"),
                    ("expand", "scalar"), ("empty", "one"), ("scalar", "scalar")]
    for name, domain in op_list("MT_BINARY_OPS"):
        if name.endswith("_backward"):
            continue  # fused backward kernels: swept through their ops' gradients
        fn = BINARY[name]
        for da, db in pairs:
            for la, lb in layout_pairs:
                (sa, va), (sb, vb) = LAYOUTS[la], LAYOUTS[lb]
                a, b = make(da, sa, 0), make(db, sb, 5)
                c = case(fn, [a, b], [va, vb])
                if name == "pow" and {da, db} & {"float16", "bfloat16"}:
                    # b - 1 of a huge exponent rounds in fp16/bf16 (an odd exponent becomes even,
                    # flipping the sign of inf), in torch's own kernels as well.
                    c.pop("grads", None)
                c.update({"op": name, "dtypes": [da, db], "layouts": [la, lb], "a": enc(a), "b": enc(b)})
                binary_cases.append(c)
    for name, fn in REDUCTIONS.items():
        for dt in DTYPES:
            if name in FLOAT_ONLY_REDUCTIONS and dt not in FLOATS:
                continue
            for layout, (shape, view) in REDUCE_LAYOUTS.items():
                base = make(dt, shape, 2)
                if dt in FLOATS:  # no -0.0 / 0.0 tie inside a row (argmax of a tie is unspecified)
                    base = torch.where(base == 0, torch.full_like(base, 0.5), base)
                c = case(fn, [base], [view])
                if name.startswith("arg") and dt == "bool":
                    # torch refuses bool argmax/argmin, except that a one-element input skips
                    # its dtype check; Mantissa refuses them all.
                    c = {"error": True}
                if name in ("var_last", "std_last") and layout == "scalar":
                    c.pop("grads", None)  # 0 degrees of freedom: both gradients are meaningless
                c.update({"op": name, "dtype": dt, "layout": layout, "x": enc(base)})
                reduce_cases.append(c)
    nn_cases = []
    for name, fn in NN_OPS.items():
        for dt in DTYPES:
            for layout, (shape, view) in REDUCE_LAYOUTS.items():
                base = make(dt, shape, 3)
                if dt in FLOATS and name == "sort_last":  # no -0.0 / 0.0 tie (their order is unspecified)
                    base = torch.where(base == 0, torch.full_like(base, 0.5), base)
                if dt in FLOATS and name in ("cumprod_last", "layer_norm_last"):
                    # Products of the huge values overflow or not by the order of the factors
                    # (torch multiplies left to right, Mantissa's scan pairs them), and their
                    # variance overflows the dtype (torch's own fp32 layer_norm gives NaN where the
                    # float64 reference is finite): no reference for them.
                    base = torch.where(base.abs() > 1e30, torch.full_like(base, 3.0), base)
                if name == "huber_loss" and dt not in FLOATS:
                    # torch 1.13 refuses integer inputs here but not in mse/l1/smooth_l1_loss;
                    # Mantissa promotes them for all four (the reference: the float32 input).
                    c = case(lambda x: fn(x.float()), [base], [view])
                    if "error" not in c:
                        c.pop("grads", None)
                else:
                    c = case(fn, [base], [view])
                if name == "bce" and dt == "float16":
                    # The gradient that reaches sigmoid at x = inf (0.25 / 1e-12) overflows fp16
                    # before sigmoid's factor 0 meets it (inf * 0, as in torch's fp16 CUDA
                    # kernels): float64 is no yardstick for it.
                    c.pop("grads", None)
                if "softmax" in name and dt not in FLOATS:
                    # torch refuses integer softmax, except that an empty input skips its dtype
                    # check; Mantissa refuses them all.
                    c = {"error": True}
                c.update({"op": name, "dtype": dt, "layout": layout, "x": enc(base)})
                nn_cases.append(c)
    return {"unary": unary_cases, "binary": binary_cases, "reduce": reduce_cases, "nn": nn_cases}


def main():
    doc = {"torch": torch.__version__, "running_stats": running_stats(), "sweep": sweep()}
    path = os.path.join(ROOT, "tests", "fixtures", "reference_edges.json")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
