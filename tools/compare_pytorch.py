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
On a CPU with AVX-512, PyTorch's OpenBLAS runs its SkylakeX kernels (OPENBLAS_CORETYPE, set for the
workers whatever the environment says; --openblas-core NAME overrides); the header names the core.

--scaling (d_model 128/256 x context 128/256) or --scaling-full (128/256/512 x 128/256/512)
instead times the GPT step as it grows: 4 layers, heads = d_model / 32, batch 4096 / context,
vocabulary 96, AdamW and clipping as above, fp32 and bf16 autocast. PyTorch runs tools/torch_gpt.py
(attention as matmul + masked_fill + softmax + matmul); Mantissa runs nn::GPT (fused attention)
and the same user-written model (bench/bench_gpt_step.cpp --scaling). Each step runs in its own
process, so peak RSS (ru_maxrss) is that step's. MFU = model FLOPs per step / step time / the
2048^3 GEMM rate of the dtype measured by Mantissa (oneDNN) in the same round; model FLOPs =
6 * tokens * (12 * layers * d^2 + vocab * d) + 12 * layers * context * d * tokens (attention).
--head-dim N makes the heads N wide (heads = d_model / N: the same FLOPs, fewer and wider heads
than the 32 the kernels were tuned on) and --sizes 512x256 ... picks sizes. A second table times a
LLaMA-style model that no kernel was tuned for, written from primitives in both frameworks
(tools/torch_gpt.py Llama, bench_gpt_step's UserLlama: RMSNorm as x * rsqrt(mean(x^2) + eps) * w,
rotary embeddings by narrow + neg + cat, attention as above, a SwiGLU MLP of width 8d/3 rounded up
to 32, no biases, an untied head); its FLOPs count 4 d^2 + 3 d * width per layer and token.
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


SCALE_VOCAB, SCALE_LAYERS, SCALE_TOKENS = 96, 4, 4096


def scale_sizes(args):
    if args.sizes:
        return [tuple(int(v) for v in s.split("x")) for s in args.sizes]
    sizes = [128, 256, 512] if args.scaling_full else [128, 256]
    return [(d, t) for d in sizes for t in sizes]


def llama_hidden(d):
    return (8 * d // 3 + 31) // 32 * 32


def scale_flops(d, t, model="gpt"):
    tokens = SCALE_TOKENS // t * t  # the batch is SCALE_TOKENS // t sequences
    per_layer = 12 * d * d if model == "gpt" else 4 * d * d + 3 * d * llama_hidden(d)
    return 6 * tokens * (SCALE_LAYERS * per_layer + SCALE_VOCAB * d) + 12 * SCALE_LAYERS * t * d * tokens


def torch_scale_worker(args):
    """One scaled GPT (or LLaMA-style) step in PyTorch: prints {"ms": median step time}."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(7)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_gpt import GPT, Llama
    d, t, prec = args.torch_scale
    d, t = int(d), int(t)
    n = SCALE_TOKENS // t
    net = (GPT if args.torch_model == "gpt" else Llama)(SCALE_VOCAB, t, SCALE_LAYERS, max(1, d // args.head_dim), d)
    decay = [p for p in net.parameters() if p.dim() >= 2]
    rest = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    x, y = torch.randint(0, SCALE_VOCAB, (n, t)), torch.randint(0, SCALE_VOCAB, (n, t))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            logits = net(x)
        loss = F.cross_entropy(logits.float().reshape(-1, SCALE_VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss.item()
    for _ in range(2):
        step()
    times, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < args.min_time or len(times) < 3:
        t1 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t1) * 1e3)
    print(json.dumps({"ms": statistics.median(times)}))


def run_measured(cmd, env):
    """Runs cmd; returns (stdout, peak RSS of that process in MiB)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return out, usage.ru_maxrss / 1024.0


def mantissa_bench_json(args, bench_filter, env):
    bench = os.path.join(os.path.dirname(args.bench), "bench_gpt_step")
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        # --sizes: exactly those sizes (any d_model x context); else the grid holds every --scaling one.
        sizes = ["--sizes", ",".join(args.sizes)] if args.sizes else ["--scaling-full"]
        _, rss = run_measured([bench, *sizes, "--head-dim", str(args.head_dim),
                               f"--benchmark_filter={bench_filter}",
                               f"--benchmark_min_time={args.min_time}", f"--benchmark_out={f.name}",
                               "--benchmark_out_format=json"], env)
        doc = json.load(open(f.name))
    return [b for b in doc["benchmarks"] if b.get("run_type", "iteration") == "iteration"], rss


def run_scaling_round(args):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = {}
    rows, _ = mantissa_bench_json(args, "^gemm_", env)
    for b in rows:
        out[b["name"].split("/")[0]] = b["FLOPS"]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    for d, t in scale_sizes(args):
        for prec in ("fp32", "bf16"):
            for model in ("gpt", "llama"):
                cmd = [sys.executable, __file__, "--torch-scale", str(d), str(t), prec, "--torch-model", model,
                       "--threads", str(args.threads), "--min-time", str(args.min_time), "--head-dim",
                       str(args.head_dim)]
                text, rss = run_measured(cmd, env)
                out[f"torch_{model}_{prec}/d{d}/T{t}"] = (json.loads(text)["ms"], rss)
            for impl in ("fused", "user", "llama"):
                name = f"scale_{impl}_{prec}/d{d}/T{t}"
                rows, rss = mantissa_bench_json(args, f"^{name}/", env)
                out[name] = (rows[0]["real_time"] * scale[rows[0]["time_unit"]], rss)
    return out


def scaling_main(args):
    import torch
    rounds = []
    for r in range(args.rounds):
        rounds.append(run_scaling_round(args))
        print(f"round {r + 1}/{args.rounds}: {rounds[-1]}", file=sys.stderr)
    med = {k: statistics.median(rd[k][0] if isinstance(rd[k], tuple) else rd[k] for rd in rounds) for k in rounds[0]}
    rss = {k: max(rd[k][1] for rd in rounds) for k in rounds[0] if isinstance(rounds[0][k], tuple)}
    print(f"# {time.strftime('%Y-%m-%d')}, {cpu_name()}, {args.threads} threads, load {os.getloadavg()[0]:.1f}, "
          f"medians of {args.rounds} rounds; PyTorch {torch.__version__} (OpenBLAS core "
          f"{os.environ.get('OPENBLAS_CORETYPE', 'detected')}); 4 layers, heads = d / {args.head_dim}, "
          f"{SCALE_TOKENS} tokens a step; GEMM 2048^3: fp32 {med['gemm_fp32'] / 1e9:.0f}, "
          f"bf16 {med['gemm_bf16'] / 1e9:.0f} GFLOP/s")
    scale_table(args, med, rss, "gpt", [("nn::GPT", "fused"), ("user GPT", "user")])
    print("\nLLaMA-style model from primitives (RMSNorm, rotary embeddings, SwiGLU), the same sizes:")
    scale_table(args, med, rss, "llama", [("Mantissa", "llama")])


def scale_table(args, med, rss, model, impls):
    """PyTorch's step of `model` next to Mantissa's `impls` ((column name, benchmark name) pairs)
    at each size and precision: times and ratios, then MFU, then peak RSS."""
    names = [name for name, _ in impls]
    cols = ["prec", "d_model", "context", "PyTorch"] + [c for name in names for c in (name, "ratio")]
    cols += ["MFU PyTorch"] + [f"MFU {name}" for name in names] + ["RSS PyTorch"] + [f"RSS {name}" for name in names]
    print("| " + " | ".join(cols) + " |")
    print("| --- " * len(cols) + "|")
    for prec in ("fp32", "bf16"):
        for d, t in scale_sizes(args):
            key = f"d{d}/T{t}"
            keys = [f"torch_{model}_{prec}/{key}"] + [f"scale_{bench}_{prec}/{key}" for _, bench in impls]
            ms = [med[k] for k in keys]
            cells = [prec, str(d), str(t), f"{ms[0]:.1f} ms"] + [c for m in ms[1:] for c in (f"{m:.1f} ms",
                                                                                            f"{m / ms[0]:.2f}x")]
            cells += [f"{scale_flops(d, t, model) / (m * 1e-3) / med[f'gemm_{prec}']:.0%}" for m in ms]
            cells += [f"{rss[k]:.0f} MiB" for k in keys]
            print("| " + " | ".join(cells) + " |")


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
    p.add_argument("--scaling", action="store_true", help="the GPT step at d_model x context 128/256")
    p.add_argument("--scaling-full", action="store_true", help="the GPT step at d_model x context 128/256/512")
    p.add_argument("--head-dim", type=int, default=32, help="with --scaling: each attention head's width "
                   "(heads = d_model / head_dim; 32 is the width the kernels were tuned on)")
    p.add_argument("--sizes", nargs="+", metavar="DxT", help="with --scaling: only these d_model x context "
                   "sizes (e.g. 512x256, or sizes off the grid: 320x200 with --head-dim 40)")
    p.add_argument("--openblas-core", default="auto",
                   help="OPENBLAS_CORETYPE for PyTorch (auto: SkylakeX on AVX-512 CPUs, else the environment's)")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--torch-scale", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--torch-model", default="gpt", choices=["gpt", "llama"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    if args.torch_scale:
        return torch_scale_worker(args)
    if not args.bench:
        p.error("--bench is required")
    openblas_core(args.openblas_core)  # before the workers start
    if args.scaling or args.scaling_full:
        return scaling_main(args)

    runs = {"torch": [], "mantissa": []}
    for r in range(args.rounds):
        runs["torch"].append(run_torch(args))
        runs["mantissa"].append(run_mantissa(args))
        print(f"round {r + 1}/{args.rounds}: torch {runs['torch'][-1]}", file=sys.stderr)
        print(f"round {r + 1}/{args.rounds}: mantissa {runs['mantissa'][-1]}", file=sys.stderr)
    med = {k: {n: statistics.median(run[n] for run in v) for n in v[0]} for k, v in runs.items()}

    import torch
    print(f"# {time.strftime('%Y-%m-%d')}, {cpu_name()}, {args.threads} threads, medians of {args.rounds} "
          f"alternating rounds; PyTorch {torch.__version__} (OpenBLAS core "
          f"{os.environ.get('OPENBLAS_CORETYPE', 'detected')}); ratio = Mantissa / PyTorch")
    print("| model (step) | PyTorch fp32 | Mantissa fp32 | ratio | PyTorch bf16 autocast | "
          "Mantissa bf16 autocast | ratio | Mantissa fp16 autocast | Mantissa bf16 / fp32 speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in args.models:
        t, o = med["torch"], med["mantissa"]
        print(f"| {m} | {t[m + '_fp32']:.2f} ms | {o[m + '_fp32']:.2f} ms | {o[m + '_fp32'] / t[m + '_fp32']:.2f}x "
              f"| {t[m + '_bf16']:.2f} ms | {o[m + '_bf16']:.2f} ms | {o[m + '_bf16'] / t[m + '_bf16']:.2f}x "
              f"| {o[m + '_fp16']:.2f} ms | {o[m + '_fp32'] / o[m + '_bf16']:.2f}x |")


def openblas_core(choice):
    """PyTorch's BLAS here is Debian's OpenBLAS, whose run-time detection takes an AVX-512 Zen for
    an older core and runs its AVX2 kernels (and this machine's environment may name Haswell):
    "auto" sets the SkylakeX (AVX-512) kernels on a CPU with AVX-512F, the fair yardstick, and
    keeps the environment's choice elsewhere; any other value is set as given (the workers inherit
    the environment; the tables' headers name the core)."""
    if choice != "auto":
        os.environ["OPENBLAS_CORETYPE"] = choice
    else:
        try:
            flags = next((line for line in open("/proc/cpuinfo") if line.startswith("flags")), "").split()
        except OSError:
            flags = []
        if "avx512f" in flags:
            os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"


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
