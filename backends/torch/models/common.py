"""Pieces shared by the PyTorch model zoo: the model handle, layers written for capture, and seeded batches.

Every model is an ``nn.Module`` whose ``forward(*inputs)`` returns the scalar training loss, so that one
function (forward, loss, backward, optimizer update) describes the training step of any model. Module
attribute names are chosen so that module paths read as op-name scopes ("enc/l0", "attention", "proj",
"loss"), which expert placements match by prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from algorithms.errors import ConfigError

OPTIMIZERS = ("sgd", "rmsprop")


@dataclass
class TorchModel:
    """What `TorchBackend.build` returns: the module, how to make a batch, and the optimizer settings.

    `make_batch(batch_size)` returns the tuple of input tensors of one step (seeded: the same batch size
    gives the same tensors). `cfg` is the model config it was built from. `cache` holds captured programs
    per batch size (filled by `backends.torch.capture`).
    """

    name: str
    family: str
    module: nn.Module
    make_batch: Callable[[int], tuple[torch.Tensor, ...]]
    batch_size: int
    optimizer: str = "sgd"
    lr: float = 0.01
    rms_alpha: float = 0.9
    rms_eps: float = 1e-8
    seed: int = 0
    cfg: dict[str, Any] = field(default_factory=dict)
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"model {self.name!r}: optimizer {self.optimizer!r} is not one of {OPTIMIZERS}")


class CrossEntropy(nn.Module):
    """Mean cross entropy over the last dimension (a module so that its ops sit under the "loss" scope)."""

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


class MSE(nn.Module):
    """Mean squared error (a module so that its ops sit under the "loss" scope)."""

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ((pred - target) ** 2).mean()


def generator(seed: int, salt: int) -> torch.Generator:
    """A CPU generator seeded from the model seed and a per-purpose salt (batch size, tensor number)."""
    g = torch.Generator()
    g.manual_seed(int(seed) * 1_000_003 + int(salt))
    return g


def need(cfg: Mapping[str, Any], key: str) -> Any:
    """`cfg[key]`, or a ConfigError naming the missing key."""
    if key not in cfg or cfg[key] is None:
        raise ConfigError(f"model {cfg.get('name', '?')!r}: key {key!r} is required")
    return cfg[key]


def scaled(channels: int, width: float) -> int:
    """A channel count multiplied by a width factor, at least 1."""
    return max(1, int(round(channels * width)))
