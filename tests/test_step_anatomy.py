"""experiments/step_anatomy.py: which ops count as local, the measured-to-profiled ratio over them, and the
per-op table (messages flagged, lag against the simulated start)."""

from __future__ import annotations

import math

from algorithms.cluster import uniform_cluster
from algorithms.graph import OpGraph
from algorithms.simulator import simulate
from experiments.step_anatomy import local_ops, local_ratio, per_op_rows


def _chain() -> OpGraph:
    g = OpGraph()
    for name in "abcd":
        g.add_op(name, compute_s=1e-3)
    g.add_edge("a", "b", 8.0)
    g.add_edge("b", "c", 8.0)
    g.add_edge("c", "d", 8.0)
    return g


def test_local_ops_are_those_without_a_message() -> None:
    g = _chain()
    # c on the other device: b sends, c receives and sends, d receives; only a is local
    assert local_ops(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"}) == {"a"}
    assert local_ops(g, dict.fromkeys("abcd", "cpu0")) == set("abcd")


def test_local_ratio() -> None:
    tl = [
        {"op": "a", "device": "cpu0", "start_s": 0.0, "end_s": 2e-3},
        {"op": "b", "device": "cpu0", "start_s": 2e-3, "end_s": 3e-3},
        {"op": "c", "device": "cpu1", "start_s": 3e-3, "end_s": 9e-3},
    ]
    cost = {"a": 1e-3, "b": 1e-3, "c": 1e-3}
    total, median = local_ratio(tl, cost, {"a", "b"})
    assert math.isclose(total, 1.5) and math.isclose(median, 1.5)
    assert all(math.isnan(x) for x in local_ratio(tl, cost, set()))


def test_per_op_rows_flag_messages_and_measure_the_lag() -> None:
    g = _chain()
    placement = {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu1"}
    cluster = uniform_cluster(2)
    sim = simulate(g, cluster, placement, {"cpu0": ["a", "b"], "cpu1": ["c", "d"]})
    # measured: every op 1 ms late from b on
    tl = [
        {"op": o, "start_s": sim.start[k] + (1e-3 if o != "a" else 0.0), "end_s": sim.end[k] + 1e-3}
        for k, o in enumerate(sim.names)
    ]
    rows = per_op_rows(g, placement, sim, tl)
    assert [r["op"] for r in rows] == ["a", "b", "c", "d"]
    by = {r["op"]: r for r in rows}
    assert (by["b"]["receives"], by["b"]["sends"]) == (False, True)
    assert (by["c"]["receives"], by["c"]["sends"]) == (True, False)
    assert by["a"]["lag_s"] == 0.0 and math.isclose(by["d"]["lag_s"], 1e-3)
    assert by["c"]["device"] == "cpu1" and by["c"]["profiled_s"] == 1e-3
