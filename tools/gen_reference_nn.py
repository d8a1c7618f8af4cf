#!/usr/bin/python3
"""Writes tests/fixtures/reference_nn.json: PyTorch forward values and gradients for the
nn ops (conv2d, pools, batch_norm, layer_norm, embedding, linear, losses), read by
tests/test_nn_reference.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_nn.py
Everything is computed in float64. Inputs are rounded to 4 decimals so that the JSON
text is exactly the double PyTorch used; outputs are written with 12 significant digits.
"""
import json
import os

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
torch.set_default_dtype(torch.float64)


def rnd(*shape, scale=1.0):
    return torch.round(torch.randn(*shape) * scale * 1e4) / 1e4


def enc(t):
    """A tensor as {"shape": [...], "data": [...]} (row-major)."""
    if t is None:
        return None
    t = t.detach()
    if t.dtype in (torch.int64, torch.int32):
        return {"shape": list(t.shape), "data": [int(v) for v in t.reshape(-1).tolist()]}
    return {"shape": list(t.shape), "data": [float("%.12g" % v) for v in t.reshape(-1).tolist()]}


def grads(y, inputs, gy):
    wanted = [t for t in inputs if t is not None and t.requires_grad]
    gs = torch.autograd.grad(y, wanted, gy, allow_unused=True)
    out, it = [], iter(gs)
    for t in inputs:
        out.append(next(it) if t is not None and t.requires_grad else None)
    return out


def req(t):
    return t.clone().requires_grad_(True) if t is not None else None


ref = {}

# ---------------------------------------------------------------- conv2d
conv = []
for name, xs, ws, bias, stride, padding, dilation, groups in [
    ("basic", (2, 3, 5, 5), (4, 3, 3, 3), True, (1, 1), (1, 1), (1, 1), 1),
    ("stride2_nobias", (2, 2, 7, 6), (3, 2, 3, 3), False, (2, 2), (0, 0), (1, 1), 1),
    ("dilation", (1, 2, 7, 7), (2, 2, 3, 3), True, (1, 1), (2, 2), (2, 2), 1),
    ("groups_rect", (2, 4, 6, 5), (6, 2, 3, 2), True, (2, 1), (1, 0), (1, 1), 2),
    ("depthwise", (1, 3, 5, 5), (3, 1, 3, 3), False, (1, 1), (1, 1), (1, 1), 3),
    ("pointwise", (2, 4, 3, 3), (5, 4, 1, 1), True, (1, 1), (0, 0), (1, 1), 1),
]:
    x, w = req(rnd(*xs)), req(rnd(*ws, scale=0.5))
    b = req(rnd(ws[0])) if bias else None
    y = F.conv2d(x, w, b, stride, padding, dilation, groups)
    gy = rnd(*y.shape)
    gx, gw, gb = grads(y, [x, w, b], gy)
    conv.append(dict(name=name, stride=stride, padding=padding, dilation=dilation, groups=groups, x=enc(x),
                     w=enc(w), b=enc(b), gy=enc(gy), y=enc(y), gx=enc(gx), gw=enc(gw), gb=enc(gb)))
ref["conv2d"] = conv

# ---------------------------------------------------------------- pools
pools = []
for name, xs, k, s, p, d, ceil in [
    ("k2", (2, 3, 6, 6), (2, 2), None, (0, 0), (1, 1), False),
    ("k3s2p1_ceil", (1, 2, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ("dilated", (1, 2, 6, 6), (2, 2), (1, 1), (0, 0), (2, 2), False),
    ("rect", (1, 2, 5, 7), (2, 3), (2, 2), (1, 1), (1, 1), False),
]:
    x = req(rnd(*xs))
    y = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil)
    gy = rnd(*y.shape)
    (gx,) = grads(y, [x], gy)
    pools.append(dict(kind="max", name=name, kernel=k, stride=s or k, padding=p, dilation=d, ceil_mode=ceil,
                      x=enc(x), gy=enc(gy), y=enc(y), gx=enc(gx)))
for name, xs, k, s, p, ceil, cip, div in [
    ("k2", (2, 2, 6, 6), (2, 2), None, (0, 0), False, True, None),
    ("k3s2p1_ceil_nopad", (1, 2, 7, 7), (3, 3), (2, 2), (1, 1), True, False, None),
    ("divisor", (1, 2, 6, 6), (3, 3), (2, 2), (1, 1), False, True, 5),
    ("ceil_pad", (1, 1, 6, 6), (3, 3), (2, 2), (1, 1), True, True, None),
]:
    x = req(rnd(*xs))
    y = F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=cip, divisor_override=div)
    gy = rnd(*y.shape)
    (gx,) = grads(y, [x], gy)
    pools.append(dict(kind="avg", name=name, kernel=k, stride=s or k, padding=p, ceil_mode=ceil,
                      count_include_pad=cip, divisor_override=div or 0, x=enc(x), gy=enc(gy), y=enc(y), gx=enc(gx)))
for name, xs, out in [("5x7_to_3x2", (2, 2, 5, 7), (3, 2)), ("global", (1, 3, 4, 4), (1, 1)),
                      ("5x5_to_4x3", (1, 1, 5, 5), (4, 3))]:
    x = req(rnd(*xs))
    y = F.adaptive_avg_pool2d(x, out)
    gy = rnd(*y.shape)
    (gx,) = grads(y, [x], gy)
    pools.append(dict(kind="adaptive", name=name, output_size=out, x=enc(x), gy=enc(gy), y=enc(y), gx=enc(gx)))
ref["pool2d"] = pools

# ---------------------------------------------------------------- batch_norm
bn = []
for name, xs, training, affine in [("train2d", (4, 3, 2, 2), True, True), ("eval2d", (2, 3, 2, 3), False, True),
                                   ("train1d", (5, 3), True, True), ("train1d_3d", (3, 2, 4), True, False),
                                   ("eval1d_noaffine", (4, 2), False, False)]:
    c = xs[1]
    x = req(rnd(*xs, scale=2.0) + 0.5)
    w = req(rnd(c) * 0.5 + 1.0) if affine else None
    b = req(rnd(c)) if affine else None
    rm = rnd(c) if not training else torch.zeros(c)
    rv = (rnd(c).abs() + 0.5) if not training else torch.ones(c)
    rm0, rv0 = rm.clone(), rv.clone()
    y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)
    gy = rnd(*y.shape)
    gx, gw, gb = grads(y, [x, w, b], gy)
    bn.append(dict(name=name, training=training, momentum=0.1, eps=1e-5, x=enc(x), weight=enc(w), bias=enc(b),
                   running_mean_in=enc(rm0), running_var_in=enc(rv0), running_mean=enc(rm), running_var=enc(rv),
                   gy=enc(gy), y=enc(y), gx=enc(gx), gw=enc(gw), gb=enc(gb)))
ref["batch_norm"] = bn

# ---------------------------------------------------------------- layer_norm
ln = []
for name, xs, shape, affine in [("last", (3, 4, 5), (5,), True), ("last2", (2, 3, 4), (3, 4), True),
                                ("noaffine", (4, 6), (6,), False)]:
    x = req(rnd(*xs, scale=2.0) + 1.0)
    w = req(rnd(*shape) * 0.5 + 1.0) if affine else None
    b = req(rnd(*shape)) if affine else None
    y = F.layer_norm(x, shape, w, b, eps=1e-5)
    gy = rnd(*y.shape)
    gx, gw, gb = grads(y, [x, w, b], gy)
    ln.append(dict(name=name, normalized_shape=shape, eps=1e-5, x=enc(x), weight=enc(w), bias=enc(b), gy=enc(gy),
                   y=enc(y), gx=enc(gx), gw=enc(gw), gb=enc(gb)))
ref["layer_norm"] = ln

# ---------------------------------------------------------------- embedding, linear
w = req(rnd(6, 3))
idx = torch.tensor([[0, 1, 2, 1], [5, 3, 1, 0]])
y = F.embedding(idx, w, padding_idx=1)
gy = rnd(*y.shape)
(gw,) = grads(y, [w], gy)
ref["embedding"] = [dict(name="padding1", padding_idx=1, weight=enc(w), indices=enc(idx), gy=enc(gy), y=enc(y),
                         gw=enc(gw))]

lin = []
for name, xs, ws, bias in [("batched", (2, 3, 4), (5, 4), True), ("vector_nobias", (4,), (3, 4), False)]:
    x, w = req(rnd(*xs)), req(rnd(*ws))
    b = req(rnd(ws[0])) if bias else None
    y = F.linear(x, w, b)
    gy = rnd(*y.shape)
    gx, gw, gb = grads(y, [x, w, b], gy)
    lin.append(dict(name=name, x=enc(x), w=enc(w), b=enc(b), gy=enc(gy), y=enc(y), gx=enc(gx), gw=enc(gw),
                    gb=enc(gb)))
ref["linear"] = lin

# ---------------------------------------------------------------- losses
RED = ["none", "mean", "sum"]


def loss_grad_seed(y):
    return rnd(*y.shape) if y.dim() > 0 else torch.tensor(0.7)


ce = []
logits = rnd(6, 5, scale=2.0)
t = torch.tensor([1, 0, 4, 2, 2, 3])
t_ign = torch.tensor([1, -100, 4, 2, -100, 3])
t_ign2 = torch.tensor([1, 2, 4, 2, 0, 3])
cw = rnd(5).abs() + 0.2
for name, x0, tgt, kw in [
    ("mean", logits, t, dict()),
    ("sum", logits, t, dict(reduction="sum")),
    ("none", logits, t, dict(reduction="none")),
    ("smooth", logits, t, dict(label_smoothing=0.1)),
    ("ignore", logits, t_ign, dict()),
    ("weight_smooth_ignore2", logits, t_ign2, dict(weight=cw, label_smoothing=0.2, ignore_index=2)),
    ("weight_none", logits, t, dict(weight=cw, reduction="none")),
    ("weight_sum_smooth", logits, t_ign, dict(weight=cw, reduction="sum", label_smoothing=0.3)),
    ("kdim_none_smooth", rnd(2, 4, 3), torch.tensor([[0, 3, 1], [2, 2, 0]]),
     dict(reduction="none", label_smoothing=0.05)),
    ("kdim_mean", rnd(2, 4, 3), torch.tensor([[0, 3, 1], [2, -100, 0]]), dict()),
    ("unbatched", rnd(5), torch.tensor(3), dict()),
]:
    x = req(x0)
    y = F.cross_entropy(x, tgt, **kw)
    gy = loss_grad_seed(y)
    (gx,) = grads(y, [x], gy)
    ce.append(dict(name=name, reduction=kw.get("reduction", "mean"), ignore_index=kw.get("ignore_index", -100),
                   label_smoothing=kw.get("label_smoothing", 0.0), weight=enc(kw.get("weight")), x=enc(x),
                   target=enc(tgt), gy=enc(gy), y=enc(y), gx=enc(gx)))
ref["cross_entropy"] = ce

nll = []
logp = torch.log_softmax(rnd(5, 4), 1)
tn = torch.tensor([3, 0, -100, 1, 1])
nw = rnd(4).abs() + 0.3
for name, kw in [("mean", dict()), ("sum", dict(reduction="sum")), ("none", dict(reduction="none")),
                 ("weight_mean", dict(weight=nw)), ("weight_none", dict(weight=nw, reduction="none"))]:
    x = req(logp)
    y = F.nll_loss(x, tn, **kw)
    gy = loss_grad_seed(y)
    (gx,) = grads(y, [x], gy)
    nll.append(dict(name=name, reduction=kw.get("reduction", "mean"), ignore_index=-100, weight=enc(kw.get("weight")),
                    x=enc(x), target=enc(tn), gy=enc(gy), y=enc(y), gx=enc(gx)))
ref["nll_loss"] = nll

mse = []
xm, tm = rnd(3, 4), rnd(3, 4)
for red in RED:
    x, tt = req(xm), req(tm)
    y = F.mse_loss(x, tt, reduction=red)
    gy = loss_grad_seed(y)
    gx, gt = grads(y, [x, tt], gy)
    mse.append(dict(name=red, reduction=red, x=enc(x), target=enc(tt), gy=enc(gy), y=enc(y), gx=enc(gx), gt=enc(gt)))
ref["mse_loss"] = mse

bce = []
xb = rnd(4, 3, scale=3.0)
xb[0, 0] = 0.0
xb[2, 1] = 0.0
xb[1, 2] = 40.0
xb[3, 0] = -40.0
yb = torch.rand(4, 3).mul(1e4).round().div(1e4)
bw = rnd(3).abs() + 0.5
pw = rnd(3).abs() + 0.5
for name, red, w_, p_ in [("mean", "mean", None, None), ("sum", "sum", None, None), ("none", "none", None, None),
                          ("weight_pos_none", "none", bw, pw), ("pos_mean", "mean", None, pw)]:
    x, tt = req(xb), req(yb)
    y = F.binary_cross_entropy_with_logits(x, tt, weight=w_, pos_weight=p_, reduction=red)
    gy = loss_grad_seed(y)
    gx, gt = grads(y, [x, tt], gy)
    bce.append(dict(name=name, reduction=red, weight=enc(w_), pos_weight=enc(p_), x=enc(x), target=enc(tt),
                    gy=enc(gy), y=enc(y), gx=enc(gx), gt=enc(gt)))
ref["binary_cross_entropy_with_logits"] = bce

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_nn.json")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump(ref, f, separators=(",", ":"))
    f.write("\n")
print("wrote", os.path.normpath(out), os.path.getsize(out), "bytes, torch", torch.__version__)
