#!/usr/bin/python3
"""Times the same training steps in PyTorch and in Mantissa, alternating, in one run.

Models, each one step = forward + cross-entropy + backward + optimizer step on fixed random data:
  mlp  784-256-128-10 with ReLU, batch 128, SGD (lr 0.01, momentum 0.9)   (examples/mnist/models.h)
  cnn  conv32-pool-conv64-pool-fc128-fc10 (3x3, padding 1, ReLU, 2x2 max pool), batch 64, SGD as mlp
  gpt  the transformer example's default GPT (4 layers, 4 heads, d_model 128, context 128, batch 16,
       vocabulary 96; tools/torch_gpt.py in PyTorch), AdamW (lr 1e-3, betas 0.9/0.99, weight decay 0.1
       on matrices), gradient clipping at norm 1    (bench/bench_gpt_step.cpp in Mantissa)
  resnet20  the CIFAR example's ResNet-20 at batch 128 (tools/cifar_resnet_torch.py in PyTorch), SGD
       (lr 0.1, Nesterov momentum 0.9, weight decay 5e-4 on conv/linear weights)
                                                    (bench/bench_resnet_step.cpp in Mantissa)
in fp32 and under bf16 autocast (Mantissa also fp16 autocast with a GradScaler; PyTorch 1.13
has no fp16 autocast on the CPU). Rounds alternate PyTorch then Mantissa, each in a fresh
process with the same thread count; the table shows medians over rounds and the ratio
Mantissa / PyTorch (below 1: Mantissa is faster).

  tools/compare-pytorch.sh [--threads 2] [--rounds 3]       (builds the bench programs first)
  /usr/bin/python3 tools/compare_pytorch.py --bench build/bench/bench_train_step
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = {"mlp": 128, "cnn": 64, "gpt": 16, "resnet20": 128}
# The Mantissa benchmark program of each model (next to --bench, which is bench_train_step).
PROGRAMS = {"mlp": "bench_train_step", "cnn": "bench_train_step", "gpt": "bench_gpt_step",
            "resnet20": "bench_resnet_step"}


def torch_worker(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(7)

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = x.flatten(1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)
            self.fc1, self.fc2 = nn.Linear(64 * 7 * 7, 128), nn.Linear(128, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            return self.fc2(F.relu(self.fc1(x.flatten(1))))

    def gpt_step(prec):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from torch_gpt import GPT
        vocab, context = 96, 128
        net = GPT(vocab, context, 4, 4, 128)
        decay = [p for p in net.parameters() if p.dim() >= 2]
        rest = [p for p in net.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.99))
        x, y = torch.randint(0, vocab, (MODELS["gpt"], context)), torch.randint(0, vocab, (MODELS["gpt"], context))

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
                logits = net(x)
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            return loss.item()
        return step

    def resnet_step(prec):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from cifar_resnet_torch import CifarResNet
        net = CifarResNet(20)
        decay = [p for p in net.parameters() if p.dim() >= 2]
        rest = [p for p in net.parameters() if p.dim() < 2]
        opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}],
                              lr=0.1, momentum=0.9, nesterov=True)
        x, y = torch.randn(MODELS["resnet20"], 3, 32, 32), torch.randint(0, 10, (MODELS["resnet20"],))

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
                loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()
        return step

    out = {}
    for model in args.models:
        for prec in ("fp32", "bf16"):
            if model == "gpt":
                step = gpt_step(prec)
            elif model == "resnet20":
                step = resnet_step(prec)
            else:
                net = (Mlp if model == "mlp" else Cnn)()
                opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
                batch = MODELS[model]
                x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

                def step(net=net, opt=opt, x=x, y=y, prec=prec):
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
                        loss = F.cross_entropy(net(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    return loss.item()

            for _ in range(5):
                step()
            # Steps in chunks of about min_time seconds; the median chunk's mean step.
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < args.min_time / 3:
                step()
                n += 1
            chunks = []
            for _ in range(3):
                t = time.perf_counter()
                for _ in range(n):
                    step()
                chunks.append((time.perf_counter() - t) / n * 1e3)
            out[f"{model}_{prec}"] = statistics.median(chunks)
    print(json.dumps(out))


def run_torch(args):
    cmd = [sys.executable, __file__, "--torch-worker", "--threads", str(args.threads), "--min-time",
           str(args.min_time), "--models", *args.models]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)


def run_mantissa(args):
    out = {}
    for program in sorted(set(PROGRAMS[m] for m in args.models)):
        bench = os.path.join(os.path.dirname(args.bench), program)
        models = [m for m in args.models if PROGRAMS[m] == program]
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([bench, f"--benchmark_filter=^({'|'.join(models)})_(fp32|fp16|bf16)",
                            f"--benchmark_min_time={args.min_time}", "--benchmark_min_warmup_time=0.3",
                            f"--benchmark_out={f.name}", "--benchmark_out_format=json"], check=True,
                           capture_output=True, env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))
            doc = json.load(open(f.name))
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
        out.update({b["name"].split("/")[0]: b["real_time"] * scale[b["time_unit"]] for b in doc["benchmarks"]
                    if b.get("run_type", "iteration") == "iteration"})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", help="the bench_train_step binary")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-time", type=float, default=1.0, help="seconds per measurement")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    if not args.bench:
        p.error("--bench is required")

    runs = {"torch": [], "mantissa": []}
    for r in range(args.rounds):
        runs["torch"].append(run_torch(args))
        runs["mantissa"].append(run_mantissa(args))
        print(f"round {r + 1}/{args.rounds}: torch {runs['torch'][-1]}", file=sys.stderr)
        print(f"round {r + 1}/{args.rounds}: mantissa {runs['mantissa'][-1]}", file=sys.stderr)
    med = {k: {n: statistics.median(run[n] for run in v) for n in v[0]} for k, v in runs.items()}

    import torch
    print(f"# {time.strftime('%Y-%m-%d')}, {cpu_name()}, {args.threads} threads, medians of {args.rounds} "
          f"alternating rounds; PyTorch {torch.__version__}; ratio = Mantissa / PyTorch")
    print("| model (step) | PyTorch fp32 | Mantissa fp32 | ratio | PyTorch bf16 autocast | "
          "Mantissa bf16 autocast | ratio | Mantissa fp16 autocast | Mantissa bf16 / fp32 speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in args.models:
        t, o = med["torch"], med["mantissa"]
        print(f"| {m} | {t[m + '_fp32']:.2f} ms | {o[m + '_fp32']:.2f} ms | {o[m + '_fp32'] / t[m + '_fp32']:.2f}x "
              f"| {t[m + '_bf16']:.2f} ms | {o[m + '_bf16']:.2f} ms | {o[m + '_bf16'] / t[m + '_bf16']:.2f}x "
              f"| {o[m + '_fp16']:.2f} ms | {o[m + '_fp32'] / o[m + '_bf16']:.2f}x |")


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
