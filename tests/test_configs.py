"""Every config group choice and every experiment preset composes, and every plugin instantiates."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf

from orchestrator.app import build_cluster

CONF = Path(__file__).resolve().parent.parent / "conf"
GROUPS = [
    "model",
    "backend",
    "cluster",
    "profiler",
    "optimizer",
    "placer",
    "scheduler",
    "pipeline",
    "runtime",
    "tracking",
]


def _choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture(autouse=True)
def _clear_hydra():
    GlobalHydra.instance().clear()
    yield
    GlobalHydra.instance().clear()


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def _resolve(cfg):
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)
    return cfg


@pytest.mark.parametrize("group,choice", [(g, c) for g in GROUPS for c in _choices(g)])
def test_every_group_choice_composes_and_builds(group, choice):
    overrides = [f"{group}={choice}"]
    if group == "model" and choice == "graph_file":
        overrides.append("model.path=/nonexistent.graph.json")
    cfg = _resolve(_compose(*overrides))
    node = cfg[group]
    OmegaConf.to_container(node, resolve=True)  # every interpolation resolves
    if group == "cluster":
        cl = build_cluster(node, choice)
        assert len(cl) >= 1
    elif group in ("placer", "scheduler") or (group == "pipeline" and "_target_" in node):
        obj = instantiate(node, _convert_="all")
        assert obj is not None
    elif group == "optimizer":
        for p in node.get("passes") or []:
            assert hasattr(instantiate(p, _convert_="all"), "apply")
    elif group == "backend" and "_target_" in node:
        pytest.importorskip({"torch": "torch", "tensorflow": "tensorflow"}.get(choice, choice))
        assert instantiate(node, _convert_="all") is not None


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_composes(name):
    cfg = _resolve(_compose(f"+experiment={name}"))
    OmegaConf.to_container(cfg, resolve=False)
    for group in ("placer", "scheduler"):
        if "_target_" in cfg[group]:
            instantiate(cfg[group], _convert_="all")
    build_cluster(cfg.cluster, "cluster")


def test_defaults_are_the_documented_ones():
    cfg = _resolve(_compose())
    choices = cfg.hydra.runtime.choices
    assert (
        choices.model,
        choices.backend,
        choices.cluster,
        choices.profiler,
        choices.optimizer,
        choices.pipeline,
        choices.runtime,
    ) == ("synthetic", "none", "cpu4", "file", "none", "none", "none")
    assert (choices.placer, choices.scheduler) == ("m_etf", "placer_order")
    assert cfg.tracking.uri.startswith("sqlite:////") or cfg.tracking.uri.startswith("sqlite:///")
