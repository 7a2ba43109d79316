"""Model configs outside Hydra: see backends/config.py (shared by both backends)."""

from __future__ import annotations

from ..config import CONF_DIR, load_model_cfg

__all__ = ["CONF_DIR", "load_model_cfg"]
