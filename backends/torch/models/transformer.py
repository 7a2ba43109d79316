"""A Transformer encoder-decoder (Vaswani et al., 2017) and a GPT-style decoder stack (Radford et al., 2018),
written for capture.

Transformer: embeddings "embed/src", "embed/tgt" with learned positions, `layers` encoder layers "enc/l{i}"
(self-attention "attn", "ffn", post-layer-norm "norm1/norm2") and `layers` decoder layers "dec/l{i}" (masked
self-attention, cross-attention "cross", ffn), projection "proj", "loss". GPT: a large token embedding
"embed", `layers` blocks "blocks/l{i}" (pre-layer-norm, causal attention, ffn), final norm "norm_f", "head",
"loss" (Tessel's M shape: the embedding and head dominate memory). Dropout is left out. Cost per step:
O(layers * batch * (seq^2 * hidden + seq * hidden * ffn) + batch * seq * hidden * vocab).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from algorithms.errors import ConfigError

from .common import CrossEntropy, generator, need


class Attention(nn.Module):
    """Multi-head scaled dot-product attention with projections "q", "k", "v", "o"."""

    def __init__(self, hidden: int, heads: int, causal: bool = False):
        super().__init__()
        if hidden % heads:
            raise ConfigError(f"hidden {hidden} is not divisible by heads {heads}")
        self.h, self.causal = heads, causal
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))

    def forward(self, x: torch.Tensor, mem: torch.Tensor | None = None) -> torch.Tensor:
        mem = x if mem is None else mem
        B, T, D = x.shape
        S = mem.shape[1]
        d = D // self.h
        q = self.q(x).view(B, T, self.h, d).transpose(1, 2)
        k = self.k(mem).view(B, S, self.h, d).transpose(1, 2)
        v = self.v(mem).view(B, S, self.h, d).transpose(1, 2)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        if self.causal:
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, D))


class FFN(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn, self.ffn = Attention(hidden, heads), FFN(hidden, ffn)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)

    def forward(self, x):
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.ffn(x))


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn, self.cross = Attention(hidden, heads, causal=True), Attention(hidden, heads)
        self.ffn = FFN(hidden, ffn)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(hidden) for _ in range(3))

    def forward(self, x, mem):
        x = self.norm1(x + self.attn(x))
        x = self.norm2(x + self.cross(x, mem))
        return self.norm3(x + self.ffn(x))


class Embedding(nn.Module):
    """Token embedding plus a learned position embedding."""

    def __init__(self, vocab, hidden, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.randn(seq, hidden) * 0.02)

    def forward(self, ids):
        return self.tok(ids) + self.pos[: ids.shape[1]]


class Transformer(nn.Module):
    def __init__(self, vocab, hidden, heads, ffn, layers, seq):
        super().__init__()
        self.embed = nn.ModuleDict({"src": Embedding(vocab, hidden, seq), "tgt": Embedding(vocab, hidden, seq)})
        self.enc = nn.ModuleDict({f"l{i}": EncoderLayer(hidden, heads, ffn) for i in range(layers)})
        self.dec = nn.ModuleDict({f"l{i}": DecoderLayer(hidden, heads, ffn) for i in range(layers)})
        self.proj = nn.Linear(hidden, vocab)
        self.loss = CrossEntropy()

    def forward(self, src, tgt_in, tgt_out):
        x = self.embed["src"](src)
        for layer in self.enc.values():
            x = layer(x)
        y = self.embed["tgt"](tgt_in)
        for layer in self.dec.values():
            y = layer(y, x)
        return self.loss(self.proj(y), tgt_out)


class GPTBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn, self.ffn = Attention(hidden, heads, causal=True), FFN(hidden, 4 * hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, vocab, hidden, heads, layers, seq):
        super().__init__()
        self.embed = Embedding(vocab, hidden, seq)
        self.blocks = nn.ModuleDict({f"l{i}": GPTBlock(hidden, heads) for i in range(layers)})
        self.norm_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.loss = CrossEntropy()

    def forward(self, ids, target):
        x = self.embed(ids)
        for block in self.blocks.values():
            x = block(x)
        return self.loss(self.head(self.norm_f(x)), target)


def _token_batches(cfg, seed, vocab, seq, parts):
    def make_batch(b: int):
        g = generator(seed, 1000 + b)
        if parts == 3:
            src = torch.randint(0, vocab, (b, seq), generator=g)
            tgt = torch.randint(0, vocab, (b, seq + 1), generator=g)
            return src, tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()
        ids = torch.randint(0, vocab, (b, seq + 1), generator=g)
        return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    return make_batch


def build_transformer(cfg: Mapping[str, Any]):
    vocab, hidden, heads = int(need(cfg, "vocab")), int(need(cfg, "hidden")), int(need(cfg, "heads"))
    ffn, layers, seq = int(need(cfg, "ffn")), int(need(cfg, "layers")), int(need(cfg, "seq_len"))
    seed = int(cfg.get("seed") or 0)
    return Transformer(vocab, hidden, heads, ffn, layers, seq), _token_batches(cfg, seed, vocab, seq, 3)


def build_gpt(cfg: Mapping[str, Any]):
    vocab, hidden, heads = int(need(cfg, "vocab")), int(need(cfg, "hidden")), int(need(cfg, "heads"))
    layers, seq = int(need(cfg, "layers")), int(need(cfg, "seq_len"))
    seed = int(cfg.get("seed") or 0)
    return GPT(vocab, hidden, heads, layers, seq), _token_batches(cfg, seed, vocab, seq, 2)
