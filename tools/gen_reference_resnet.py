#!/usr/bin/python3
"""Writes tests/fixtures/reference_resnet.json: a PyTorch CIFAR ResNet (He et al. 2016,
3 stages of basic blocks, 1x1 conv + BN projection shortcuts) with the same parameter
names as mantissa::nn::CifarResNet, filled with a deterministic pattern that
tests/test_resnet.cpp reproduces, and its outputs: parameter counts per depth, train-mode
logits, gradients, the updated running statistics and eval-mode logits.

Run with Debian's python3-torch:  /usr/bin/python3 tools/gen_reference_resnet.py
Everything is computed in float64; outputs are written with 12 significant digits.
"""
import json
import os

import torch

from cifar_resnet_torch import CifarResNet

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


def pattern(n, k):
    """n values in [-0.5, 0.5): element i of the k-th tensor (the test computes the same)."""
    return torch.tensor([((i * 37 + k * 11) % 23) / 23.0 - 0.5 for i in range(n)])


def fill(model):
    """Each state-dict tensor (num_batches_tracked excepted), in order, from pattern()."""
    k = 0
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            p = pattern(t.numel(), k).reshape(t.shape)
            if name.endswith("running_mean"):
                v = 0.1 * p
            elif name.endswith("running_var"):
                v = 1.0 + 0.5 * (p + 0.5)
            elif t.dim() >= 2:
                v = 0.3 * p
            elif name.endswith("weight"):
                v = 1.0 + 0.2 * p
            else:
                v = 0.1 * p
            t.copy_(v)
            k += 1


def enc(t):
    t = t.detach()
    return {"shape": list(t.shape), "data": [float("%.12g" % v) for v in t.reshape(-1).tolist()]}


ref = {"num_parameters": {}}
for depth in (8, 20, 32, 44, 56, 110):
    for classes in (10, 100):
        m = CifarResNet(depth, classes)
        ref["num_parameters"]["%d_%d" % (depth, classes)] = sum(p.numel() for p in m.parameters())

model = CifarResNet(8)
fill(model)
model.train()
x = (pattern(2 * 3 * 8 * 8, 100) * 2.0).reshape(2, 3, 8, 8)
gy = pattern(2 * 10, 200).reshape(2, 10)
logits = model(x)
g_conv1, g_fc = torch.autograd.grad((logits * gy).sum(), [model.conv1.weight, model.fc.weight])
ref["state_dict_order"] = [n for n in model.state_dict().keys() if not n.endswith("num_batches_tracked")]
ref["x"] = enc(x)
ref["gy"] = enc(gy)
ref["train_logits"] = enc(logits)
ref["grad_conv1_weight"] = enc(g_conv1)
ref["grad_fc_weight"] = enc(g_fc)
ref["bn1_running_mean"] = enc(model.bn1.running_mean)
ref["layer3_0_shortcut_1_running_var"] = enc(model.layer3[0].shortcut[1].running_var)
model.eval()
with torch.no_grad():
    ref["eval_logits"] = enc(model(x))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "reference_resnet.json")
with open(out, "w") as f:
    json.dump(ref, f)
print("wrote", os.path.normpath(out))
