"""The GPT of nn/transformer.h written in PyTorch 1.13, with the same parameter names,
shapes, initialization scheme and forward: token + learned position embeddings,
pre-LayerNorm blocks (fused q/k/v projection, causal attention, 4x tanh-GELU MLP),
a final LayerNorm and a head tied to the token embedding. Used by
tools/gen_reference_gpt.py (test fixture) and tools/train_gpt_torch.py (evidence). Llama, the
LLaMA-style model of bench/bench_gpt_step.cpp written from the same primitives, is
tools/compare_pytorch.py --scaling's second model.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v, causal, dropout_p=0.0, training=False):
    """softmax(q k^T / sqrt(E) + causal mask) v; 1.13 has no fused op."""
    L, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    # Softmax statistics in fp32 under bf16 autocast (as Mantissa's op), else in the input's dtype.
    p = torch.softmax(s.float(), -1).to(q.dtype) if s.dtype in (torch.float16, torch.bfloat16) else torch.softmax(s, -1)
    if dropout_p > 0 and training:
        p = F.dropout(p, dropout_p)
    return p @ v


class MultiheadAttention(nn.Module):
    def __init__(self, d, heads, bias=True, dropout=0.0, causal=True):
        super().__init__()
        self.d, self.heads, self.dropout, self.causal = d, heads, dropout, causal
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d)) if bias else None
        self.out_proj = nn.Linear(d, d, bias=bias)

    def forward(self, x):
        N, T, D = x.shape
        qkv = F.linear(x, self.in_proj_weight, self.in_proj_bias).reshape(N, T, 3, self.heads, D // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = attention(q, k, v, self.causal, self.dropout, self.training)
        return self.out_proj(y.transpose(1, 2).reshape(N, T, D))


class Block(nn.Module):
    def __init__(self, d, heads, dropout=0.0):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = MultiheadAttention(d, heads, dropout=dropout)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln_1(x)))
        return x + self.drop(self.mlp_proj(F.gelu(self.mlp_fc(self.ln_2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, vocab_size, context, n_layer, n_head, d_model, dropout=0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.n_layer = n_layer
        self.reset_parameters()

    def reset_parameters(self):
        std, proj_std = 0.02, 0.02 / math.sqrt(2.0 * max(self.n_layer, 1))
        nn.init.normal_(self.tok_emb.weight, 0, std)
        nn.init.normal_(self.pos_emb.weight, 0, std)
        for b in self.blocks:
            nn.init.normal_(b.attn.in_proj_weight, 0, std)
            nn.init.normal_(b.attn.out_proj.weight, 0, proj_std)
            nn.init.normal_(b.mlp_fc.weight, 0, std)
            nn.init.normal_(b.mlp_proj.weight, 0, proj_std)
            for t in (b.attn.in_proj_bias, b.attn.out_proj.bias, b.mlp_fc.bias, b.mlp_proj.bias):
                nn.init.zeros_(t)

    def forward(self, tokens):
        T = tokens.shape[1]
        h = self.drop(self.tok_emb(tokens) + self.pos_emb(torch.arange(T, device=tokens.device)))
        for b in self.blocks:
            h = b(h)
        return F.linear(self.ln_f(h), self.tok_emb.weight)


def rms_norm_primitives(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w


def rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


class LlamaBlock(nn.Module):
    """bench/bench_gpt_step.cpp's LlamaBlock: the same primitives in the same order."""

    def __init__(self, d, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm_1, self.norm_2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.w1, self.w3 = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x, mask, cos, sin):
        N, T, D = x.shape
        qkv = self.qkv(rms_norm_primitives(x, self.norm_1)).reshape(N, T, 3, self.heads, D // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        s = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(D // self.heads))
        p = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
        h = x + self.proj((p @ v).transpose(1, 2).reshape(N, T, D))
        n = rms_norm_primitives(h, self.norm_2)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Llama(nn.Module):
    """bench/bench_gpt_step.cpp's UserLlama: a LLaMA-style model written from primitives."""

    def __init__(self, vocab_size, context, n_layer, n_head, d_model):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        hidden = (8 * d_model // 3 + 31) // 32 * 32
        self.blocks = nn.ModuleList([LlamaBlock(d_model, n_head, hidden) for _ in range(n_layer)])
        self.norm_f = nn.Parameter(torch.ones(d_model))
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).triu(1))
        e = d_model // n_head
        inv_freq = torch.full((e // 2,), 10000.0) ** (torch.arange(0, e, 2).float() * (-1.0 / e))
        angles = torch.arange(context).float().reshape(context, 1) * inv_freq
        self.register_buffer("cos", torch.cat((angles, angles), -1).cos())
        self.register_buffer("sin", torch.cat((angles, angles), -1).sin())
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0, 0.02)

    def forward(self, tokens):
        h = self.tok_emb(tokens)
        for b in self.blocks:
            h = b(h, self.mask, self.cos, self.sin)
        return self.head(rms_norm_primitives(h, self.norm_f))
