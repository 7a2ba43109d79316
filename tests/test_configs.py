"""Every config group choice and every experiment preset composes, and every plugin instantiates."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from algorithms.base import GraphPass, PipelineScheduler, Placer, Scheduler
from algorithms.workloads.synthetic import linreg_graph
from backends.base import Backend, Profiler, Runtime
from orchestrator.app import build_cluster
from orchestrator.plugins import register_search_path
from orchestrator.registry import (
    build_backend,
    build_graph_model,
    build_profiler,
    build_runtime,
    instantiate,
    is_none,
)
from tests.stage_configs import choices

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


register_search_path()  # plugin packages' configs compose too, as in `python -m orchestrator`


def _choices(group: str) -> list[str]:
    return choices(group)


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


def _backend_capabilities():
    """Every backend class whose framework is installed (its declared capabilities)."""
    out = []
    for mod, cls in (("backends.torch", "TorchBackend"), ("backends.tensorflow", "TFBackend")):
        try:
            out.append(getattr(importlib.import_module(mod), cls))
        except ImportError:
            continue
    return out


@pytest.mark.parametrize("group,choice", [(g, c) for g in GROUPS for c in _choices(g)])
def test_every_group_choice_composes_and_builds(group, choice, tmp_path):
    overrides = [f"{group}={choice}"]
    if group == "model" and choice == "graph_file":
        path = tmp_path / "lr.graph.json"
        linreg_graph().save(path)
        overrides.append(f"model.path={path}")
    cfg = _resolve(_compose(*overrides))
    node = cfg[group]
    OmegaConf.to_container(node, resolve=True)  # every interpolation resolves
    if group == "cluster":
        cl = build_cluster(node, choice)
        assert len(cl) >= 1 and all(d.memory_bytes > 0 and d.speed > 0 for d in cl.devices)
        assert len(set(cl.names)) == len(cl)
    elif group == "placer":
        assert isinstance(instantiate(node, "placer"), Placer)
    elif group == "scheduler":
        assert isinstance(instantiate(node, "scheduler"), Scheduler)
    elif group == "pipeline":
        if choice == "none":
            assert is_none(node)
        else:
            sched = instantiate(node, "pipeline")
            assert isinstance(sched, PipelineScheduler) and node.shape and node.n_micro >= 1
    elif group == "optimizer":
        passes = [instantiate(p, "pass") for p in node.get("passes") or []]
        assert all(isinstance(p, GraphPass) for p in passes)
        assert (choice == "none") == (passes == [])
    elif group == "model":
        assert node.name
        if "_target_" in node:
            graph = build_graph_model(node).graph()
            assert len(graph) > 0
        elif choice != "none":  # a framework model: its family is in some backend's zoo
            backends = _backend_capabilities()
            if not backends:
                pytest.skip("no framework backend installed")
            assert any(node.family in b.capabilities.models for b in backends), node.family
    elif group == "profiler":
        if "_target_" in node:
            assert isinstance(build_profiler(node, None), Profiler)
        else:  # named: some backend provides it
            backends = _backend_capabilities()
            if not backends:
                pytest.skip("no framework backend installed")
            assert any(node.name in b.capabilities.profilers for b in backends), node.name
    elif group == "runtime":
        if choice == "none":
            assert build_runtime(node, None) is None
        else:
            backends = _backend_capabilities()
            if not backends:
                pytest.skip("no framework backend installed")
            for b in backends:
                rt = build_runtime(node, b())
                assert isinstance(rt, Runtime) and rt.name == choice
    elif group == "backend":
        if choice == "none":
            assert build_backend(node) is None
        else:
            pytest.importorskip({"torch": "torch", "tensorflow": "tensorflow"}.get(choice, choice))
            backend = build_backend(node)
            assert isinstance(backend, Backend) and backend.capabilities.models and backend.capabilities.runtimes
    elif group == "tracking":
        assert node.uri.startswith("sqlite:///") and node.enabled is True


@pytest.mark.parametrize("name", choices("experiment"))
def test_every_experiment_composes(name):
    cfg = _resolve(_compose(f"+experiment={name}"))
    OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(instantiate(cfg.placer, "placer"), Placer)
    assert isinstance(instantiate(cfg.scheduler, "scheduler"), Scheduler)
    assert len(build_cluster(cfg.cluster, "cluster")) >= 1


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
