#!/usr/bin/env python3
"""The rows of bench/bench_roofline.cpp in PyTorch: the same ops, shapes, dtypes and byte counts,
printed as "op/dtype/size/tN GB/s" lines, so tools/roofline-vs-torch.sh can put PyTorch's rate
next to Mantissa's and memcpy's for every row, measured in the same run.

    /usr/bin/python3 tools/roofline_torch.py --filter 'softmax|layer_norm' --sizes 1M --threads 1 2
"""
import argparse
import re
import time

import torch
import torch.nn.functional as F

K_ROW, K_NORM_ROW = 256, 1024  # as bench_roofline.cpp: softmax rows; reduction and norm rows


def esize(dt):
    return 4 if dt == torch.float32 else 2


def inp(shape, dt, grad=False):
    x = torch.randn(*shape).to(dt)
    return x.requires_grad_() if grad else x


def fwd_bwd(x, f, nbytes):
    """Forward and backward of f at x with a fixed upstream gradient (autograd.grad, as the bench)."""
    g = torch.randn_like(f(x.detach()))

    def run():
        y = f(x)
        torch.autograd.grad(y, x, g.to(y.dtype))
    return run, nbytes


def ops():
    """name -> make(n, dt) returning (run, bytes); the same list and order as bench_roofline.cpp."""
    v = {}
    unary = {"relu": torch.relu, "exp": torch.exp, "sigmoid": torch.sigmoid, "silu": F.silu, "tanh": torch.tanh}
    for name, op in unary.items():
        def make(n, dt, op=op):
            x = inp((n,), dt)
            return (lambda: op(x)), 2 * n * esize(dt)
        v[name] = make

    def mul(n, dt):
        a, b = inp((n,), dt), inp((n,), dt)
        return (lambda: a * b), 3 * n * esize(dt)
    v["mul"] = mul

    def add_bcast_row(n, dt):
        a, b = inp((n // K_NORM_ROW, K_NORM_ROW), dt), inp((K_NORM_ROW,), dt)
        return (lambda: a + b), 2 * n * esize(dt)
    v["add_bcast_row"] = add_bcast_row

    def add_bcast_col(n, dt):
        a, b = inp((n // K_NORM_ROW, K_NORM_ROW), dt), inp((n // K_NORM_ROW, 1), dt)
        return (lambda: a + b), 2 * n * esize(dt)
    v["add_bcast_col"] = add_bcast_col

    def cast_to_f32(n, dt):
        x = inp((n,), dt)
        to = torch.bfloat16 if dt == torch.float32 else torch.float32
        return (lambda: x.to(to)), n * (esize(dt) + esize(to))
    v["cast_to_f32"] = cast_to_f32

    def cast_fp16(n, dt):
        x = inp((n,), dt)
        return (lambda: x.to(torch.half)), n * (esize(dt) + 2)
    v["cast_fp16"] = cast_fp16

    def masked_fill_bcast(n, dt):
        t = K_ROW
        bh = max(1, n // (t * t))
        x = inp((bh, 1, t, t), dt)
        mask = torch.triu(torch.ones(t, t), 1).bool().reshape(1, 1, t, t)
        return (lambda: x.masked_fill(mask, -1e30)), 2 * bh * t * t * esize(dt)
    v["masked_fill_bcast"] = masked_fill_bcast

    for log in (False, True):
        s = "log_softmax" if log else "softmax"
        sm = torch.log_softmax if log else torch.softmax

        def last(n, dt, sm=sm):
            x = inp((n // K_ROW, K_ROW), dt)
            return (lambda: sm(x, 1)), 2 * n * esize(dt)

        def mid(n, dt, sm=sm):
            x = inp((max(1, n // (K_ROW * K_ROW)), K_ROW, K_ROW), dt)
            return (lambda: sm(x, 1)), 2 * x.numel() * esize(dt)

        def last_fb(n, dt, sm=sm):
            return fwd_bwd(inp((n // K_ROW, K_ROW), dt, True), lambda x: sm(x, 1), 5 * n * esize(dt))

        def mid_fb(n, dt, sm=sm):
            x = inp((max(1, n // (K_ROW * K_ROW)), K_ROW, K_ROW), dt, True)
            return fwd_bwd(x, lambda t: sm(t, 1), 5 * x.numel() * esize(dt))
        v[s + "_last"], v[s + "_mid"], v[s + "_last_fwdbwd"], v[s + "_mid_fwdbwd"] = last, mid, last_fb, mid_fb

    def softmax_autocast_bf16_in(n, dt):  # a bf16 score tensor into an fp32 softmax (reads bf16, writes fp32)
        x = inp((n // K_ROW, K_ROW), torch.bfloat16)
        return (lambda: torch.softmax(x, 1, dtype=torch.float32)), 6 * n
    v["softmax_autocast_bf16_in"] = softmax_autocast_bf16_in

    reds = {"sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d), "max": lambda x, d: x.amax(d),
            "var": lambda x, d: x.var(d)}
    for name, f in reds.items():
        for d in (0, 1):
            def red(n, dt, f=f, d=d):
                x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
                return (lambda: f(x, d)), n * esize(dt)
            v[f"{name}_dim{d}"] = red

    def layer_norm_fwd(n, dt):
        x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
        w, b = torch.ones(K_NORM_ROW, dtype=dt), torch.zeros(K_NORM_ROW, dtype=dt)
        return (lambda: F.layer_norm(x, (K_NORM_ROW,), w, b)), 2 * n * esize(dt)
    v["layer_norm_fwd"] = layer_norm_fwd

    def layer_norm_fwdbwd(n, dt):
        w, b = torch.ones(K_NORM_ROW, dtype=dt), torch.zeros(K_NORM_ROW, dtype=dt)
        return fwd_bwd(inp((n // K_NORM_ROW, K_NORM_ROW), dt, True),
                       lambda x: F.layer_norm(x, (K_NORM_ROW,), w, b), 5 * n * esize(dt))
    v["layer_norm_fwdbwd"] = layer_norm_fwdbwd

    def gelu_fwd(n, dt):
        x = inp((n,), dt)
        return (lambda: F.gelu(x)), 2 * n * esize(dt)
    v["gelu_fwd"] = gelu_fwd
    v["gelu_fwdbwd"] = lambda n, dt: fwd_bwd(inp((n,), dt, True), F.gelu, 5 * n * esize(dt))
    v["gelu_tanh_fwdbwd"] = lambda n, dt: fwd_bwd(inp((n,), dt, True), lambda x: F.gelu(x, approximate="tanh"),
                                                  5 * n * esize(dt))
    v["silu_fwdbwd"] = lambda n, dt: fwd_bwd(inp((n,), dt, True), F.silu, 5 * n * esize(dt))

    def dropout(n, dt):
        x = inp((n,), dt)
        return (lambda: F.dropout(x, 0.1, True)), 2 * n * esize(dt)
    v["dropout"] = dropout
    v["dropout_fwdbwd"] = lambda n, dt: fwd_bwd(inp((n,), dt, True), lambda x: F.dropout(x, 0.1, True),
                                                4 * n * esize(dt))

    def embedding_fwd(n, dt):
        w, idx = inp((4096, K_ROW), dt), torch.randint(0, 4096, (n // K_ROW,))
        return (lambda: F.embedding(idx, w)), 2 * n * esize(dt)
    v["embedding_fwd"] = embedding_fwd

    def embedding_fwdbwd(n, dt):
        idx = torch.randint(0, 4096, (n // K_ROW,))
        return fwd_bwd(inp((4096, K_ROW), dt, True), lambda w: F.embedding(idx, w), 5 * n * esize(dt))
    v["embedding_fwdbwd"] = embedding_fwdbwd

    def transpose_copy(n, dt):
        x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
        return (lambda: x.t().contiguous()), 2 * n * esize(dt)
    v["transpose_copy"] = transpose_copy

    def permute_0213_copy(n, dt):  # [B, T, H, E] -> [B, H, T, E]
        x = inp((n // (256 * 8 * 32), 256, 8, 32), dt)
        return (lambda: x.permute(0, 2, 1, 3).contiguous()), 2 * n * esize(dt)
    v["permute_0213_copy"] = permute_0213_copy

    def rotate_half(n, dt):  # rotary embeddings: cat(-x[..., 16:], x[..., :16])
        x = inp((n // 32, 32), dt)
        return (lambda: torch.cat([-x[:, 16:], x[:, :16]], 1)), 2 * n * esize(dt)
    v["rotate_half"] = rotate_half

    def sigmoid_chunk(n, dt):  # a GLU's gate: the second half of rows of 1024
        x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
        return (lambda: torch.sigmoid(x.chunk(2, 1)[1])), n * esize(dt)
    v["sigmoid_chunk"] = sigmoid_chunk

    def cast_transposed(n, dt):  # from the other dtype, transposed, to a contiguous result
        src = torch.bfloat16 if dt == torch.float32 else torch.float32
        x = inp((n // K_NORM_ROW, K_NORM_ROW), src)
        return (lambda: x.t().to(dt).contiguous()), n * (esize(dt) + esize(src))
    v["cast_transposed"] = cast_transposed

    def mul_transposed(n, dt):
        a, b = inp((n // K_NORM_ROW, K_NORM_ROW), dt), inp((K_NORM_ROW, n // K_NORM_ROW), dt)
        return (lambda: a.t() * b), 3 * n * esize(dt)
    v["mul_transposed"] = mul_transposed

    def silu_transposed(n, dt):
        x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
        return (lambda: F.silu(x.t()).contiguous()), 2 * n * esize(dt)
    v["silu_transposed"] = silu_transposed

    def masked_fill_transposed(n, dt):
        x = inp((K_NORM_ROW, n // K_NORM_ROW), dt)
        m = torch.randn(n // K_NORM_ROW, K_NORM_ROW) > 0
        return (lambda: x.t().masked_fill(m, 0.0)), 2 * n * esize(dt)
    v["masked_fill_transposed"] = masked_fill_transposed

    def clamp(n, dt):
        x = inp((n,), dt)
        return (lambda: torch.clamp(x, -1.0, 1.0)), 2 * n * esize(dt)
    v["clamp"] = clamp

    def sum_transposed_dim1(n, dt):
        x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
        return (lambda: x.t().sum(1)), n * esize(dt)
    v["sum_transposed_dim1"] = sum_transposed_dim1

    def max_transposed_dim0(n, dt):
        x = inp((n // K_NORM_ROW, K_NORM_ROW), dt)
        return (lambda: x.t().amax(0)), n * esize(dt)
    v["max_transposed_dim0"] = max_transposed_dim0

    def cat_dim1(n, dt):
        a, b = inp((n // K_NORM_ROW, K_NORM_ROW // 2), dt), inp((n // K_NORM_ROW, K_NORM_ROW // 2), dt)
        return (lambda: torch.cat([a, b], 1)), 2 * n * esize(dt)
    v["cat_dim1"] = cat_dim1
    return v


def size_value(s):
    return int(s[:-1]) << (20 if s.endswith("M") else 10)


def mean_gbps(run, nbytes, min_time):
    """Bytes over the mean time of the calls made in min_time seconds: the rate Google Benchmark
    reports for bench_roofline's rows (a best single call would flatter this side)."""
    start = time.perf_counter()  # warm for as long as measured: PyTorch's first calls of a large
    while time.perf_counter() - start < min_time:  # output ran 10-60x slower (allocation, page faults)
        run()
    calls, start = 0, time.perf_counter()
    while True:
        run()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return nbytes * calls / elapsed / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--filter", default="", help="a regular expression on op/dtype/size/tN (as --benchmark_filter)")
    p.add_argument("--sizes", nargs="+", default=["64K", "1M", "4M"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--min-time", type=float, default=0.1, help="seconds per row")
    args = p.parse_args()
    pattern = re.compile(args.filter)
    for threads in args.threads:
        torch.set_num_threads(threads)
        for size in args.sizes:
            for name, make in ops().items():
                for dt, dname in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
                    row = f"{name}/{dname}/{size}/t{threads}"
                    if not pattern.search(row):
                        continue
                    torch.manual_seed(1)
                    try:
                        run, nbytes = make(size_value(size), dt)
                        print(f"{row} {mean_gbps(run, nbytes, args.min_time):.2f}", flush=True)
                    except RuntimeError as e:  # an op PyTorch 1.13 lacks for this dtype
                        print(f"{row} unsupported ({str(e).splitlines()[0][:60]})", flush=True)


if __name__ == "__main__":
    main()
