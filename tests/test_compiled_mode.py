"""`algorithms.compiled`'s mode (config key ``compiled``): which implementation the placers and the simulator
run, so that a figure of placement times compares one implementation across graph sizes."""

from __future__ import annotations

import json

import pytest

from algorithms import compiled, compiled_mode
from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError
from algorithms.placers.thesis import heft
from algorithms.workloads.synthetic import level_dag


@pytest.fixture
def mode():
    was = compiled_mode.mode()
    yield compiled_mode.set_mode
    compiled_mode.set_mode(was)


def test_applies_by_size_or_by_mode(mode):
    assert compiled_mode.mode() == "auto"
    assert not compiled_mode.applies(1999, 2000) and compiled_mode.applies(2000, 2000)
    assert not compiled_mode.applies(10**6, None)  # a caller that turned its kernel off keeps its Python code
    assert mode("never") == "auto"
    assert not compiled_mode.applies(10**6, 2000) and compiled.preload(10**6) == 0.0
    mode("always")
    assert compiled_mode.applies(3, 2000) and not compiled_mode.applies(3, None)
    with pytest.raises(ConfigError, match="compiled must be one of auto, never, always, got 'fast'"):
        mode("fast")
    assert compiled_mode.mode() == "always"  # a refused value changes nothing


def test_heft_runs_the_python_loop_for_every_graph_under_never(mode, monkeypatch):
    pytest.importorskip("numba")
    g = level_dag(levels=60, min_nodes_per_level=30, max_nodes_per_level=45, edge_probability=0.05, seed=3)
    assert g.index().n >= heft.COMPILED_MIN_OPS
    cluster = uniform_cluster(4, 1e12)
    auto = heft.HEFTPlacer().place(g, cluster)
    calls = []
    real = heft._place_compiled
    monkeypatch.setattr(heft, "_place_compiled", lambda *a: calls.append(1) or real(*a))
    heft.HEFTPlacer().place(g, cluster)
    assert calls == [1]
    mode("never")
    never = heft.HEFTPlacer().place(g, cluster)
    assert calls == [1]  # the Python loop this time, and the same placement and order
    assert never.assignment == auto.assignment and never.order == auto.order


def test_a_job_sets_the_mode_for_its_stages_and_restores_it(lab):
    lab.run("placer=heft", "compiled=never")
    lab.run("placer=heft")  # the default, auto: a place stage of its own (a cached time comes from one mode)
    results = [json.loads((o / "result.json").read_text()) for o in lab.outputs()]
    assert [r["status"] for r in results] == ["ok", "ok"]
    assert [r["cache_hits"]["place"] for r in results] == [False, False]
    assert [json.loads((o / "config.json").read_text())["compiled"] for o in lab.outputs()] == ["never", "auto"]
    bad = lab.run("compiled=fast", check=False)
    assert bad.returncode != 0 and "compiled must be one of auto, never, always" in bad.stdout + bad.stderr
