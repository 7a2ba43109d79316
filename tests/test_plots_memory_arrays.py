"""Issue 22: memory.png reads a `MemoryTimeline`'s arrays (times, bytes) instead of a tuple per point; the
picture is byte for byte the one drawn from the same timeline as a list of (time, bytes) tuples, the code
path of every timeline before, with and without the upper envelope."""

from __future__ import annotations

import dataclasses
import math

import pytest

from algorithms.cluster import uniform_cluster
from algorithms.sim_result import MemoryTimeline
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from orchestrator import plots


@pytest.fixture(scope="module")
def sim():
    g = level_dag(levels=800, min_nodes_per_level=2, max_nodes_per_level=5, edge_probability=0.3, training=True)
    cl = uniform_cluster(3, math.inf, latency_s=1e-4, bytes_per_s=1e9)
    idx = g.index()
    assign = {op: cl.names[k % 3] for k, op in enumerate(idx.names)}
    order = {d: [op for op in idx.names if assign[op] == d] for d in cl.names}
    r = simulate(g, cl, assign, order)
    assert all(isinstance(tl, MemoryTimeline) for tl in r.memory_timeline.values())  # the compiled simulator's
    return r


@pytest.mark.parametrize("max_points", [10**9, 50])
def test_memory_png_from_arrays_is_the_picture_from_tuples(tmp_path, sim, monkeypatch, max_points):
    monkeypatch.setattr(plots, "MAX_POINTS", max_points)
    as_lists = dataclasses.replace(sim, memory_timeline={d: list(tl) for d, tl in sim.memory_timeline.items()})
    plots.memory_png(sim, tmp_path / "arrays.png")
    plots.memory_png(as_lists, tmp_path / "tuples.png")
    assert (tmp_path / "arrays.png").read_bytes() == (tmp_path / "tuples.png").read_bytes()
    assert plots._last_time(sim.memory_timeline[sim.devices[0]]) == max(
        t for t, _ in sim.memory_timeline[sim.devices[0]]
    )
