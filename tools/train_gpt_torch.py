#!/usr/bin/python3
"""The PyTorch 1.13 twin of examples/transformer: the same character-level GPT
(tools/torch_gpt.py: architecture, parameter names, GPT-2 initialization scheme), the same
corpus and train/validation split, the same batches (window starts from the same SplitMix64
hash of (seed, step, row)), the same AdamW groups, learning-rate schedule, clipping and
validation windows. Prints the validation loss (nats per character) every --eval-every
steps, for the README's comparison with Mantissa's curve. The initial weights come from
torch's generator, so the two runs share the scheme, not the exact numbers.

  /usr/bin/python3 tools/train_gpt_torch.py --steps 300 --eval-every 50 [--amp bf16] [--threads 2]
  /usr/bin/python3 tools/train_gpt_torch.py --bench 10     # median time of one training step
  python3 tools/train_gpt_torch.py --device cuda --amp fp16 --steps 300   # on a GPU (fp16: with a GradScaler)
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402

FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_FILES = ["fortunes", "literature", "riddles", "humorists", "wisdom", "science", "work", "education", "food",
                 "love", "kids", "law"]
MASK = (1 << 64) - 1


def read_corpus(path):
    if path:
        return open(path, "rb").read().decode("utf-8")
    text = []
    for name in FORTUNE_FILES:
        for line in open(os.path.join(FORTUNE_DIR, name), "rb").read().decode("utf-8").split("\n")[:-1]:
            text.append(("" if line == "%" else line) + "\n")
    return "".join(text)


def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def windows(data, starts, context):
    idx = torch.tensor(starts)[:, None] + torch.arange(context + 1)[None, :]
    w = data[idx]
    return w[:, :-1], w[:, 1:]


def train_batch(data, batch, context, seed, step):
    n = len(data) - context
    return windows(data, [mix(mix(mix(seed) ^ step) ^ b) % n for b in range(batch)], context)


def val_batch(data, batch, context, index, count):
    n, total = len(data) - context, batch * count
    return windows(data, [(index * batch + b) * n // total for b in range(batch)], context)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", default="")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off", help="fp16: CUDA only, with loss scaling")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bench", type=int, default=0, help="time this many training steps and print the median")
    a = ap.parse_args()
    device = torch.device(a.device)
    if a.amp == "fp16" and device.type != "cuda":
        ap.error("--amp fp16 needs --device cuda (torch's CPU autocast is bf16)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    if a.bench:  # random tokens over a 96-character vocabulary, as bench/bench_gpt_step.cpp
        text = "".join(chr(32 + i) for i in range(96))
    else:
        text = read_corpus(a.text)
    vocab = sorted(set(text))
    lookup = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([lookup[c] for c in text], dtype=torch.int64)
    n_val = int(len(ids) * 0.1)
    train, val = ids[: len(ids) - n_val], ids[len(ids) - n_val:]
    V = len(vocab)

    model = GPT(V, a.context, a.layers, a.heads, a.d_model).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
    warm, total, floor = min(a.warmup, a.steps), a.steps, 0.1

    def lr_factor(t):  # Mantissa's WarmupCosineLR with min_lr = lr / 10
        if t < warm:
            return t / warm
        p = min(1.0, (t - warm) / max(total - warm, 1)) if total > warm else 1.0
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    amp = a.amp != "off"
    amp_dtype = torch.float16 if a.amp == "fp16" else torch.bfloat16
    scaler = torch.cuda.amp.GradScaler(enabled=a.amp == "fp16")

    def step_fn(step):
        if a.bench:
            x, y = torch.randint(0, V, (a.batch_size, a.context)), torch.randint(0, V, (a.batch_size, a.context))
        else:
            x, y = train_batch(train, a.batch_size, a.context, a.seed, step)
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        scaler.step(opt)
        scaler.update()
        sched.step()
        return loss.item()

    if a.bench:
        times = []
        for s in range(a.bench + 2):
            t0 = time.perf_counter()
            step_fn(s)
            times.append(time.perf_counter() - t0)
        print("torch step: median %.2f ms over %d steps (%s, %d threads)" %
              (1e3 * statistics.median(times[2:]), a.bench, a.amp, a.threads))
        return

    def evaluate():
        model.eval()
        with torch.no_grad():
            total_loss = 0.0
            for i in range(a.eval_batches):
                x, y = val_batch(val, a.batch_size, a.context, i, a.eval_batches)
                x, y = x.to(device), y.to(device)
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                    logits = model(x)
                total_loss += F.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1)).item()
        model.train()
        return total_loss / a.eval_batches

    print("text: %d train + %d validation characters, vocabulary %d" % (len(train), len(val), V))
    t0 = time.time()
    for step in range(a.steps):
        loss = step_fn(step)
        done = step + 1
        if (a.eval_every > 0 and done % a.eval_every == 0) or done == a.steps:
            print("step %d: train loss %.4f, validation loss %.4f nats/char (%.1f s)" %
                  (done, loss, evaluate(), time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
