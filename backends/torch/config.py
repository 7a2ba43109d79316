"""Reading conf/model/*.yaml outside Hydra (tests, experiment scripts): the file with its `defaults` chain
resolved and `${seed}` filled in, as the plain dict `TorchBackend.build` receives from the orchestrator."""
from __future__ import annotations

import os
from typing import Any, Mapping

from omegaconf import OmegaConf

from algorithms.errors import ConfigError

CONF_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "conf"))


def _load(name: str, folder: str):
    path = os.path.join(folder, f"{name}.yaml")
    if not os.path.isfile(path):
        have = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))
        raise ConfigError(f"model {name!r} has no config {path}; available: {have}")
    node = OmegaConf.load(path)
    defaults = node.pop("defaults", None) or []
    merged = OmegaConf.create({})
    for d in defaults:
        if d == "_self_":
            merged = OmegaConf.merge(merged, node)
            node = None
        else:
            merged = OmegaConf.merge(merged, _load(str(d), folder))
    return OmegaConf.merge(merged, node) if node is not None else merged


def load_model_cfg(name: str, overrides: Mapping[str, Any] | None = None, *, seed: int = 0,
                   conf_dir: str | None = None) -> dict[str, Any]:
    """conf/model/`name`.yaml as a resolved plain dict (``seed`` filled in, `overrides` applied)."""
    node = _load(name, os.path.join(conf_dir or CONF_DIR, "model"))
    root = OmegaConf.create({"seed": seed, "model": node})
    if overrides:
        root.model = OmegaConf.merge(root.model, OmegaConf.create(dict(overrides)))
    out = OmegaConf.to_container(root.model, resolve=True)
    assert isinstance(out, dict)
    return out
