#!/usr/bin/python3
"""Generates tests/fixtures/reference_ops.json: PyTorch reference values for Mantissa's ops.

Regenerate (from the repository root) with Debian's python3-torch, which is installed for
/usr/bin/python3 (a `python3` from a virtualenv may not have torch):

    /usr/bin/python3 tools/gen_reference.py            # writes tests/fixtures/reference_ops.json
    /usr/bin/python3 tools/gen_reference.py -o out.json

The output is committed; CI only reads it (tests/test_reference_ops.cpp). It is deterministic
for a given torch version (torch.Generator seeded below); torch 1.13 produced the committed file.

Format: {"meta": {...}, "cases": [...], "promotion": [...]}. A case is
    {"name": unique id, "family": test group, "op": key of the op table (same keys in the C++ test),
     "args": op arguments that are not tensors,
     "inputs": [tensor...],       # tensor = {"shape", "dtype", "data" (flat, row-major), "grad": bool}
     "outputs": [tensor...],      # forward results (multi-output ops list several)
     "grad_outputs": [tensor|null ...],   # upstream gradient per output (null: not differentiated)
     "grads": [tensor|null ...]}  # gradient of each input with "grad": true, in order (null: unused)
Float64 cases carry gradients; float32 and integer cases are forward-only.
A promotion entry is {"op": "add"|"div", "a": dtype, "a_dim": 0|1, "b": dtype|"int"|"float",
"b_dim": 0|1, "result": dtype}; "int"/"float" mean a Python scalar operand.
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F

F64, F32 = torch.float64, torch.float32
DTYPE_NAMES = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int64: "int64", torch.int32: "int32", torch.uint8: "uint8", torch.bool: "bool",
}

gen = torch.Generator().manual_seed(20240611)


# ---------------------------------------------------------------- inputs

def rnd(*shape, lo=-2.0, hi=2.0, dec=2):
    """Uniform values in [lo, hi] rounded to `dec` decimals (short, exact-looking JSON)."""
    x = torch.rand(shape, generator=gen, dtype=F64) * (hi - lo) + lo
    return torch.round(x * 10**dec) / 10**dec


def pos(*shape, lo=0.2, hi=3.0):
    return rnd(*shape, lo=lo, hi=hi)


def away(*shape, margin=0.15):
    """Values at least `margin` away from 0 (abs, relu, reciprocal are not smooth there)."""
    x = rnd(*shape, lo=-1.8, hi=1.8)
    return x + torch.where(x >= 0, margin, -margin)


def distinct(*shape):
    """Pairwise distinct values, so max/min/amax have no ties."""
    n = 1
    for s in shape:
        n *= s
    perm = torch.randperm(n, generator=gen).to(F64)
    return ((perm - n / 2) * 0.31).round(decimals=2).reshape(shape)


def idx(high, *shape):
    return torch.randint(0, high, shape, generator=gen, dtype=torch.int64)


def upstream(t):
    """The fixed upstream gradient for an output."""
    return rnd(*t.shape, lo=-1.5, hi=1.5).to(t.dtype)


# ---------------------------------------------------------------- op table (mirrored in C++)

def _dims(a):
    return tuple(a["dims"]) if a["dims"] else None


def slice_(x, a):
    index = [slice(None)] * x.dim()
    index[a["dim"]] = slice(a["start"], a["end"], a["step"])
    return x[tuple(index)]


def scalar_op(fn):
    def run(x, a):
        s = a["scalar"]
        return fn(s, x) if a.get("reverse") else fn(x, s)
    return run


def inplace(fn):
    def run(*xs_and_args):
        *xs, a = xs_and_args
        y = xs[0] * 1  # a non-leaf copy that in-place ops may rebase
        fn(y, *xs[1:], a)
        return y
    return run


OPS = {
    # unary
    "neg": lambda x, a: torch.neg(x),
    "abs": lambda x, a: torch.abs(x),
    "sign": lambda x, a: torch.sign(x),
    "exp": lambda x, a: torch.exp(x),
    "log": lambda x, a: torch.log(x),
    "log1p": lambda x, a: torch.log1p(x),
    "sqrt": lambda x, a: torch.sqrt(x),
    "rsqrt": lambda x, a: torch.rsqrt(x),
    "sin": lambda x, a: torch.sin(x),
    "cos": lambda x, a: torch.cos(x),
    "tanh": lambda x, a: torch.tanh(x),
    "sigmoid": lambda x, a: torch.sigmoid(x),
    "relu": lambda x, a: torch.relu(x),
    "gelu": lambda x, a: F.gelu(x, approximate=a["approximate"]),
    "silu": lambda x, a: F.silu(x),
    "softplus": lambda x, a: F.softplus(x, beta=a["beta"], threshold=a["threshold"]),
    "mish": lambda x, a: F.mish(x),
    "logsigmoid": lambda x, a: F.logsigmoid(x),
    "erf": lambda x, a: torch.erf(x),
    "reciprocal": lambda x, a: torch.reciprocal(x),
    "square": lambda x, a: torch.square(x),
    "pow_scalar": lambda x, a: torch.pow(x, a["exponent"]),
    "pow": lambda x, y, a: torch.pow(x, y),
    "clamp": lambda x, a: torch.clamp(x, a.get("min"), a.get("max")),
    "isfinite": lambda x, a: torch.isfinite(x),
    "logical_not": lambda x, a: torch.logical_not(x),
    # binary
    "add": lambda x, y, a: torch.add(x, y, alpha=a.get("alpha", 1)),
    "sub": lambda x, y, a: torch.sub(x, y, alpha=a.get("alpha", 1)),
    "mul": lambda x, y, a: torch.mul(x, y),
    "div": lambda x, y, a: torch.div(x, y),
    "add_scalar": scalar_op(lambda p, q: p + q),
    "sub_scalar": scalar_op(lambda p, q: p - q),
    "mul_scalar": scalar_op(lambda p, q: p * q),
    "div_scalar": scalar_op(lambda p, q: p / q),
    "maximum": lambda x, y, a: torch.maximum(x, y),
    "minimum": lambda x, y, a: torch.minimum(x, y),
    "eq": lambda x, y, a: torch.eq(x, y),
    "ne": lambda x, y, a: torch.ne(x, y),
    "lt": lambda x, y, a: torch.lt(x, y),
    "le": lambda x, y, a: torch.le(x, y),
    "gt": lambda x, y, a: torch.gt(x, y),
    "ge": lambda x, y, a: torch.ge(x, y),
    "cmp_scalar": lambda x, a: {"eq": x == a["scalar"], "ne": x != a["scalar"], "lt": x < a["scalar"],
                                "le": x <= a["scalar"], "gt": x > a["scalar"], "ge": x >= a["scalar"]}[a["cmp"]],
    "logical_and": lambda x, y, a: torch.logical_and(x, y),
    "logical_or": lambda x, y, a: torch.logical_or(x, y),
    "where": lambda c, x, y, a: torch.where(c, x, y),
    "masked_fill": lambda x, m, a: torch.masked_fill(x, m, a["value"]),
    # in place on a non-leaf (autograd rebase)
    "add_": inplace(lambda y, z, a: y.add_(z, alpha=a.get("alpha", 1))),
    "sub_": inplace(lambda y, z, a: y.sub_(z)),
    "mul_": inplace(lambda y, z, a: y.mul_(z)),
    "div_": inplace(lambda y, z, a: y.div_(z)),
    "mul_scalar_": inplace(lambda y, a: y.mul_(a["scalar"])),
    "clamp_": inplace(lambda y, a: y.clamp_(a["min"], a["max"])),
    "masked_fill_": inplace(lambda y, m, a: y.masked_fill_(m, a["value"])),
    # reductions
    "sum": lambda x, a: x.sum(dim=_dims(a), keepdim=a["keepdim"]) if a["dims"] else x.sum(),
    "mean": lambda x, a: x.mean(dim=_dims(a), keepdim=a["keepdim"]) if a["dims"] else x.mean(),
    "prod": lambda x, a: torch.prod(x, a["dim"], keepdim=a["keepdim"]),
    "amax": lambda x, a: torch.amax(x, dim=_dims(a) or (), keepdim=a["keepdim"]),
    "amin": lambda x, a: torch.amin(x, dim=_dims(a) or (), keepdim=a["keepdim"]),
    "max_all": lambda x, a: torch.max(x),
    "min_all": lambda x, a: torch.min(x),
    "max_dim": lambda x, a: tuple(torch.max(x, a["dim"], keepdim=a["keepdim"])),
    "min_dim": lambda x, a: tuple(torch.min(x, a["dim"], keepdim=a["keepdim"])),
    "argmax": lambda x, a: torch.argmax(x, a["dim"], keepdim=a["keepdim"]),
    "argmin": lambda x, a: torch.argmin(x, a["dim"], keepdim=a["keepdim"]),
    "var": lambda x, a: torch.var(x, dim=_dims(a), correction=a["correction"], keepdim=a["keepdim"]),
    "std": lambda x, a: torch.std(x, dim=_dims(a), correction=a["correction"], keepdim=a["keepdim"]),
    "logsumexp": lambda x, a: torch.logsumexp(x, a["dims"], keepdim=a["keepdim"]),
    "softmax": lambda x, a: torch.softmax(x, a["dim"]),
    "log_softmax": lambda x, a: torch.log_softmax(x, a["dim"]),
    # linear algebra; "ta"/"tb" transpose the operand's last two dims first (strided GEMM inputs)
    "matmul": lambda x, y, a: torch.matmul(x.transpose(-1, -2) if a.get("ta") else x,
                                           y.transpose(-1, -2) if a.get("tb") else y),
    # joining, splitting, indexing
    "cat": lambda *xs: torch.cat(xs[:-1], xs[-1]["dim"]),
    "stack": lambda *xs: torch.stack(xs[:-1], xs[-1]["dim"]),
    "split": lambda x, a: tuple(torch.split(x, a["split"], a["dim"])),
    "chunk": lambda x, a: tuple(torch.chunk(x, a["chunks"], a["dim"])),
    "index_select": lambda x, i, a: torch.index_select(x, a["dim"], i),
    "gather": lambda x, i, a: torch.gather(x, a["dim"], i),
    "scatter_add": lambda x, i, s, a: torch.scatter_add(x, a["dim"], i, s),
    "one_hot": lambda i, a: F.one_hot(i, a["num_classes"]),
    "embedding": lambda w, i, a: F.embedding(i, w),
    # views
    "permute": lambda x, a: x.permute(a["dims"]),
    "transpose": lambda x, a: x.transpose(a["d0"], a["d1"]),
    "t": lambda x, a: x.t(),
    "narrow": lambda x, a: x.narrow(a["dim"], a["start"], a["length"]),
    "slice": slice_,
    "select": lambda x, a: x.select(a["dim"], a["index"]),
    "expand": lambda x, a: x.expand(a["shape"]),
    "squeeze": lambda x, a: x.squeeze(a["dim"]) if "dim" in a else x.squeeze(),
    "unsqueeze": lambda x, a: x.unsqueeze(a["dim"]),
    "flatten": lambda x, a: x.flatten(a["start"], a["end"]),
    "reshape": lambda x, a: x.reshape(a["shape"]),
    "view": lambda x, a: x.view(a["shape"]),
    # ops on non-contiguous views: exercises the strided kernel paths
    "exp_of_t": lambda x, a: torch.exp(x.t()),
    "add_of_t": lambda x, y, a: x.t() + y,
    "sum_of_permute": lambda x, a: x.permute(2, 0, 1).sum(dim=a["dims"]),
    "softmax_of_transpose": lambda x, a: torch.softmax(x.transpose(0, 2), a["dim"]),
    "reshape_of_t": lambda x, a: x.t().reshape(a["shape"]),
    "slice_of_t": lambda x, a: x.t()[1:, ::2] * 2,
}


# ---------------------------------------------------------------- case recording

cases = []


def enc(t, grad=False):
    d = {"shape": list(t.shape), "dtype": DTYPE_NAMES[t.dtype], "data": t.reshape(-1).tolist()}
    if grad:
        d["grad"] = True
    return d


def add_case(family, name, op, inputs, args=None, grad=None):
    """Runs OPS[op] on `inputs`; float64 inputs get gradients unless grad=False."""
    args = args or {}
    ins = [t.clone() for t in inputs]
    if grad is None:
        grad = any(t.dtype == F64 for t in ins)
    want = [grad and t.is_floating_point() for t in ins]
    for t, w in zip(ins, want):
        t.requires_grad_(w)
    out = OPS[op](*ins, args)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    case = {"name": name, "family": family, "op": op, "args": args,
            "inputs": [enc(t.detach(), w) for t, w in zip(ins, want)],
            "outputs": [enc(o.detach()) for o in outs]}
    if grad:
        diff = [o for o in outs if o.requires_grad]
        gouts = [upstream(o) if o.requires_grad else None for o in outs]
        wrt = [t for t, w in zip(ins, want) if w]
        gs = torch.autograd.grad(diff, wrt, [g for g in gouts if g is not None], allow_unused=True)
        case["grad_outputs"] = [enc(g) if g is not None else None for g in gouts]
        case["grads"] = [enc(g) if g is not None else None for g in gs]
    assert name not in {c["name"] for c in cases}, name
    cases.append(case)


def unary_cases():
    fam = "unary"
    add_case(fam, "neg", "neg", [rnd(2, 3)])
    add_case(fam, "neg_0d", "neg", [rnd()])
    add_case(fam, "abs", "abs", [away(2, 3)])
    add_case(fam, "exp", "exp", [rnd(2, 3)])
    add_case(fam, "log", "log", [pos(2, 3)])
    add_case(fam, "log1p", "log1p", [rnd(2, 3, lo=-0.6, hi=2.0)])
    add_case(fam, "sqrt", "sqrt", [pos(2, 3)])
    add_case(fam, "rsqrt", "rsqrt", [pos(2, 3)])
    add_case(fam, "sin", "sin", [rnd(2, 3, lo=-3, hi=3)])
    add_case(fam, "cos", "cos", [rnd(2, 3, lo=-3, hi=3)])
    add_case(fam, "tanh", "tanh", [rnd(2, 3)])
    add_case(fam, "sigmoid", "sigmoid", [rnd(2, 3, lo=-4, hi=4)])
    add_case(fam, "relu", "relu", [away(2, 3)])
    add_case(fam, "gelu_none", "gelu", [rnd(2, 4, lo=-3, hi=3)], {"approximate": "none"})
    add_case(fam, "gelu_tanh", "gelu", [rnd(2, 4, lo=-3, hi=3)], {"approximate": "tanh"})
    add_case(fam, "silu", "silu", [rnd(2, 3, lo=-3, hi=3)])
    add_case(fam, "erf", "erf", [rnd(2, 3)])
    add_case(fam, "reciprocal", "reciprocal", [away(2, 3)])
    add_case(fam, "square", "square", [rnd(2, 3)])
    add_case(fam, "sign", "sign", [torch.tensor([-1.5, 0.0, 2.25, -0.01], dtype=F64)])
    add_case(fam, "pow_2", "pow_scalar", [rnd(2, 3)], {"exponent": 2})
    add_case(fam, "pow_3", "pow_scalar", [rnd(2, 3)], {"exponent": 3})
    add_case(fam, "pow_0", "pow_scalar", [rnd(2, 3)], {"exponent": 0})
    add_case(fam, "pow_half", "pow_scalar", [pos(2, 3)], {"exponent": 0.5})
    add_case(fam, "pow_neg_1_5", "pow_scalar", [pos(2, 3)], {"exponent": -1.5})
    add_case(fam, "pow_tensor", "pow", [pos(2, 3), rnd(2, 3)])
    add_case(fam, "pow_tensor_broadcast", "pow", [pos(2, 3), rnd(3)])
    add_case(fam, "pow_tensor_0d_exponent", "pow", [pos(2, 3), rnd()])
    add_case(fam, "clamp_both", "clamp", [rnd(3, 4)], {"min": -0.505, "max": 0.755})
    add_case(fam, "clamp_min", "clamp", [rnd(3, 4)], {"min": -0.255})
    add_case(fam, "clamp_max", "clamp", [rnd(3, 4)], {"max": 0.305})
    add_case(fam, "isfinite", "isfinite", [rnd(2, 3)], grad=False)  # inf/nan are not valid JSON
    add_case(fam, "logical_not", "logical_not", [torch.tensor([True, False, True])])


def binary_cases():
    fam = "binary"
    shapes = [("same", (2, 3), (2, 3)), ("row", (2, 3), (3,)), ("outer", (2, 1, 3), (4, 1)),
              ("0d", (3,), ()), ("0d_left", (), (2, 2))]
    for op in ["add", "sub", "mul", "div"]:
        for tag, sa, sb in shapes:
            b = away(*sb) if op == "div" else rnd(*sb)
            add_case(fam, f"{op}_{tag}", op, [rnd(*sa), b])
    add_case(fam, "add_alpha", "add", [rnd(2, 3), rnd(3)], {"alpha": 2.5})
    add_case(fam, "sub_alpha", "sub", [rnd(2, 3), rnd(2, 1)], {"alpha": -0.5})
    for op in ["add_scalar", "sub_scalar", "mul_scalar", "div_scalar"]:
        add_case(fam, f"{op}_float", op, [rnd(2, 3)], {"scalar": 1.75})
        add_case(fam, f"{op}_int", op, [rnd(2, 3)], {"scalar": 3})
        add_case(fam, f"{op}_reverse", op, [away(2, 3)], {"scalar": -2.5, "reverse": True})
    for op in ["maximum", "minimum"]:
        a, b = rnd(2, 3), rnd(2, 3)
        b = torch.where(a == b, b + 0.05, b)
        add_case(fam, f"{op}_same", op, [a, b])
        a, b = rnd(3, 1), rnd(4)
        b = torch.where((a == b).any(0), b + 0.005, b)
        add_case(fam, f"{op}_broadcast", op, [a, b])
    # where / masked_fill: the condition is an input without gradient
    cond = rnd(2, 3) > 0
    add_case(fam, "where", "where", [cond, rnd(2, 3), rnd(3)])
    add_case(fam, "where_broadcast_cond", "where", [rnd(3) > 0, rnd(2, 3), rnd()])
    add_case(fam, "masked_fill", "masked_fill", [rnd(2, 3), rnd(3) > 0], {"value": -1.5})
    add_case(fam, "masked_fill_full_mask", "masked_fill", [rnd(2, 3), rnd(2, 3) > 0], {"value": 4})


def compare_cases():
    fam = "compare"
    a = rnd(3, 4, dec=1)
    b = rnd(3, 4, dec=1)
    b.view(-1)[::3] = a.view(-1)[::3]  # a third of the entries equal
    row = a[1].clone()
    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        add_case(fam, op, op, [a, b], grad=False)
        add_case(fam, f"{op}_broadcast", op, [a, row], grad=False)
        add_case(fam, f"{op}_scalar", "cmp_scalar", [a], {"cmp": op, "scalar": float(a[0, 0])}, grad=False)
    ints = idx(4, 2, 3)
    add_case(fam, "lt_int_vs_float", "lt", [ints, rnd(2, 3, lo=0, hi=4)], grad=False)
    add_case(fam, "eq_int_scalar", "cmp_scalar", [ints], {"cmp": "eq", "scalar": 2}, grad=False)
    p, q = rnd(2, 3) > 0, rnd(2, 3) > 0
    add_case(fam, "logical_and", "logical_and", [p, q], grad=False)
    add_case(fam, "logical_or", "logical_or", [p, q], grad=False)


def inplace_cases():
    fam = "inplace"
    add_case(fam, "add_", "add_", [rnd(2, 3), rnd(2, 3)], {"alpha": 1})
    add_case(fam, "add_alpha_broadcast", "add_", [rnd(2, 3), rnd(3)], {"alpha": -2})
    add_case(fam, "sub_", "sub_", [rnd(2, 3), rnd(2, 1)])
    add_case(fam, "mul_", "mul_", [rnd(2, 3), rnd(3)])
    add_case(fam, "div_", "div_", [rnd(2, 3), away(2, 3)])
    add_case(fam, "mul_scalar_", "mul_scalar_", [rnd(2, 3)], {"scalar": -1.25})
    add_case(fam, "clamp_", "clamp_", [rnd(3, 4)], {"min": -0.505, "max": 0.755})
    add_case(fam, "masked_fill_", "masked_fill_", [rnd(2, 3), rnd(2, 3) > 0], {"value": 0.5})


def reduce_cases():
    fam = "reduce"
    for op in ["sum", "mean"]:
        add_case(fam, f"{op}_all", op, [rnd(2, 3, 4)], {"dims": [], "keepdim": False})
        add_case(fam, f"{op}_dim1", op, [rnd(2, 3, 4)], {"dims": [1], "keepdim": False})
        add_case(fam, f"{op}_dim1_keep", op, [rnd(2, 3, 4)], {"dims": [1], "keepdim": True})
        add_case(fam, f"{op}_dims02_keep", op, [rnd(2, 3, 4)], {"dims": [0, 2], "keepdim": True})
        add_case(fam, f"{op}_dims_neg", op, [rnd(2, 3, 4)], {"dims": [-1, 0], "keepdim": False})
        add_case(fam, f"{op}_all_keep", op, [rnd(2, 3)], {"dims": [0, 1], "keepdim": True})
    add_case(fam, "sum_int32", "sum", [idx(9, 2, 3).to(torch.int32)], {"dims": [1], "keepdim": False})
    add_case(fam, "sum_bool", "sum", [rnd(2, 3) > 0], {"dims": [], "keepdim": False})
    add_case(fam, "prod_dim1", "prod", [away(2, 3)], {"dim": 1, "keepdim": False})
    add_case(fam, "prod_dim0_keep", "prod", [away(3, 2)], {"dim": 0, "keepdim": True})
    for op in ["amax", "amin"]:
        add_case(fam, f"{op}_all", op, [distinct(3, 4)], {"dims": [], "keepdim": False})
        add_case(fam, f"{op}_dim1", op, [distinct(2, 3, 4)], {"dims": [1], "keepdim": False})
        add_case(fam, f"{op}_dims02_keep", op, [distinct(2, 3, 4)], {"dims": [0, 2], "keepdim": True})
    add_case(fam, "amax_ties", "amax", [torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], dtype=F64)],
             {"dims": [1], "keepdim": False})
    add_case(fam, "max_all", "max_all", [distinct(3, 4)])
    add_case(fam, "min_all", "min_all", [distinct(3, 4)])
    for op in ["max_dim", "min_dim"]:
        add_case(fam, f"{op}0", op, [distinct(3, 4)], {"dim": 0, "keepdim": False})
        add_case(fam, f"{op}1_keep", op, [distinct(3, 4)], {"dim": 1, "keepdim": True})
        add_case(fam, f"{op}_neg_3d", op, [distinct(2, 3, 4)], {"dim": -2, "keepdim": False})
    for op in ["argmax", "argmin"]:
        add_case(fam, f"{op}0", op, [distinct(3, 4)], {"dim": 0, "keepdim": False})
        add_case(fam, f"{op}_keep", op, [distinct(2, 3, 4)], {"dim": 2, "keepdim": True})
    for op in ["var", "std"]:
        for c in [0, 1]:
            add_case(fam, f"{op}_all_c{c}", op, [rnd(3, 4)], {"dims": [], "correction": c, "keepdim": False})
            add_case(fam, f"{op}_dim1_c{c}", op, [rnd(2, 3, 4)], {"dims": [1], "correction": c, "keepdim": False})
            add_case(fam, f"{op}_dims02_keep_c{c}", op, [rnd(2, 3, 4)],
                     {"dims": [0, 2], "correction": c, "keepdim": True})
    add_case(fam, "logsumexp_dim1", "logsumexp", [rnd(2, 3, 4)], {"dims": [1], "keepdim": False})
    add_case(fam, "logsumexp_dims_keep", "logsumexp", [rnd(2, 3, 4)], {"dims": [0, 2], "keepdim": True})
    add_case(fam, "logsumexp_large", "logsumexp", [rnd(2, 3, lo=200, hi=400)], {"dims": [1], "keepdim": False})
    for op in ["softmax", "log_softmax"]:
        for d in [0, 1, 2, -1]:
            add_case(fam, f"{op}_dim{d}", op, [rnd(2, 3, 4, lo=-3, hi=3)], {"dim": d})
        add_case(fam, f"{op}_large", op, [rnd(2, 3, lo=500, hi=800)], {"dim": 1})


def matmul_cases():
    fam = "matmul"
    layouts = [("dot", (3,), (3,)), ("mv", (2, 3), (3,)), ("vm", (3,), (3, 4)), ("mm", (2, 3), (3, 4)),
               ("bmm", (2, 2, 3), (2, 3, 4)), ("batched_left", (2, 2, 3), (3, 4)),
               ("batched_right", (2, 3), (2, 3, 4)), ("broadcast_batch", (2, 1, 2, 3), (3, 3, 2)),
               ("vec_batched", (3,), (2, 3, 4)), ("batched_vec", (2, 4, 3), (3,))]
    for tag, sa, sb in layouts:
        add_case(fam, tag, "matmul", [rnd(*sa), rnd(*sb)])
    add_case(fam, "mm_ta", "matmul", [rnd(3, 2), rnd(3, 4)], {"ta": True})
    add_case(fam, "mm_tb", "matmul", [rnd(2, 3), rnd(4, 3)], {"tb": True})
    add_case(fam, "mm_ta_tb", "matmul", [rnd(3, 2), rnd(4, 3)], {"ta": True, "tb": True})
    add_case(fam, "bmm_ta_tb", "matmul", [rnd(2, 3, 2), rnd(2, 4, 3)], {"ta": True, "tb": True})


def shape_cases():
    fam = "shape"
    for d in [0, 1, -1]:
        xs = [rnd(2, 3), rnd(2, 3), rnd(2, 3)]
        if d == 0:
            xs[1] = rnd(1, 3)
        elif d == 1:
            xs[2] = rnd(2, 1)
        add_case(fam, f"cat_dim{d}", "cat", xs, {"dim": d})
    for d in [0, 1, 2, -1]:
        add_case(fam, f"stack_dim{d}", "stack", [rnd(2, 3), rnd(2, 3)], {"dim": d})
    add_case(fam, "split_int", "split", [rnd(5, 3)], {"split": 2, "dim": 0})
    add_case(fam, "split_sizes", "split", [rnd(4, 3)], {"split": [1, 2], "dim": 1})
    add_case(fam, "chunk_uneven", "chunk", [rnd(5, 3)], {"chunks": 3, "dim": 0})
    add_case(fam, "chunk_fewer", "chunk", [rnd(2, 6)], {"chunks": 4, "dim": -1})
    add_case(fam, "index_select0", "index_select", [rnd(4, 3), torch.tensor([2, 0, 2, 3, 2])], {"dim": 0})
    add_case(fam, "index_select1", "index_select", [rnd(2, 4, 3), torch.tensor([3, 3, 0])], {"dim": 1})
    add_case(fam, "index_select_0d_index", "index_select", [rnd(4, 3), torch.tensor(1)], {"dim": 1})
    add_case(fam, "gather0", "gather", [rnd(3, 4), idx(3, 5, 4)], {"dim": 0})
    add_case(fam, "gather1", "gather", [rnd(3, 4), idx(4, 3, 6)], {"dim": 1})
    add_case(fam, "gather_3d", "gather", [rnd(2, 3, 4), idx(3, 2, 2, 4)], {"dim": 1})
    add_case(fam, "scatter_add0", "scatter_add", [rnd(3, 4), idx(3, 5, 4), rnd(5, 4)], {"dim": 0})
    add_case(fam, "scatter_add1", "scatter_add", [rnd(3, 4), idx(4, 3, 6), rnd(3, 6)], {"dim": 1})
    add_case(fam, "one_hot", "one_hot", [idx(5, 2, 3)], {"num_classes": 6})
    add_case(fam, "one_hot_inferred", "one_hot", [torch.tensor([0, 3, 1, 3])], {"num_classes": -1})
    add_case(fam, "embedding", "embedding", [rnd(5, 3), torch.tensor([[1, 4, 1], [0, 1, 4]])])
    add_case(fam, "embedding_1d", "embedding", [rnd(4, 2), torch.tensor([3, 3, 3, 0])])


def view_cases():
    fam = "view"
    add_case(fam, "permute", "permute", [rnd(2, 3, 4)], {"dims": [2, 0, 1]})
    add_case(fam, "permute_neg", "permute", [rnd(2, 3, 4)], {"dims": [-1, 1, 0]})
    add_case(fam, "transpose", "transpose", [rnd(2, 3, 4)], {"d0": 0, "d1": 2})
    add_case(fam, "transpose_neg", "transpose", [rnd(2, 3, 4)], {"d0": -1, "d1": -2})
    add_case(fam, "t", "t", [rnd(3, 4)])
    add_case(fam, "t_1d", "t", [rnd(3)])
    add_case(fam, "narrow", "narrow", [rnd(3, 5)], {"dim": 1, "start": 1, "length": 3})
    add_case(fam, "narrow_neg_start", "narrow", [rnd(4, 3)], {"dim": 0, "start": -2, "length": 2})
    add_case(fam, "slice_step", "slice", [rnd(3, 7)], {"dim": 1, "start": 1, "end": 6, "step": 2})
    add_case(fam, "slice_neg_start_past_end", "slice", [rnd(6, 2)], {"dim": 0, "start": -4, "end": 100, "step": 3})
    add_case(fam, "slice_3d", "slice", [rnd(2, 5, 3)], {"dim": 1, "start": 0, "end": 4, "step": 2})
    add_case(fam, "select", "select", [rnd(2, 3, 4)], {"dim": 1, "index": 2})
    add_case(fam, "select_neg", "select", [rnd(3, 4)], {"dim": -1, "index": -1})
    add_case(fam, "expand", "expand", [rnd(3, 1)], {"shape": [2, 3, 4]})
    add_case(fam, "expand_keep", "expand", [rnd(1, 4)], {"shape": [3, -1]})
    add_case(fam, "squeeze_all", "squeeze", [rnd(1, 3, 1, 2)])
    add_case(fam, "squeeze_dim", "squeeze", [rnd(1, 3, 1, 2)], {"dim": 2})
    add_case(fam, "squeeze_noop", "squeeze", [rnd(2, 3)], {"dim": 0})
    add_case(fam, "unsqueeze0", "unsqueeze", [rnd(2, 3)], {"dim": 0})
    add_case(fam, "unsqueeze_neg", "unsqueeze", [rnd(2, 3)], {"dim": -1})
    add_case(fam, "flatten_mid", "flatten", [rnd(2, 3, 2, 2)], {"start": 1, "end": 2})
    add_case(fam, "flatten_all", "flatten", [rnd(2, 3, 2)], {"start": 0, "end": -1})
    add_case(fam, "reshape", "reshape", [rnd(2, 3, 2)], {"shape": [3, -1]})
    add_case(fam, "reshape_0d", "reshape", [rnd(1, 1)], {"shape": []})
    add_case(fam, "view", "view", [rnd(2, 6)], {"shape": [3, 2, 2]})
    add_case(fam, "exp_of_t", "exp_of_t", [rnd(3, 4)])
    add_case(fam, "add_of_t", "add_of_t", [rnd(3, 2), rnd(2, 3)])
    add_case(fam, "sum_of_permute", "sum_of_permute", [rnd(2, 3, 4)], {"dims": [1]})
    add_case(fam, "softmax_of_transpose", "softmax_of_transpose", [rnd(2, 3, 4)], {"dim": 1})
    add_case(fam, "reshape_of_t", "reshape_of_t", [rnd(3, 4)], {"shape": [2, 6]})
    add_case(fam, "slice_of_t", "slice_of_t", [rnd(4, 3)])


def float32_cases():
    """Forward-only float32 versions of a subset of the float64 cases (same inputs, cast)."""
    keep = {"unary": None, "binary": None, "matmul": None,
            "reduce": {"sum", "mean", "var", "std", "logsumexp", "softmax", "log_softmax", "amax", "max_dim"},
            "view": {"exp_of_t", "add_of_t", "sum_of_permute", "softmax_of_transpose"}}
    for c in list(cases):
        if c["family"] not in keep or (keep[c["family"]] and c["op"] not in keep[c["family"]]):
            continue
        if not any(t["dtype"] == "float64" for t in c["inputs"]):
            continue
        ins = [torch.tensor(t["data"], dtype=F32 if t["dtype"] == "float64" else getattr(torch, t["dtype"]))
               .reshape(t["shape"]) for t in c["inputs"]]
        add_case("float32", c["name"] + "/f32", c["op"], ins, c["args"], grad=False)


def integer_cases():
    """Forward-only cases on integer inputs: the result dtype is part of what is checked."""
    fam = "integer"
    i32, i64 = idx(9, 2, 3).to(torch.int32), idx(9, 2, 3) - 4
    add_case(fam, "exp_int64", "exp", [i64])
    add_case(fam, "sqrt_int32", "sqrt", [i32])
    add_case(fam, "neg_int64", "neg", [i64])
    add_case(fam, "abs_int64", "abs", [i64])
    add_case(fam, "add_int32_int64", "add", [i32, i64])
    add_case(fam, "mul_int64_float", "mul", [i64, rnd(3).to(F32)])
    add_case(fam, "div_int_int", "div", [i64, i32 + 1])
    add_case(fam, "mul_int_scalar", "mul_scalar", [i32], {"scalar": 3})
    add_case(fam, "mul_int_float_scalar", "mul_scalar", [i32], {"scalar": 0.5})
    add_case(fam, "add_bool_int_scalar", "add_scalar", [rnd(4) > 0], {"scalar": 2})
    add_case(fam, "add_int_f64_0d", "add", [i32, torch.tensor(0.25, dtype=F64)])
    add_case(fam, "maximum_int", "maximum", [i64, i32])
    add_case(fam, "clamp_int", "clamp", [i64], {"min": -2, "max": 3})
    add_case(fam, "amax_int", "amax", [i64], {"dims": [1], "keepdim": False})
    add_case(fam, "argmax_int", "argmax", [torch.tensor([[3, 1, 7], [9, 2, 5]])], {"dim": 1, "keepdim": False})
    add_case(fam, "cat_int", "cat", [i64, i64[:1]], {"dim": 0})
    add_case(fam, "where_int", "where", [rnd(2, 3) > 0, i64, i32])


def later_unary_cases():
    """Ops added after the first release: last, so the earlier cases keep their random inputs."""
    fam = "unary"
    add_case(fam, "softplus", "softplus", [rnd(2, 4, lo=-4, hi=4)], {"beta": 1, "threshold": 20})
    # beta x beyond the threshold passes x through (value and gradient).
    add_case(fam, "softplus_beta_threshold", "softplus", [rnd(3, 4, lo=-3, hi=3)], {"beta": 2, "threshold": 1.5})
    add_case(fam, "mish", "mish", [rnd(3, 4, lo=-5, hi=5)])
    add_case(fam, "logsigmoid", "logsigmoid", [rnd(3, 4, lo=-5, hi=5)])
    # The exponents pow takes by division and sqrt (PyTorch's and Mantissa's special cases).
    add_case(fam, "pow_neg_half", "pow_scalar", [pos(2, 3)], {"exponent": -0.5})
    add_case(fam, "pow_neg_1", "pow_scalar", [away(2, 3)], {"exponent": -1})
    add_case(fam, "pow_neg_2", "pow_scalar", [away(2, 3)], {"exponent": -2})
    add_case(fam, "pow_2_5", "pow_scalar", [pos(2, 3)], {"exponent": 2.5})


def promotion_table():
    dtypes = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
              torch.float64]
    out = []

    def t(dt, dim):
        return torch.ones(2, dtype=dt) if dim else torch.ones((), dtype=dt)

    for a in dtypes:
        for a_dim in [1, 0]:
            for b in dtypes:
                for b_dim in [1, 0]:
                    r = torch.result_type(t(a, a_dim), t(b, b_dim))
                    out.append({"op": "add", "a": DTYPE_NAMES[a], "a_dim": a_dim, "b": DTYPE_NAMES[b],
                                "b_dim": b_dim, "result": DTYPE_NAMES[r]})
            for name, s in [("int", 2), ("float", 2.5)]:
                r = torch.result_type(t(a, a_dim), s)
                out.append({"op": "add", "a": DTYPE_NAMES[a], "a_dim": a_dim, "b": name, "b_dim": 0,
                            "result": DTYPE_NAMES[r]})
        # true division: integer results become the default float type
        for b in dtypes:
            if a == torch.bool and b == torch.bool:
                continue
            r = torch.div(t(a, 1), t(b, 1)).dtype
            out.append({"op": "div", "a": DTYPE_NAMES[a], "a_dim": 1, "b": DTYPE_NAMES[b], "b_dim": 1,
                        "result": DTYPE_NAMES[r]})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("-o", "--output", default=os.path.join(root, "tests", "fixtures", "reference_ops.json"))
    args = p.parse_args()
    torch.set_default_dtype(torch.float32)
    unary_cases()
    binary_cases()
    compare_cases()
    inplace_cases()
    reduce_cases()
    matmul_cases()
    shape_cases()
    view_cases()
    float32_cases()
    integer_cases()
    later_unary_cases()
    doc = {"meta": {"generator": "tools/gen_reference.py", "torch": torch.__version__, "cases": len(cases)},
           "cases": cases, "promotion": promotion_table()}
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    # One case per line keeps diffs of the committed file readable.
    with open(args.output, "w") as f:
        f.write('{"meta": ' + json.dumps(doc["meta"]) + ',\n"cases": [\n')
        f.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        f.write('\n],\n"promotion": [\n')
        f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in doc["promotion"]))
        f.write("\n]}\n")
    print(f"wrote {len(cases)} cases, {len(doc['promotion'])} promotion entries to {args.output} "
          f"({os.path.getsize(args.output)} bytes)")


if __name__ == "__main__":
    main()
