"""Issue 22: the compiled simulator keeps each device's memory timeline as two arrays (`MemoryTimeline`, 16 bytes a
point instead of about 112 as a tuple in a list); it reads as the list of (time, bytes) tuples it stands for, and
a run's results and files are the Python simulator's."""

from __future__ import annotations

import json
import pickle

import pytest

from algorithms.cluster import uniform_cluster
from algorithms.memory import single_device_need
from algorithms.placers.baechi import METFPlacer
from algorithms.sim_result import MemoryTimeline, sim_result_from_dict, sim_result_to_dict
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from orchestrator.trace import iter_predicted_events

POINTS = [(0.0, 0.0), (0.5, 100.0), (1.25, 300.0), (2.0, -0.0)]


def test_reads_as_its_list():
    tl = MemoryTimeline([t for t, _ in POINTS], [v for _, v in POINTS])
    assert len(tl) == 4 and list(tl) == POINTS and tl == POINTS and POINTS == tl
    assert tl[1] == (0.5, 100.0) and tl[-1] == (2.0, -0.0) and tl[1:3] == POINTS[1:3]
    assert all(type(x) is float for p in tl for x in p)
    assert tl != POINTS[:3] and tl != [*POINTS[:3], (2.0, 1.0)] and tl != "abc"
    assert repr(tl) == repr(POINTS) and bool(tl) and not MemoryTimeline([], [])
    assert max(t for t, _ in tl) == 2.0 and (1.25, 300.0) in tl
    assert pickle.loads(pickle.dumps(tl)) == POINTS
    with pytest.raises(IndexError):
        tl[4]
    with pytest.raises(ValueError):
        MemoryTimeline([0.0], [0.0, 1.0])


def test_compiled_simulation_as_python(monkeypatch):
    """Above `COMPILED_MIN_OPS` the timelines are `MemoryTimeline`s; the result, its dict and JSON form and the
    trace's events are those of the Python simulator."""
    from algorithms import simulator

    pytest.importorskip("numba")
    g = level_dag(levels=80, min_nodes_per_level=2, max_nodes_per_level=8, edge_probability=0.2, training=True, seed=4)
    cl = uniform_cluster(3, 0.5 * single_device_need(g), type="GPU", latency_s=1e-4, bytes_per_s=1e9)
    pl = METFPlacer().place(g, cl)
    monkeypatch.setattr(simulator, "COMPILED_MIN_OPS", 1)
    fast = simulate(g, cl, pl.assignment, pl.order)
    monkeypatch.setattr(simulator, "COMPILED_MIN_OPS", 10**9)
    slow = simulate(g, cl, pl.assignment, pl.order)
    assert all(isinstance(tl, MemoryTimeline) for tl in fast.memory_timeline.values())
    assert all(isinstance(tl, list) for tl in slow.memory_timeline.values())
    assert fast == slow
    assert json.dumps(sim_result_to_dict(fast)) == json.dumps(sim_result_to_dict(slow))
    assert sim_result_from_dict(sim_result_to_dict(fast)) == slow
    assert list(iter_predicted_events(fast, g, cl)) == list(iter_predicted_events(slow, g, cl))
