"""Model configs: loading them outside Hydra (backends/config.py, shared by both backends) and reading a model
config's keys with errors that name the key (the zoo's builders: `families`, `examples`, `models`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from algorithms.errors import ConfigError

from ..config import CONF_DIR, load_model_cfg


def _get(cfg: Mapping[str, Any], key: str, default: Any = None, *, required: bool = False) -> Any:
    if key in cfg and cfg[key] is not None:
        return cfg[key]
    if required:
        raise ConfigError(
            f"model config {cfg.get('name', '?')!r}: key {key!r} is required for family {cfg.get('family')!r}"
        )
    return default


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = _get(cfg, key, default, required=default is None)
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"model.{key} must be an integer, got {value!r}") from None
    if out <= 0:
        raise ConfigError(f"model.{key} must be > 0, got {out}")
    return out


def _seed(cfg: Mapping[str, Any]) -> int:
    s = cfg.get("seed", 0)
    try:
        return int(s) if s is not None else 0
    except (TypeError, ValueError):
        raise ConfigError(f"model.seed must be an integer, got {s!r} (resolve the config first)") from None


__all__ = ["CONF_DIR", "load_model_cfg"]
