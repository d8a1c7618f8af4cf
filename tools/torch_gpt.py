"""The GPT of nn/transformer.h written in PyTorch 1.13, with the same parameter names,
shapes, initialization scheme and forward: token + learned position embeddings,
pre-LayerNorm blocks (fused q/k/v projection, causal attention, 4x tanh-GELU MLP),
a final LayerNorm and a head tied to the token embedding. Used by
tools/gen_reference_gpt.py (test fixture) and tools/train_gpt_torch.py (evidence).
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
