"""The registry's configs as tests see them: every config name of a group found once (project and installed
plugins, orchestrator.catalog), and a placer built from its config the way the orchestrator builds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.registry import available, instantiate, load_choice

#: Every placer config name (conf/placer and plugins'): the one list tests parametrize over.
PLACERS: list[str] = available("placer")


def choices(group: str) -> list[str]:
    """Every config name of `group`."""
    return available(group)


def build_placer(name: str, model_cfg: Mapping[str, Any] | None = None, seed: int = 0) -> Any:
    """conf/placer/`name`.yaml instantiated with `model` and `seed` visible to its interpolations (e.g. the expert
    placer's `model.expert_rules`)."""
    return instantiate(load_choice("placer", name, seed=seed, model=dict(model_cfg or {})), "placer")
