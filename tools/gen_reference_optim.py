#!/usr/bin/python3
"""Generates tests/fixtures/reference_optim.json: PyTorch reference trajectories for Mantissa's
optimizers and learning-rate schedules (tests/test_optim.cpp replays them).

Regenerate (from the repository root) with Debian's python3-torch, installed for /usr/bin/python3:

    /usr/bin/python3 tools/gen_reference_optim.py       # writes tests/fixtures/reference_optim.json
    /usr/bin/python3 tools/gen_reference_optim.py -o out.json

The output is committed; the tests only read it. torch 1.13 produced the committed file.

Format:
  "problem": a tiny float32 linear regression, loss = mean((x @ w.T + b - y)^2):
      {"x": {"shape", "data"}, "y": ..., "w0": ..., "b0": ...}   (data flat, row-major)
  "optimizers": [{"name", "type": "SGD"|"Adam"|"AdamW",
                  "defaults": {constructor keyword arguments; "betas": [b1, b2]},
                  "groups": [{"params": ["w"|"b", ...], overrides...}],
                  "steps": N,
                  "trajectory": [{"w": [...], "b": [...]} after each step]}]
      Each step is zero_grad(); loss.backward(); step().
  "schedulers": [{"name", "type": "StepLR"|"WarmupCosineLR"|"OneCycleLR", "args": {...},
                  "optimizer": {"type", "defaults", "group_lrs": [lr per group]},
                  "lrs": [[lr per group] after construction, then after each step()],
                  "momentum": [[momentum or beta1 per group] ...] (OneCycleLR with cycle_momentum)}]
      WarmupCosineLR has no torch class: it is LambdaLR with the formula documented in
      optim/warmup_cosine_lr.h.
"""
import argparse
import json
import math
import os

import torch

gen = torch.Generator().manual_seed(1234)


def tensor_json(t):
    return {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()}


# ---------------------------------------------------------------- the problem
X = torch.randn(8, 3, generator=gen)
W_TRUE = torch.tensor([[1.5, -2.0, 0.5], [-0.7, 0.3, 2.2]])
Y = X @ W_TRUE.T + torch.tensor([0.3, -1.1]) + 0.1 * torch.randn(8, 2, generator=gen)
W0 = 0.5 * torch.randn(2, 3, generator=gen)
B0 = torch.zeros(2)


def make_optimizer(kind, params, defaults):
    kwargs = dict(defaults)
    if "betas" in kwargs:
        kwargs["betas"] = tuple(kwargs["betas"])
    return {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW}[kind](params, **kwargs)


def run_optimizer(name, kind, defaults, groups, steps=10):
    w = W0.clone().requires_grad_()
    b = B0.clone().requires_grad_()
    by_name = {"w": w, "b": b}
    torch_groups = []
    for g in groups:
        tg = {k: v for k, v in g.items() if k != "params"}
        if "betas" in tg:
            tg["betas"] = tuple(tg["betas"])
        tg["params"] = [by_name[p] for p in g["params"]]
        torch_groups.append(tg)
    opt = make_optimizer(kind, torch_groups, defaults)
    trajectory = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((X @ w.T + b - Y) ** 2).mean()
        loss.backward()
        opt.step()
        trajectory.append({"w": w.detach().reshape(-1).tolist(), "b": b.detach().tolist()})
    return {"name": name, "type": kind, "defaults": defaults, "groups": groups, "steps": steps,
            "trajectory": trajectory}


OPTIMIZERS = [
    ("sgd_plain", "SGD", {"lr": 0.1}, [{"params": ["w", "b"]}]),
    ("sgd_momentum", "SGD", {"lr": 0.05, "momentum": 0.9}, [{"params": ["w", "b"]}]),
    ("sgd_nesterov_wd", "SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
     [{"params": ["w", "b"]}]),
    ("sgd_dampening", "SGD", {"lr": 0.05, "momentum": 0.8, "dampening": 0.3}, [{"params": ["w", "b"]}]),
    ("sgd_maximize", "SGD", {"lr": 0.01, "momentum": 0.5, "maximize": True}, [{"params": ["w", "b"]}]),
    ("adam", "Adam", {"lr": 0.05}, [{"params": ["w", "b"]}]),
    ("adam_wd", "Adam", {"lr": 0.05, "weight_decay": 0.1}, [{"params": ["w", "b"]}]),
    ("adam_amsgrad_betas", "Adam", {"lr": 0.05, "betas": [0.8, 0.99], "eps": 1e-6, "amsgrad": True},
     [{"params": ["w", "b"]}]),
    ("adamw", "AdamW", {"lr": 0.05, "weight_decay": 0.1}, [{"params": ["w", "b"]}]),
    ("adamw_default_wd", "AdamW", {"lr": 0.05}, [{"params": ["w", "b"]}]),
    ("sgd_two_groups", "SGD", {"lr": 0.05, "momentum": 0.9},
     [{"params": ["w"], "lr": 0.1, "weight_decay": 0.01}, {"params": ["b"]}]),
    ("adamw_two_groups", "AdamW", {"lr": 0.02},
     [{"params": ["w"], "weight_decay": 0.05}, {"params": ["b"], "lr": 0.005, "weight_decay": 0.0}]),
]


# ---------------------------------------------------------------- schedulers
def warmup_cosine_lambda(base, warmup, total, min_lr):
    def f(t):
        if t < warmup:
            return t / warmup
        span = total - warmup
        p = min(1.0, (t - warmup) / span) if span > 0 else 1.0
        return (min_lr + (base - min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))) / base
    return f


def run_scheduler(name, kind, args, opt_kind, opt_defaults, group_lrs, steps):
    params = [torch.zeros(1, requires_grad=True) for _ in group_lrs]
    opt = make_optimizer(opt_kind, [{"params": [p], "lr": lr} for p, lr in zip(params, group_lrs)], opt_defaults)
    if kind == "StepLR":
        sched = torch.optim.lr_scheduler.StepLR(opt, **args)
    elif kind == "WarmupCosineLR":
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, [warmup_cosine_lambda(lr, args["warmup_steps"], args["total_steps"], args["min_lr"])
                  for lr in group_lrs])
    elif kind == "OneCycleLR":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, **args)
    else:
        raise ValueError(kind)

    def momenta():
        return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]

    lrs, moms = [sched.get_last_lr()], [momenta()]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        moms.append(momenta())
    out = {"name": name, "type": kind, "args": args,
           "optimizer": {"type": opt_kind, "defaults": opt_defaults, "group_lrs": group_lrs}, "lrs": lrs}
    if kind == "OneCycleLR" and args.get("cycle_momentum", True):
        out["momentum"] = moms
    return out


SCHEDULERS = [
    ("steplr", "StepLR", {"step_size": 3, "gamma": 0.5}, "SGD", {"lr": 0.1}, [0.1, 0.02], 12),
    ("warmup_cosine", "WarmupCosineLR", {"warmup_steps": 3, "total_steps": 10, "min_lr": 0.001}, "SGD",
     {"lr": 0.1}, [0.1, 0.05], 13),
    ("cosine_no_warmup", "WarmupCosineLR", {"warmup_steps": 0, "total_steps": 7, "min_lr": 0.0}, "AdamW",
     {"lr": 0.01}, [0.01], 9),
    ("onecycle_sgd", "OneCycleLR", {"max_lr": [0.1, 0.05], "total_steps": 20}, "SGD",
     {"lr": 0.1, "momentum": 0.9}, [0.1, 0.1], 20),
    ("onecycle_adam_linear_three_phase", "OneCycleLR",
     {"max_lr": 0.01, "total_steps": 15, "anneal_strategy": "linear", "three_phase": True, "pct_start": 0.4,
      "div_factor": 10.0, "final_div_factor": 100.0, "base_momentum": 0.8, "max_momentum": 0.9}, "Adam",
     {"lr": 0.01}, [0.01], 15),
    ("onecycle_no_momentum", "OneCycleLR", {"max_lr": 0.2, "total_steps": 10, "cycle_momentum": False}, "SGD",
     {"lr": 0.1}, [0.1], 10),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("-o", "--output", default=os.path.join(root, "tests", "fixtures", "reference_optim.json"))
    a = ap.parse_args()
    doc = {
        "meta": {"torch": torch.__version__, "generator": "tools/gen_reference_optim.py"},
        "problem": {"x": tensor_json(X), "y": tensor_json(Y), "w0": tensor_json(W0), "b0": tensor_json(B0)},
        "optimizers": [run_optimizer(*c) for c in OPTIMIZERS],
        "schedulers": [run_scheduler(*c) for c in SCHEDULERS],
    }
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {a.output}: {len(doc['optimizers'])} optimizer and {len(doc['schedulers'])} scheduler cases")


if __name__ == "__main__":
    main()
