"""Shared by both backends: load a model config (conf/model/<name>.yaml) as a plain dict without composing the
whole Hydra app.

The orchestrator hands the backend an already-composed dict; tests and experiment scripts use
`load_model_cfg` to get the same dict for one model: the file's `defaults: [base, _self_]` list is followed
(the base file first, this file's keys over it), ``${seed}`` is resolved from `seed`, and `overrides` are
applied last. O(size of the YAML files).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from algorithms.errors import ConfigError

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")


def _load(name: str, folder: str) -> Any:
    path = os.path.join(folder, f"{name}.yaml")
    if not os.path.exists(path):
        known = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))
        raise ConfigError(f"unknown model config {name!r}; available: {known}")
    node = OmegaConf.load(path)
    defaults = node.pop("defaults", None) if "defaults" in node else None
    merged = OmegaConf.create({})
    own_seen = False
    for entry in defaults or ["_self_"]:
        if entry == "_self_":
            merged = OmegaConf.merge(merged, node)
            own_seen = True
        else:
            merged = OmegaConf.merge(merged, _load(str(entry), folder))
    if not own_seen:
        merged = OmegaConf.merge(merged, node)
    return merged


def load_model_cfg(
    name: str, overrides: Mapping[str, Any] | None = None, *, seed: int = 0, conf_dir: str | None = None
) -> dict[str, Any]:
    """conf/model/`name`.yaml as a resolved plain dict (``seed`` filled in, `overrides` applied)."""
    folder = os.path.join(conf_dir or CONF_DIR, "model")
    node = _load(name, folder)
    root = OmegaConf.create({"seed": seed, "model": node})
    if overrides:
        root.model = OmegaConf.merge(root.model, OmegaConf.create(dict(overrides)))
    out = OmegaConf.to_container(root.model, resolve=True)
    assert isinstance(out, dict)
    return out
