"""Issue 22: the outputs of huge steps: trace.json is cut in time above its op cap (and says so), plots of
many ops merge sub-pixel bars, and orjson writes the same JSON content as the standard library."""

from __future__ import annotations

import json
import math

import pytest

from algorithms.cluster import uniform_cluster
from algorithms.graph import atomic_write_json
from algorithms.simulator import simulate
from algorithms.workloads.synthetic import level_dag
from orchestrator import trace


@pytest.fixture(scope="module")
def chain_sim():
    g = level_dag(levels=60, min_nodes_per_level=1, max_nodes_per_level=2, edge_probability=1.0, training=True)
    cl = uniform_cluster(2, math.inf, latency_s=1e-4, bytes_per_s=1e9)
    assign = {op: cl.names[k % 2] for k, op in enumerate(g.index().names)}
    return g, cl, simulate(g, cl, assign)


def test_trace_is_cut_in_time_above_the_cap_and_says_so(chain_sim):
    g, cl, sim = chain_sim
    ran = sum(1 for s in sim.start if s == s)
    full = trace.trace(sim, g, cl, max_ops=None)["traceEvents"]
    cut = trace.trace(sim, g, cl, max_ops=50)["traceEvents"]
    t_cut = sorted(sim.start)[50]
    ops = [e for e in cut if e["ph"] == "X" and e["cat"] == "op"]
    assert len(ops) == sum(1 for s in sim.start if s < t_cut) >= 50
    assert all(e["ts"] < t_cut * 1e6 for e in cut if "ts" in e and not e["name"].startswith("trace cut"))
    # nothing before the cut is lost
    before = [e for e in full if e.get("ts", math.inf) < t_cut * 1e6]
    kept = {json.dumps(e, sort_keys=True) for e in cut}
    assert all(json.dumps(e, sort_keys=True) in kept for e in before if e["ph"] != "M")
    name = next(e["args"]["name"] for e in cut if e["name"] == "process_name")
    assert f"of {ran} ops" in name
    assert [e for e in cut if e["ph"] == "i" and e["name"].startswith("trace cut")]
    # below the cap nothing changes
    assert trace.trace(sim, g, cl, max_ops=ran)["traceEvents"] == full


def test_orjson_writes_the_same_content_and_refuses_non_finite(tmp_path, chain_sim):
    _, _, sim = chain_sim
    obj = {"timeline": sim.timeline(), "x": [1, 2.5, None, "a"], "nested": {"t": (1e-5, 3)}}
    for indent in (None, 0, 1):
        atomic_write_json(tmp_path / "a.json", obj, indent=indent)
        assert json.loads((tmp_path / "a.json").read_text()) == json.loads(json.dumps(obj))
    with pytest.raises(ValueError, match=r"nested\.t\[0\] is not a finite number"):
        atomic_write_json(tmp_path / "b.json", {"nested": {"t": (math.nan, 3)}, "n": None})
    with pytest.raises(ValueError, match="not a finite number"):
        atomic_write_json(tmp_path / "c.json", [1.0, math.inf])
    atomic_write_json(tmp_path / "d.json", {1: 2.0})  # a key orjson refuses goes through json.dumps
    assert json.loads((tmp_path / "d.json").read_text()) == {"1": 2.0}


def test_plots_merge_sub_pixel_detail_above_their_caps(tmp_path, chain_sim, monkeypatch):
    from orchestrator import plots

    assert plots._merge_spans([(0.0, 1.0), (1.05, 1.0), (3.0, 1.0)], 0.1) == [(0.0, 2.05), (3.0, 1.0)]
    tl = [(0.0, 0.0), (0.1, 5.0), (0.15, 1.0), (0.5, 2.0), (0.9, 0.5)]
    monkeypatch.setattr(plots, "PIXELS", 4)  # bins of a quarter of the step
    assert plots._envelope(tl, 1.0) == [(0.0, 5.0), (0.5, 2.0), (0.75, 0.5), (0.9, 0.5)]
    _, _, sim = chain_sim
    monkeypatch.setattr(plots, "MAX_BARS", 10)
    monkeypatch.setattr(plots, "MAX_POINTS", 10)
    assert plots.device_utilization_png(sim, tmp_path / "u.png")
    assert plots.memory_png(sim, tmp_path / "m.png")
    assert (tmp_path / "u.png").stat().st_size > 0 and (tmp_path / "m.png").stat().st_size > 0
