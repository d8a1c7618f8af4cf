#!/usr/bin/python3
"""Times the training step of bench/bench_resnet_step.cpp in PyTorch on the CPU: ResNet-20
(tools/cifar_resnet_torch.py) at batch 128, forward + cross-entropy + backward + Nesterov
SGD with weight decay on conv/linear weights only, in fp32 and under CPU bf16 autocast.
Prints the median step time (real and CPU) and images/s of each.

  OMP_NUM_THREADS=2 /usr/bin/python3 tools/bench_resnet_torch.py [--threads 2] [--steps 10]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from cifar_resnet_torch import CifarResNet

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(7)

for mode in ("fp32", "bf16"):
    net = CifarResNet(20)
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=0.1, momentum=0.9, nesterov=True)
    x = torch.randn(128, 3, 32, 32)
    y = torch.randint(0, 10, (128,))
    times, cpu_times = [], []
    for step in range(args.steps + 2):  # two warm-up steps
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if step >= 2:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    t, c = statistics.median(times), statistics.median(cpu_times)
    # CPU time is the steadier number on a shared machine (with 1 thread it is the work done).
    print("torch %s %s: %.1f ms/step real, %.1f ms CPU, %.0f images/s (median of %d, %d threads)" %
          (torch.__version__, mode, t * 1e3, c * 1e3, 128 / t, len(times), args.threads))
