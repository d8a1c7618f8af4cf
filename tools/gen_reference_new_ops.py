#!/usr/bin/python3
"""Writes tests/fixtures/reference_new_ops.json: PyTorch 1.13 forward values and gradients of
cumsum/cumprod, the extra losses (l1, smooth_l1, huber, binary_cross_entropy, kl_div,
margin_ranking, cosine_embedding), norm, all/any and sort/argsort/topk, read by
tests/test_new_ops.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_new_ops.py
Computed in float64 from inputs rounded to 4 decimals (exact in the JSON text); outputs have
15 significant digits; NaN and +-inf are written as the strings "nan", "inf", "-inf".
Each case: op name, params, args (tensors; "grad": true where a gradient is checked), the
upstream gradient "gy" (for the first output), outputs "out" (list) and "grads" (per arg).
"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(26)
torch.set_num_threads(1)


def rnd(*shape, scale=1.0, dtype=torch.float64):
    return (torch.round(torch.randn(tuple(shape), dtype=torch.float64) * scale * 1e4) / 1e4).to(dtype)


def num(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float("%.15g" % v)


DT = {torch.float64: "float64", torch.float32: "float32", torch.int64: "int64", torch.int32: "int32",
      torch.bool: "bool", torch.uint8: "uint8"}


def enc(t):
    if t is None:
        return None
    t = t.detach()
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": [num(v) for v in t.reshape(-1).tolist()]}


cases = []


def case(name, op, fn, args, params=None, grad=None, gy_seed=None):
    """fn(*args) -> tensor or tuple (the first output is differentiated)."""
    grad = grad if grad is not None else [a.is_floating_point() for a in args]
    leaves = [a.clone().requires_grad_(g) for a, g in zip(args, grad)]
    outs = fn(*leaves)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    y = outs[0]
    entry = {"name": name, "op": op, "params": params or {},
             "args": [dict(enc(a), grad=bool(g)) for a, g in zip(args, grad)],
             "out": [enc(o) for o in outs]}
    if any(grad) and y.requires_grad:
        gy = rnd(*y.shape)
        gs = torch.autograd.grad(y, [l for l, g in zip(leaves, grad) if g], gy, allow_unused=True)
        it = iter(gs)
        entry["gy"] = enc(gy)
        entry["grads"] = [enc(next(it)) if g else None for g in grad]
    cases.append(entry)


# ---------------------------------------------------------------- cumsum / cumprod
x = rnd(3, 5)
case("cumsum_dim1", "cumsum", lambda a: torch.cumsum(a, 1), [x], {"dim": 1})
case("cumsum_dim0_neg", "cumsum", lambda a: torch.cumsum(a, -2), [x], {"dim": -2})
case("cumsum_transposed", "cumsum", lambda a: torch.cumsum(a.t(), 1), [x], {"dim": 1, "view": "t"})
case("cumsum_0dim", "cumsum", lambda a: torch.cumsum(a, 0), [torch.tensor(1.5, dtype=torch.float64)], {"dim": 0})
case("cumsum_empty", "cumsum", lambda a: torch.cumsum(a, 1), [torch.zeros(2, 0, dtype=torch.float64)], {"dim": 1})
case("cumsum_nan", "cumsum", lambda a: torch.cumsum(a, 0),
     [torch.tensor([1.0, float("nan"), 2.0, float("inf")], dtype=torch.float64)], {"dim": 0})
case("cumsum_int32", "cumsum", lambda a: torch.cumsum(a, 0), [torch.tensor([3, -4, 2**30, 2**30], dtype=torch.int32)],
     {"dim": 0})
case("cumsum_bool", "cumsum", lambda a: torch.cumsum(a, 0), [torch.tensor([True, False, True])], {"dim": 0})
case("cumprod_dim1", "cumprod", lambda a: torch.cumprod(a, 1), [rnd(2, 6)], {"dim": 1})
case("cumprod_one_zero", "cumprod", lambda a: torch.cumprod(a, 0),
     [torch.tensor([2.0, -1.5, 0.0, 3.0, 0.5], dtype=torch.float64)], {"dim": 0})
case("cumprod_two_zeros", "cumprod", lambda a: torch.cumprod(a, 1),
     [torch.tensor([[0.0, 2.0, 0.0, 1.5, -2.0], [1.25, 0.0, 0.0, 3.0, 2.0]], dtype=torch.float64)], {"dim": 1})
case("cumprod_transposed", "cumprod", lambda a: torch.cumprod(a.t(), 0), [rnd(4, 3)], {"dim": 0, "view": "t"})
case("cumprod_uint8", "cumprod", lambda a: torch.cumprod(a, 0), [torch.tensor([2, 3, 50], dtype=torch.uint8)],
     {"dim": 0})

# ---------------------------------------------------------------- losses
a, b = rnd(3, 4), rnd(3, 4)
b[0, 0] = a[0, 0]  # d = 0: the gradient of |d| is 0 there
b[1, 1] = a[1, 1] + 1.0  # |d| = beta exactly: the boundary
for r in ["none", "mean", "sum"]:
    case(f"l1_{r}", "l1_loss", lambda p, q: F.l1_loss(p, q, reduction=r), [a, b], {"reduction": r})
    case(f"smooth_l1_{r}", "smooth_l1_loss", lambda p, q: F.smooth_l1_loss(p, q, reduction=r, beta=1.0), [a, b],
         {"reduction": r, "beta": 1.0})
    case(f"huber_{r}", "huber_loss", lambda p, q: F.huber_loss(p, q, reduction=r, delta=0.7), [a, b],
         {"reduction": r, "delta": 0.7})
# beta = 0 away from d = 0, where PyTorch's kernel gives -1 to both arguments (docs/nn.md).
case("smooth_l1_beta0", "smooth_l1_loss", lambda p, q: F.smooth_l1_loss(p, q, beta=0.0), [a, b + 0.05],
     {"beta": 0.0, "reduction": "mean"})
case("smooth_l1_beta_small", "smooth_l1_loss", lambda p, q: F.smooth_l1_loss(p, q, reduction="sum", beta=0.3), [a, b],
     {"reduction": "sum", "beta": 0.3})

p = torch.round(torch.rand(3, 4, dtype=torch.float64) * 1e4) / 1e4
p[0, 0], p[0, 1], p[1, 2] = 0.0, 1.0, 1e-4
t = torch.round(torch.rand(3, 4, dtype=torch.float64) * 1e4) / 1e4
t[0, 0], t[0, 1] = 0.25, 0.5  # at p = 0 and 1 with soft targets: the -100 clamp shows
w = torch.round(torch.rand(4, dtype=torch.float64) * 1e4) / 1e4 + 0.5
for r in ["none", "mean", "sum"]:
    case(f"bce_{r}", "binary_cross_entropy", lambda q, s: F.binary_cross_entropy(q, s, reduction=r), [p, t],
         {"reduction": r})
case("bce_weight_mean", "binary_cross_entropy", lambda q, s, ww: F.binary_cross_entropy(q, s, weight=ww), [p, t, w],
     {"reduction": "mean"}, grad=[True, True, False])

logp = F.log_softmax(rnd(3, 5), 1).detach()
tq = F.softmax(rnd(3, 5), 1).detach()
tq[0, 1] = 0.0  # target 0: contributes 0
# The target gradient is not compared where the target is 0: PyTorch's is NaN there (0 / 0 in
# xlogy's backward), Mantissa's is finite (docs/nn.md); tq_pos has no zero.
tq_pos = F.softmax(rnd(3, 5), 1).detach()
for r in ["none", "mean", "sum", "batchmean"]:
    case(f"kl_div_{r}", "kl_div", lambda q, s: F.kl_div(q, s, reduction=r), [logp, tq], {"reduction": r},
         grad=[True, False])
    case(f"kl_div_{r}_target_grad", "kl_div", lambda q, s: F.kl_div(q, s, reduction=r), [logp, tq_pos],
         {"reduction": r})
case("kl_div_log_target", "kl_div", lambda q, s: F.kl_div(q, s, reduction="sum", log_target=True),
     [logp, F.log_softmax(rnd(3, 5), 1).detach()], {"reduction": "sum", "log_target": True})

x1, x2 = rnd(6), rnd(6)
y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
for r in ["none", "mean", "sum"]:
    case(f"margin_ranking_{r}", "margin_ranking_loss", lambda u, v, s: F.margin_ranking_loss(u, v, s, 0.3, reduction=r),
         [x1, x2, y], {"reduction": r, "margin": 0.3}, grad=[True, True, False])
    case(f"cosine_embedding_{r}", "cosine_embedding_loss",
         lambda u, v, s: F.cosine_embedding_loss(u, v, s, margin=0.2, reduction=r), [rnd(4, 3), rnd(4, 3),
                                                                                      y[:4].clone()],
         {"reduction": r, "margin": 0.2}, grad=[True, True, False])
case("cosine_embedding_1d", "cosine_embedding_loss", lambda u, v, s: F.cosine_embedding_loss(u, v, s, margin=-0.5),
     [rnd(5), rnd(5), torch.tensor(-1.0, dtype=torch.float64)], {"reduction": "mean", "margin": -0.5},
     grad=[True, True, False])

# ---------------------------------------------------------------- norm, all / any
xn = rnd(3, 4)
xn[1] = 0.0  # a zero row: the 2-norm's gradient is 0 there
xn[2, 1] = xn[2, 3] = 2.5  # a tie for the inf norm
for pname, pv in [("2", 2.0), ("1", 1.0), ("inf", float("inf")), ("3", 3.0), ("0", 0.0)]:
    case(f"norm_p{pname}_all", "norm", lambda q: torch.norm(q, p=pv), [xn], {"p": pv if pname != "inf" else "inf"})
    case(f"norm_p{pname}_dim1", "norm", lambda q: torch.norm(q, p=pv, dim=1), [xn],
         {"p": pv if pname != "inf" else "inf", "dims": [1]})
case("norm_fro_keepdim", "norm", lambda q: torch.norm(q, p="fro", dim=0, keepdim=True), [xn],
     {"p": "fro", "dims": [0], "keepdim": True})
case("norm_transposed", "norm", lambda q: torch.norm(q.t(), dim=1), [xn], {"p": 2.0, "dims": [1], "view": "t"})
case("norm_empty", "norm", lambda q: torch.norm(q), [torch.zeros(0, 3, dtype=torch.float64)], {"p": 2.0})

xb = torch.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, float("nan")], [0.0, 0.0, 0.0]], dtype=torch.float64)
case("all_all", "all", lambda q: torch.all(q), [xb], {})
case("any_all", "any", lambda q: torch.any(q), [xb], {})
case("all_dim1", "all", lambda q: torch.all(q, 1), [xb], {"dims": [1]})
case("any_dim1_keepdim", "any", lambda q: torch.any(q, 1, keepdim=True), [xb], {"dims": [1], "keepdim": True})
case("all_empty", "all", lambda q: torch.all(q), [torch.zeros(0, dtype=torch.float64)], {})
case("any_empty", "any", lambda q: torch.any(q), [torch.zeros(0, dtype=torch.float64)], {})
case("any_int64_dim0", "any", lambda q: torch.any(q, 0), [torch.tensor([[0, 5], [0, 0]])], {"dims": [0]})
case("all_uint8", "all", lambda q: torch.all(q), [torch.tensor([1, 2, 3], dtype=torch.uint8)], {})

# ---------------------------------------------------------------- sort / argsort / topk
xs = rnd(3, 6)
xs[0, 1] = xs[0, 4]  # a tie: stable order
xs[2, 2] = float("nan")
for desc in [False, True]:
    tag = "desc" if desc else "asc"
    case(f"sort_{tag}", "sort", lambda q: torch.sort(q, dim=1, descending=desc, stable=True), [xs],
         {"dim": 1, "descending": desc})
    case(f"argsort_{tag}", "argsort", lambda q: torch.argsort(q, dim=0, descending=desc, stable=True), [xs],
         {"dim": 0, "descending": desc}, grad=[False])
case("sort_transposed", "sort", lambda q: torch.sort(q.t(), dim=0, stable=True), [xs], {"dim": 0, "view": "t"})
case("sort_int64", "sort", lambda q: torch.sort(q, stable=True), [torch.tensor([3, -1, 2**40, 3, 0])], {"dim": -1})
case("sort_0dim", "sort", lambda q: torch.sort(q, 0), [torch.tensor(2.0, dtype=torch.float64)], {"dim": 0})
xt = rnd(4, 5)
case("topk_largest", "topk", lambda q: torch.topk(q, 3, dim=1), [xt], {"k": 3, "dim": 1, "largest": True})
case("topk_smallest_dim0", "topk", lambda q: torch.topk(q, 2, dim=0, largest=False), [xt],
     {"k": 2, "dim": 0, "largest": False})
case("topk_nan", "topk", lambda q: torch.topk(q, 2), [torch.tensor([1.0, float("nan"), 3.0, -2.0],
                                                                     dtype=torch.float64)],
     {"k": 2, "dim": -1, "largest": True})
case("topk_k0", "topk", lambda q: torch.topk(q, 0), [xt], {"k": 0, "dim": -1, "largest": True}, grad=[False])

# ---------------------------------------------------------------- activations
xa = rnd(3, 5)
xa[0, 0], xa[0, 1], xa[0, 2], xa[0, 3] = 0.0, -0.5, 0.5, float("nan")  # the kink, both hardtanh bounds, NaN
case("leaky_relu", "leaky_relu", lambda q: F.leaky_relu(q, 0.2), [xa], {"negative_slope": 0.2})
case("elu", "elu", lambda q: F.elu(q, 1.3), [xa], {"alpha": 1.3})
case("hardtanh", "hardtanh", lambda q: F.hardtanh(q, -0.5, 0.5), [xa], {"min_val": -0.5, "max_val": 0.5})
case("leaky_relu_transposed", "leaky_relu", lambda q: F.leaky_relu(q.t(), 0.1), [rnd(4, 3)],
     {"negative_slope": 0.1, "view": "t"})
xp = rnd(2, 3, 2, 2)
xp[0, 0, 0, 0] = 0.0
case("prelu_channels", "prelu", lambda q, ww: F.prelu(q, ww), [xp, torch.tensor([0.25, -0.5, 1.5],
                                                                                 dtype=torch.float64)], {})
case("prelu_shared", "prelu", lambda q, ww: F.prelu(q, ww), [rnd(4, 3), torch.tensor([0.1], dtype=torch.float64)],
     {})

# ---------------------------------------------------------------- group / rms / instance norm
xg = rnd(2, 6, 3, 2, scale=2.0) + 0.5
wg, bg = rnd(6) + 1.0, rnd(6)
case("group_norm_affine", "group_norm", lambda q, ww, bb: F.group_norm(q, 3, ww, bb, eps=1e-5), [xg, wg, bg],
     {"num_groups": 3, "eps": 1e-5})
case("group_norm_plain_1group", "group_norm", lambda q: F.group_norm(q, 1, eps=1e-3), [rnd(3, 4, 5)],
     {"num_groups": 1, "eps": 1e-3})
case("group_norm_channels_as_groups", "group_norm", lambda q: F.group_norm(q, 4), [rnd(2, 4, 7)],
     {"num_groups": 4, "eps": 1e-5})


def rms_norm(q, shape, w=None, eps=None):  # torch 1.13 has no rms_norm: its later definition
    e = eps if eps is not None else torch.finfo(q.dtype).eps
    dims = tuple(range(q.dim() - len(shape), q.dim()))
    y = q * torch.rsqrt(torch.mean(q * q, dim=dims, keepdim=True) + e)
    return y * w if w is not None else y


xr = rnd(3, 4, 8)
case("rms_norm_weight", "rms_norm", lambda q, ww: rms_norm(q, [8], ww, 1e-6), [xr, rnd(8) + 1.0],
     {"normalized_shape": [8], "eps": 1e-6})
case("rms_norm_two_dims_default_eps", "rms_norm", lambda q: rms_norm(q, [4, 8]), [xr], {"normalized_shape": [4, 8]})
xi = rnd(2, 3, 4, 5, scale=3.0)
case("instance_norm_2d_affine", "instance_norm",
     lambda q, ww, bb: F.instance_norm(q, weight=ww, bias=bb, eps=1e-5), [xi, rnd(3) + 1.0, rnd(3)], {"eps": 1e-5})
case("instance_norm_1d", "instance_norm", lambda q: F.instance_norm(q, eps=1e-4), [rnd(2, 3, 6)], {"eps": 1e-4})

# ---------------------------------------------------------------- 1-D and transposed convolutions, 1-D pools
x1 = rnd(2, 4, 9)
case("conv1d_strided_grouped", "conv1d",
     lambda q, ww, bb: F.conv1d(q, ww, bb, stride=2, padding=1, dilation=2, groups=2), [x1, rnd(6, 2, 3), rnd(6)],
     {"stride": 2, "padding": 1, "dilation": 2, "groups": 2})
case("conv1d_plain", "conv1d", lambda q, ww: F.conv1d(q, ww), [x1, rnd(3, 4, 2)], {})
xt = rnd(2, 4, 3, 3)
case("conv_transpose2d_stride2_outpad", "conv_transpose2d",
     lambda q, ww, bb: F.conv_transpose2d(q, ww, bb, stride=2, padding=1, output_padding=1, groups=2),
     [xt, rnd(4, 3, 3, 3), rnd(6)], {"stride": [2, 2], "padding": [1, 1], "output_padding": [1, 1], "dilation": [1, 1],
                                     "groups": 2})
case("conv_transpose2d_dilated_rect", "conv_transpose2d",
     lambda q, ww: F.conv_transpose2d(q, ww, stride=(1, 2), padding=(0, 1), dilation=(2, 1)), [xt, rnd(4, 2, 2, 3)],
     {"stride": [1, 2], "padding": [0, 1], "output_padding": [0, 0], "dilation": [2, 1], "groups": 1})
case("conv_transpose2d_dcgan", "conv_transpose2d",
     lambda q, ww: F.conv_transpose2d(q, ww, stride=2, padding=1), [rnd(2, 3, 4, 4), rnd(3, 2, 4, 4)],
     {"stride": [2, 2], "padding": [1, 1], "output_padding": [0, 0], "dilation": [1, 1], "groups": 1})
case("conv_transpose1d", "conv_transpose1d",
     lambda q, ww, bb: F.conv_transpose1d(q, ww, bb, stride=3, padding=1, output_padding=2), [x1, rnd(4, 5, 4), rnd(5)],
     {"stride": 3, "padding": 1, "output_padding": 2, "dilation": 1, "groups": 1})
xm = rnd(2, 3, 10)
case("max_pool1d", "max_pool1d", lambda q: F.max_pool1d(q, 3, stride=2, padding=1, ceil_mode=True), [xm],
     {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True})
case("avg_pool1d", "avg_pool1d", lambda q: F.avg_pool1d(q, 4, stride=3, padding=2, count_include_pad=False), [xm],
     {"kernel_size": 4, "stride": 3, "padding": 2, "count_include_pad": False})
case("adaptive_avg_pool1d_uneven", "adaptive_avg_pool1d", lambda q: F.adaptive_avg_pool1d(q, 4), [xm],
     {"output_size": 4})

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_new_ops.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {out}")
