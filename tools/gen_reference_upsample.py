#!/usr/bin/python3
"""Writes tests/fixtures/reference_upsample.json: torch 1.13's F.interpolate (nearest 1-D/2-D,
linear, bilinear with align_corners true and false; by size and by scale_factor, including
non-integer scales, downsampling and a scale that keeps the size) forward values and input
gradients for a fixed upstream gradient, read by tests/test_upsample.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_upsample.py

"cases": [{"name", "mode", "size" | "scale_factor", "align_corners" (linear modes), "dtype",
           "x", "gy", "y", "gx": {"shape", "data"}}]   (gx = d(sum(y * gy)) / dx)
Inputs have C >= 2: for C = 1 a contiguous input is also channels-last and torch 1.13 runs
its channels-last kernels, whose nearest source indices differ (nearest_idx's shortcuts).
A nearest case whose torch gradient is not the adjoint of torch's forward stores the adjoint
as "gx" and torch's as "gx_torch" (see below).
"""
import json
import os

import torch
import torch.nn.functional as F

gen = torch.Generator().manual_seed(2024)


def tj(t):
    return {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()}


def case(name, mode, shape, size=None, scale=None, align_corners=None, dtype=torch.float64):
    x = torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
    y = F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align_corners)
    gy = torch.randn(*y.shape, generator=gen, dtype=torch.float64).to(dtype)
    (gx,) = torch.autograd.grad(y, x, gy)
    c = {"name": name, "mode": mode, "dtype": str(dtype).replace("torch.", ""), "x": tj(x), "gy": tj(gy), "y": tj(y),
         "gx": tj(gx)}
    if mode == "nearest":
        # torch 1.13's nearest backward picks sources with nearest_idx (a dim of unchanged or
        # exactly doubled size maps d -> d or d / 2), its channels-first forward with floor(d *
        # scale) for every dim: then its gradient is not the adjoint of its forward. The adjoint
        # (what Mantissa's backward computes) from the forward's own source indices:
        flat = torch.arange(x[0, 0].numel(), dtype=torch.float64).reshape(x.shape[2:]).expand(x.shape)
        src = F.interpolate(flat, size=size, scale_factor=scale, mode=mode).long().reshape(*y.shape[:2], -1)
        adj = torch.zeros(*x.shape[:2], x[0, 0].numel(), dtype=torch.float64)
        adj.scatter_add_(2, src, gy.double().reshape(*y.shape[:2], -1))
        if not torch.equal(adj.reshape(x.shape).to(dtype), gx):
            c["gx_torch"] = c["gx"]
            c["gx"] = tj(adj.reshape(x.shape))
            c["note"] = "torch's nearest backward is not the adjoint of its forward here; gx is the adjoint"
    if size is not None:
        c["size"] = size if isinstance(size, list) else [size]
    if scale is not None:
        c["scale_factor"] = scale if isinstance(scale, list) else [scale]
    if align_corners is not None:
        c["align_corners"] = align_corners
    return c


CASES = [
    case("nearest1d_size_up", "nearest", [2, 3, 5], size=12),
    case("nearest1d_size_down", "nearest", [2, 3, 9], size=4),
    case("nearest1d_scale_1_7", "nearest", [2, 3, 5], scale=1.7),
    case("nearest1d_scale_0_6", "nearest", [1, 2, 10], scale=0.6),
    case("nearest2d_size", "nearest", [2, 2, 3, 4], size=[7, 5]),
    case("nearest2d_scale_2", "nearest", [1, 2, 3, 3], scale=2.0),
    case("nearest2d_scale_1_7_2_3", "nearest", [1, 2, 4, 3], scale=[1.7, 2.3]),
    case("nearest2d_down", "nearest", [1, 3, 8, 7], size=[3, 4]),
    case("nearest2d_scale_same_size", "nearest", [1, 2, 3, 3], scale=1.3),
    case("linear_size", "linear", [2, 3, 5], size=9, align_corners=False),
    case("linear_size_align", "linear", [2, 3, 5], size=9, align_corners=True),
    case("linear_scale_1_7", "linear", [2, 2, 6], scale=1.7, align_corners=False),
    case("linear_scale_1_7_align", "linear", [2, 2, 6], scale=1.7, align_corners=True),
    case("linear_down", "linear", [1, 2, 11], size=4, align_corners=False),
    case("linear_down_align", "linear", [1, 2, 11], size=4, align_corners=True),
    case("linear_scale_same_size", "linear", [1, 2, 3], scale=1.3, align_corners=False),
    case("bilinear_size", "bilinear", [2, 2, 4, 5], size=[7, 9], align_corners=False),
    case("bilinear_size_align", "bilinear", [2, 2, 4, 5], size=[7, 9], align_corners=True),
    case("bilinear_scale_1_7", "bilinear", [1, 2, 4, 5], scale=1.7, align_corners=False),
    case("bilinear_scale_1_7_align", "bilinear", [1, 2, 4, 5], scale=1.7, align_corners=True),
    case("bilinear_scale_mixed_same_h", "bilinear", [1, 2, 3, 5], scale=[1.3, 2.5], align_corners=False),
    case("bilinear_down", "bilinear", [1, 2, 9, 8], size=[4, 3], align_corners=False),
    case("bilinear_down_align", "bilinear", [1, 2, 9, 8], size=[4, 3], align_corners=True),
    case("bilinear_to_1x1", "bilinear", [1, 2, 4, 4], size=[1, 1], align_corners=False),
    case("bilinear_to_1x1_align", "bilinear", [1, 2, 4, 4], size=[1, 1], align_corners=True),
    case("bilinear_float32", "bilinear", [1, 2, 5, 5], scale=1.7, align_corners=False, dtype=torch.float32),
    case("nearest2d_float32", "nearest", [1, 2, 5, 4], scale=[1.7, 0.8], dtype=torch.float32),
]

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_upsample.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": CASES}, f, separators=(",", ":"))
    f.write("\n")
print("wrote", out, len(CASES), "cases")
