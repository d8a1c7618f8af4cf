#!/usr/bin/python3
"""Writes tests/fixtures/reference_new_optim.json: the learning rates torch 1.13's
ExponentialLR, MultiStepLR, CosineAnnealingLR, LambdaLR and ReduceLROnPlateau give two SGD
parameter groups (lr 0.1 and 0.05) over 30 steps, read by tests/test_new_optim.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_new_optim.py
"""
import json
import os
import warnings

import torch

warnings.simplefilter("ignore")
S = torch.optim.lr_scheduler


def opt():
    return torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": 0.1},
                            {"params": [torch.zeros(1, requires_grad=True)], "lr": 0.05}])


def run(make, steps=30, metrics=None):
    o = opt()
    s = make(o)
    lrs = [[g["lr"] for g in o.param_groups]]
    for t in range(steps):
        o.step()
        if metrics is None:
            s.step()
        else:
            s.step(metrics[t])
        lrs.append([g["lr"] for g in o.param_groups])
    return lrs


# A validation loss that improves, stalls, improves a little (below the threshold), and so on.
metrics = [1.0, 0.9, 0.85, 0.85, 0.86, 0.87, 0.8, 0.79995, 0.8, 0.81, 0.7, 0.7, 0.7, 0.7, 0.69, 0.71,
           0.72, 0.73, 0.74, 0.75, float("nan"), 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
ref = {
    "exponential": run(lambda o: S.ExponentialLR(o, gamma=0.9)),
    "multistep": run(lambda o: S.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.5)),
    "cosine": run(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001)),
    "lambda": run(lambda o: S.LambdaLR(o, lr_lambda=[lambda t: 0.95 ** t, lambda t: 1.0 / (1 + t)])),
    "plateau_min": run(lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1, min_lr=[0.01, 0.02]),
                       metrics=metrics),
    "plateau_max_abs": run(lambda o: S.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=1,
                                                         threshold=0.05, threshold_mode="abs"),
                           metrics=[-m for m in metrics]),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_new_optim.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "metrics": [m if m == m else "nan" for m in metrics], "lrs": ref}, f,
              separators=(",", ":"))
    f.write("\n")
print("wrote", out)
