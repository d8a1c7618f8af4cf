# The PyTorch side of bench/patterns/pattern_main.h: the thread count from OMP_NUM_THREADS, each
# case's best time (5 rounds of 3 calls after a warm-up call), AMP=1 for bf16 autocast, argv[1]
# keeps the cases whose name contains it. A case PyTorch cannot run prints ERR and its reason.
import contextlib
import os
import sys
import time

import torch

torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
torch.manual_seed(0)


def leaf(*shape):
    return torch.randn(*shape).requires_grad_()


def best_us(f, reps):
    f()
    best = 1e30
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        best = min(best, (time.perf_counter() - t) / reps * 1e6)
    return best


def run_patterns(cases):
    filt = sys.argv[1] if len(sys.argv) > 1 else ""
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if os.environ.get("AMP") else contextlib.nullcontext()
    with amp:
        for name, f in cases:
            if filt not in name:
                continue
            try:
                print("%-20s %9.1f us" % (name, best_us(f, 3)))
            except Exception as e:  # a pattern this PyTorch version refuses
                print("%-20s %9.1f us  ERR %s" % (name, 0.0, str(e)[:60]))
