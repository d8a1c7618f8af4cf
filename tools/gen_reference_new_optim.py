#!/usr/bin/python3
"""Writes tests/fixtures/reference_new_optim.json: the learning rates torch 1.13's
ExponentialLR, MultiStepLR, CosineAnnealingLR, LambdaLR and ReduceLROnPlateau give two SGD
parameter groups (lr 0.1 and 0.05) over 30 steps, read by tests/test_new_optim.cpp; and
("optimizers") the float32 parameters torch.optim.RMSprop and torch.optim.Adagrad produce from
fixed gradient sequences, read by tests/test_optim_extra.cpp.

"optimizers": [{"name", "type": "RMSprop"|"Adagrad", "defaults": {keyword arguments},
                "groups": [{"params": ["w"|"b", ...], overrides...}],
                "w0", "b0": {"shape", "data"}, "grads": [{"w": [...], "b": [...]} per step],
                "trajectory": [{"w": [...], "b": [...]} after each step]}]
Each step sets p.grad to the step's gradient and calls step(); float32 values are written as
the exact doubles, so the test can compare bit for bit.

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


# ---------------------------------------------------------------- RMSprop / Adagrad steps
gen = torch.Generator().manual_seed(4321)
W0 = torch.randn(5, 7, generator=gen)  # 35 elements: torch's vectorized loop and its scalar tail
B0 = torch.randn(3, generator=gen)
STEPS = 8
GRADS = [{"w": torch.randn(5, 7, generator=gen), "b": torch.randn(3, generator=gen)} for _ in range(STEPS)]


def flat(t):
    return t.detach().reshape(-1).tolist()


def run_optimizer(name, kind, defaults, groups):
    w = W0.clone().requires_grad_()
    b = B0.clone().requires_grad_()
    by_name = {"w": w, "b": b}
    tgroups = [dict({k: v for k, v in g.items() if k != "params"}, params=[by_name[p] for p in g["params"]])
               for g in groups]
    o = {"RMSprop": torch.optim.RMSprop, "Adagrad": torch.optim.Adagrad}[kind](tgroups, **defaults)
    trajectory = []
    for g in GRADS:
        w.grad = g["w"].clone()
        b.grad = g["b"].clone()
        o.step()
        trajectory.append({"w": flat(w), "b": flat(b)})
    return {"name": name, "type": kind, "defaults": defaults, "groups": groups, "w0": {"shape": [5, 7], "data": flat(W0)},
            "b0": {"shape": [3], "data": flat(B0)}, "grads": [{"w": flat(g["w"]), "b": flat(g["b"])} for g in GRADS],
            "trajectory": trajectory}


WB = [{"params": ["w", "b"]}]
OPTIMIZERS = [
    ("rmsprop", "RMSprop", {"lr": 0.01}, WB),
    ("rmsprop_momentum", "RMSprop", {"lr": 0.01, "momentum": 0.9}, WB),
    ("rmsprop_centered", "RMSprop", {"lr": 0.01, "centered": True}, WB),
    ("rmsprop_centered_momentum", "RMSprop", {"lr": 0.005, "momentum": 0.8, "centered": True}, WB),
    ("rmsprop_wd_alpha_eps", "RMSprop", {"lr": 0.02, "alpha": 0.9, "eps": 1e-3, "weight_decay": 0.1}, WB),
    ("rmsprop_wd_momentum_maximize", "RMSprop", {"lr": 0.01, "momentum": 0.5, "weight_decay": 0.05, "maximize": True},
     WB),
    ("rmsprop_centered_maximize_wd", "RMSprop", {"lr": 0.01, "centered": True, "maximize": True, "weight_decay": 0.2},
     WB),
    ("rmsprop_two_groups", "RMSprop", {"lr": 0.01},
     [{"params": ["w"], "momentum": 0.9, "centered": True}, {"params": ["b"], "lr": 0.03, "alpha": 0.5}]),
    ("adagrad", "Adagrad", {"lr": 0.1}, WB),
    ("adagrad_lr_decay", "Adagrad", {"lr": 0.1, "lr_decay": 0.05}, WB),
    ("adagrad_wd", "Adagrad", {"lr": 0.1, "weight_decay": 0.1}, WB),
    ("adagrad_initial_accumulator", "Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-3}, WB),
    ("adagrad_maximize_all", "Adagrad",
     {"lr": 0.05, "lr_decay": 0.01, "weight_decay": 0.02, "initial_accumulator_value": 0.1, "maximize": True}, WB),
    ("adagrad_two_groups", "Adagrad", {"lr": 0.1},
     [{"params": ["w"], "lr_decay": 0.1}, {"params": ["b"], "lr": 0.2, "eps": 1e-2}]),
    # torch 1.13 fills "sum" from the constructor's initial_accumulator_value even when a group
    # overrides it (Mantissa uses the group's: tests/test_optim_extra.cpp checks that apart).
    ("adagrad_two_groups_initial", "Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.3},
     [{"params": ["w"]}, {"params": ["b"], "lr": 0.2}]),
]
optimizers = [run_optimizer(*c) for c in OPTIMIZERS]

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_new_optim.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "metrics": [m if m == m else "nan" for m in metrics], "lrs": ref,
               "optimizers": optimizers}, f,
              separators=(",", ":"))
    f.write("\n")
print("wrote", out)
