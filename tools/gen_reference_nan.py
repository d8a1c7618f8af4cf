#!/usr/bin/python3
"""Writes tests/fixtures/reference_nan.json: how PyTorch propagates NaN (and signed zero)
through relu, clamp, maximum/minimum, max/min/amax/argmax reductions and pooling, forward
and (where differentiable) backward with an upstream gradient of ones.

    /usr/bin/python3 tools/gen_reference_nan.py      # from the repository root

The output is committed; tests/test_hostile.cpp compares against it (NaN equals NaN there).
torch 1.13 produced the committed file. Format: {"cases": [{"name", "input": {"shape",
"data"}, "output": {"shape", "data"}, "grad": {"shape", "data"} | null}]}; NaN and inf are
written as the strings "nan", "inf", "-inf" (JSON has no such numbers); -0.0 as "-0".
"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
NAN, INF = float("nan"), float("inf")


def enc(t):
    out = []
    for v in t.detach().double().flatten().tolist():
        if math.isnan(v):
            out.append("nan")
        elif math.isinf(v):
            out.append("inf" if v > 0 else "-inf")
        elif v == 0 and math.copysign(1, v) < 0:
            out.append("-0")
        else:
            out.append(v)
    return {"shape": list(t.shape), "data": out}


X = torch.tensor([[[[1.0, NAN, -2.0, 0.5], [3.0, 4.0, -0.0, -1.0], [NAN, -3.0, 2.0, INF], [0.0, 1.5, -INF, 2.5]]]],
                 dtype=torch.float64)

CASES = {
    "relu": lambda x: torch.relu(x),
    "clamp_0_1": lambda x: torch.clamp(x, 0.0, 1.0),
    "clamp_min_0": lambda x: torch.clamp(x, min=0.0),
    "maximum_transposed": lambda x: torch.maximum(x, x.transpose(2, 3)),
    "minimum_transposed": lambda x: torch.minimum(x, x.transpose(2, 3)),
    "max_all": lambda x: x.max(),
    "min_all": lambda x: x.min(),
    "amax_last": lambda x: x.amax(-1),
    "argmax_last": lambda x: x.argmax(-1),
    "max_pool2d_2": lambda x: F.max_pool2d(x, 2),
    "max_pool2d_3_s1_p1": lambda x: F.max_pool2d(x, 3, stride=1, padding=1),
    "avg_pool2d_2": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d_1": lambda x: F.adaptive_avg_pool2d(x, 1),
}


def main():
    cases = []
    for name, fn in CASES.items():
        x = X.clone().requires_grad_(True)
        y = fn(x)
        grad = None
        if y.is_floating_point():
            y.backward(torch.ones_like(y))
            grad = enc(x.grad)
        cases.append({"name": name, "input": enc(X), "output": enc(y), "grad": grad})
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_nan.json")
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
