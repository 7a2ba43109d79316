"""The PyTorch model zoo: `build_model(cfg)` turns a conf/model/*.yaml dict into a `TorchModel`.

Families: linreg, mlp, inception_v3, gnmt, transformer, gpt. Parameters are initialised from `cfg["seed"]`,
so the same config gives the same model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from algorithms.errors import ConfigError

from .common import TorchModel
from .gnmt import build_gnmt
from .inception import build_inception_v3
from .simple import build_linreg, build_mlp
from .transformer import build_gpt, build_transformer

BUILDERS = {
    "linreg": build_linreg,
    "mlp": build_mlp,
    "inception_v3": build_inception_v3,
    "gnmt": build_gnmt,
    "transformer": build_transformer,
    "gpt": build_gpt,
}


def build_model(cfg: Mapping[str, Any]) -> TorchModel:
    """Build the model a config describes. O(parameters)."""
    cfg = dict(cfg)
    family = cfg.get("family") or cfg.get("name")
    if family not in BUILDERS:
        raise ConfigError(f"model family {family!r} has no PyTorch builder; available: {sorted(BUILDERS)}")
    seed = int(cfg.get("seed") or 0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module, make_batch = BUILDERS[family](cfg)
    module.train()
    return TorchModel(
        name=str(cfg.get("name", family)),
        family=family,
        module=module,
        make_batch=make_batch,
        batch_size=int(cfg.get("batch_size") or 1),
        optimizer=str(cfg.get("optimizer", "sgd")).lower(),
        lr=float(cfg.get("lr", 0.01)),
        rms_alpha=float(cfg.get("rms_alpha", 0.9)),
        rms_eps=float(cfg.get("rms_eps", 1e-8)),
        seed=seed,
        cfg=cfg,
    )


__all__ = ["TorchModel", "build_model", "BUILDERS"]
