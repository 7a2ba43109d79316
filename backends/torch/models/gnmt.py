"""GNMT as Baechi section 5.1 uses it (Wu et al., 2016): embeddings, a stack of LSTM layers for the encoder and
for the decoder with residual connections, Bahdanau (additive) attention, an output projection and the
cross-entropy loss. The LSTM cells are unrolled: each layer's cell is called once per time step, so the
captured graph has per-step ops, as TensorFlow's unrolled RNNs give Baechi.

Module paths (and hence op-name scopes): "embed/src", "embed/tgt", "enc/l0".."enc/l{L-1}",
"dec/l0".."dec/l{L-1}", "attention", "proj", "loss" — the prefixes of conf/model/gnmt.yaml's expert rules.

Choices where the paper leaves room: the encoder is unidirectional (GNMT's first layer is bidirectional); the
bottom decoder layer's output is the attention query and the context vector is concatenated to the input of
every higher decoder layer (GNMT section 3); residual connections add a layer's input to its output from layer
`residual_from` on. Cost per step: O(seq_len * layers * batch * hidden^2 + seq_len^2 * batch * hidden
+ seq_len * batch * hidden * vocab).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .common import CrossEntropy, generator, need


class LSTMLayer(nn.Module):
    """One LSTM layer, called once per time step (an unrolled cell).

    gates = x W_ih^T + h W_hh^T + b; i, f, g, o = split(gates); c' = sigmoid(f) c + sigmoid(i) tanh(g);
    h' = sigmoid(o) tanh(c'). The glue around the cell lives here too, so that every op of a layer's step
    carries the layer's scope: taking time step `t` of a sequence, concatenating the attention context
    (decoder layers above the first), zero initial state, and the residual connection (output = h' + x).
    """

    def __init__(self, inp: int, hidden: int, residual: bool):
        super().__init__()
        self.hidden, self.residual = hidden, residual
        k = hidden**-0.5
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden, inp).uniform_(-k, k))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden, hidden).uniform_(-k, k))
        self.bias = nn.Parameter(torch.zeros(4 * hidden))

    def forward(self, x, state, t: int | None = None, ctx: torch.Tensor | None = None):
        if t is not None:
            x = x[:, t]
        if state is None:
            z = x.new_zeros(x.shape[0], self.hidden)
            state = (z, z)
        h, c = state
        inp = x if ctx is None else torch.cat([x, ctx], 1)
        gates = torch.addmm(self.bias, inp, self.weight_ih.t()) + h @ self.weight_hh.t()
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out = h + x if self.residual else h
        return out, (h, c)


class BahdanauAttention(nn.Module):
    """score(q, k_s) = v^T tanh(W_q q + W_k k_s); softmax over source steps s; context = sum_s a_s k_s.

    Called once with the list of encoder outputs (stacks them and projects the keys) and then once per
    decoder time step with the query."""

    def __init__(self, hidden: int):
        super().__init__()
        self.query = nn.Linear(hidden, hidden, bias=False)
        self.key = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Parameter(torch.empty(hidden).uniform_(-(hidden**-0.5), hidden**-0.5))

    def forward(self, q, memory):
        if q is None:
            enc = torch.stack(memory, 1)  # (B, S, H)
            return enc, self.key(enc)
        enc, keys = memory
        e = torch.tanh(keys + self.query(q).unsqueeze(1))  # (B, S, H)
        a = torch.softmax(e @ self.v, dim=1)  # (B, S)
        return (a.unsqueeze(2) * enc).sum(1)  # (B, H)


class Projection(nn.Module):
    """Stacks the decoder outputs of every time step and projects them onto the vocabulary."""

    def __init__(self, hidden: int, vocab: int):
        super().__init__()
        self.linear = nn.Linear(hidden, vocab)

    def forward(self, outs):
        return self.linear(torch.stack(outs, 1))  # (B, T, V)


class GNMT(nn.Module):
    """forward(src, tgt_in, tgt_out) -> mean token cross-entropy."""

    def __init__(self, vocab: int, hidden: int, layers: int, residual_from: int):
        super().__init__()
        self.layers = layers
        self.embed = nn.ModuleDict({"src": nn.Embedding(vocab, hidden), "tgt": nn.Embedding(vocab, hidden)})
        self.enc = nn.ModuleDict({f"l{i}": LSTMLayer(hidden, hidden, i >= residual_from) for i in range(layers)})
        self.dec = nn.ModuleDict(
            {f"l{i}": LSTMLayer(hidden if i == 0 else 2 * hidden, hidden, i >= residual_from) for i in range(layers)}
        )
        self.attention = BahdanauAttention(hidden)
        self.proj = Projection(hidden, vocab)
        self.loss = CrossEntropy()

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        xs = self.embed["src"](src)
        state = [None] * self.layers
        enc_out = []
        for t in range(src.shape[1]):
            x, state[0] = self.enc["l0"](xs, state[0], t=t)
            for li in range(1, self.layers):
                x, state[li] = self.enc[f"l{li}"](x, state[li])
            enc_out.append(x)
        memory = self.attention(None, enc_out)
        ys = self.embed["tgt"](tgt_in)
        dstate = [None] * self.layers
        outs = []
        for t in range(tgt_in.shape[1]):
            h, dstate[0] = self.dec["l0"](ys, dstate[0], t=t)
            ctx = self.attention(h, memory)
            x = h
            for li in range(1, self.layers):
                x, dstate[li] = self.dec[f"l{li}"](x, dstate[li], ctx=ctx)
            outs.append(x)
        return self.loss(self.proj(outs), tgt_out)


def build_gnmt(cfg: Mapping[str, Any]):
    vocab, hidden = int(need(cfg, "vocab")), int(need(cfg, "hidden"))
    layers, seq = int(need(cfg, "layers")), int(need(cfg, "seq_len"))
    residual_from = int(cfg.get("residual_from", 2))
    seed = int(cfg.get("seed") or 0)
    module = GNMT(vocab, hidden, layers, residual_from)

    def make_batch(b: int):
        g = generator(seed, 1000 + b)
        src = torch.randint(0, vocab, (b, seq), generator=g)
        tgt = torch.randint(0, vocab, (b, seq + 1), generator=g)
        return src, tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous()

    return module, make_batch
