"""Baechi's linear-regression training graph (Baechi Figure 2) and a small multi-layer perceptron.

Both are written as modules whose forward returns the loss; sizes come from conf/model/linreg.yaml and
mlp.yaml. Building is O(parameters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .common import MSE, CrossEntropy, generator, need


class LinReg(nn.Module):
    """y_hat = x W + b, loss = mean squared error (the working example of Baechi section 2)."""

    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, 1)
        self.loss = MSE()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss(self.linear(x), y)


class MLP(nn.Module):
    """Linear + ReLU layers ("l0", "l1", ...), a classifier "head", cross-entropy "loss"."""

    def __init__(self, in_features: int, hidden: list[int], classes: int):
        super().__init__()
        self.layers = nn.ModuleDict()
        prev = in_features
        for i, h in enumerate(hidden):
            self.layers[f"l{i}"] = nn.Sequential(nn.Linear(prev, h), nn.ReLU())
            prev = h
        self.head = nn.Linear(prev, classes)
        self.loss = CrossEntropy()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for layer in self.layers.values():
            x = layer(x)
        return self.loss(self.head(x), y)


def build_linreg(cfg: Mapping[str, Any]):
    features = int(need(cfg, "features"))
    seed = int(cfg.get("seed") or 0)
    module = LinReg(features)
    w_true = torch.randn(features, 1, generator=generator(seed, 7))

    def make_batch(b: int):
        g = generator(seed, 1000 + b)
        x = torch.randn(b, features, generator=g)
        y = x @ w_true + 0.01 * torch.randn(b, 1, generator=g)
        return x, y

    return module, make_batch


def build_mlp(cfg: Mapping[str, Any]):
    in_f, classes = int(need(cfg, "in_features")), int(need(cfg, "classes"))
    hidden = [int(h) for h in need(cfg, "hidden")]
    seed = int(cfg.get("seed") or 0)
    module = MLP(in_f, hidden, classes)

    def make_batch(b: int):
        g = generator(seed, 1000 + b)
        return torch.randn(b, in_f, generator=g), torch.randint(0, classes, (b,), generator=g)

    return module, make_batch
