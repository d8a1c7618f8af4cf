#!/usr/bin/python3
"""Writes tests/fixtures/reference_attention.json: PyTorch forward values and gradients of
scaled dot-product attention (with and without masks, causal, custom scale) and of
tril/triu, read by tests/test_attention.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_attention.py
PyTorch 1.13 has no fused attention op, so the reference is the definition itself,
softmax(q k^T * scale + mask) v, differentiated by autograd in float64. Inputs are rounded
to 4 decimals so that the JSON text is exactly the double PyTorch used.
"""
import json
import math
import os

import torch

torch.manual_seed(4321)
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


def rnd(*shape, scale=1.0):
    return torch.round(torch.randn(*shape) * scale * 1e4) / 1e4


def enc(t):
    if t is None:
        return None
    t = t.detach()
    if t.dtype == torch.bool:
        return {"shape": list(t.shape), "data": [1.0 if v else 0.0 for v in t.reshape(-1).tolist()]}
    return {"shape": list(t.shape), "data": [float("%.12g" % v) for v in t.reshape(-1).tolist()]}


def attention(q, k, v, mask=None, causal=False, scale=None):
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


ref = {}
cases = []
pad = torch.ones(2, 1, 1, 5, dtype=torch.bool)
pad[0, 0, 0, 3:] = False
pad[1, 0, 0, 4:] = False
for name, qs, ks, vs, mask, causal, scale in [
    ("plain", (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 3), None, False, None),
    ("causal", (2, 2, 7, 4), (2, 2, 7, 4), (2, 2, 7, 4), None, True, None),
    ("causal_rect", (1, 2, 4, 3), (1, 2, 6, 3), (1, 2, 6, 5), None, True, None),
    ("key_padding_bool", (2, 2, 5, 4), (2, 2, 5, 4), (2, 2, 5, 4), pad, False, None),
    ("float_mask_3d", (3, 4, 5), (3, 6, 5), (3, 6, 2), rnd(4, 6), False, 0.3),
    ("causal_and_padding", (2, 2, 5, 4), (2, 2, 5, 4), (2, 2, 5, 4), pad, True, None),
    ("long_tiles", (1, 1, 70, 4), (1, 1, 70, 4), (1, 1, 70, 3), None, True, None),
]:
    q, k, v = rnd(*qs).requires_grad_(), rnd(*ks).requires_grad_(), rnd(*vs).requires_grad_()
    y = attention(q, k, v, mask, causal, scale)
    gy = rnd(*y.shape)
    gq, gk, gv = torch.autograd.grad(y, [q, k, v], gy)
    cases.append(dict(name=name, causal=causal, scale=scale, mask_bool=mask is not None and mask.dtype == torch.bool,
                      mask=enc(mask), q=enc(q), k=enc(k), v=enc(v), gy=enc(gy), y=enc(y), gq=enc(gq), gk=enc(gk),
                      gv=enc(gv)))
ref["attention"] = cases

tri = []
x = rnd(2, 4, 5)
for d in (-2, -1, 0, 1, 3):
    tri.append(dict(diagonal=d, x=enc(x), tril=enc(torch.tril(x, d)), triu=enc(torch.triu(x, d))))
ref["triangle"] = tri

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_attention.json")
with open(out, "w") as f:
    json.dump(ref, f, separators=(",", ":"))
    f.write("\n")
print("wrote", os.path.normpath(out))
