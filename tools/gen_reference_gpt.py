#!/usr/bin/python3
"""Writes tests/fixtures/reference_gpt.json: a 2-layer GPT (tools/torch_gpt.py, the same
architecture and parameter names as mt::nn::GPT) with random parameters, its logits, the
mean cross-entropy loss on fixed targets, and the gradient of every parameter, read by
tests/test_transformer.cpp.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_gpt.py
Everything is float64; parameters are rounded to 4 decimals so the JSON text is exact.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402

torch.manual_seed(2024)
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


def enc(t):
    t = t.detach()
    if t.dtype == torch.int64:
        return {"shape": list(t.shape), "data": [int(v) for v in t.reshape(-1).tolist()]}
    return {"shape": list(t.shape), "data": [float("%.12g" % v) for v in t.reshape(-1).tolist()]}


config = dict(vocab_size=11, context=8, n_layer=2, n_head=2, d_model=8)
model = GPT(**config)
with torch.no_grad():
    for name, p in model.named_parameters():
        # Random values of a useful size everywhere (LayerNorm scales around 1).
        base = 1.0 if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight" else 0.0
        p.copy_(torch.round((base + 0.3 * torch.randn(p.shape)) * 1e4) / 1e4)
tokens = torch.randint(0, config["vocab_size"], (2, 7))
targets = torch.randint(0, config["vocab_size"], (2, 7))
logits = model(tokens)
loss = F.cross_entropy(logits.reshape(-1, config["vocab_size"]), targets.reshape(-1))
loss.backward()
ref = dict(config=config, tokens=enc(tokens), targets=enc(targets), logits=enc(logits), loss=float("%.15g" % loss),
           params={n: enc(p) for n, p in model.named_parameters()},
           grads={n: enc(p.grad) for n, p in model.named_parameters()})
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_gpt.json")
with open(out, "w") as f:
    json.dump(ref, f, separators=(",", ":"))
    f.write("\n")
print("wrote", os.path.normpath(out))
