"""The schedule stage's deadlock check (`check_replays`) against the simulator it replaces (issue 22)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.errors import InvalidSchedule
from algorithms.simulator import simulate
from orchestrator.stages.schedule import check_replays

from .strategies import random_clusters, random_dags


def _outcome(fn) -> str | None:
    try:
        fn()
    except InvalidSchedule as exc:
        return str(exc)
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    random_dags(min_ops=1, max_ops=25, colocation=False, training=True),
    random_clusters(min_devices=1, max_devices=4, hetero=True),
    st.data(),
)
def test_same_verdict_and_message_as_the_simulator(graph, cluster, data):
    """Random placements and per-device orders (shuffled, so that many deadlock): `check_replays` raises
    exactly when `simulate` does, with the same message."""
    names = [d.name for d in cluster.devices]
    ops = list(graph.ops)
    assign = {o: data.draw(st.sampled_from(names)) for o in ops}
    order: dict[str, list[str]] = {d: [] for d in names}
    topo = graph.topological_order()
    for o in data.draw(st.one_of(st.just(topo), st.permutations(ops))):
        order[assign[o]].append(o)
    expected = _outcome(lambda: simulate(graph, cluster, assign, order, record_memory=False))
    assert _outcome(lambda: check_replays(graph, cluster, order)) == expected


def test_names_the_blocked_device_and_input():
    """A two-op chain whose consumer is ordered before its producer on one device."""
    from algorithms.cluster import uniform_cluster
    from algorithms.graph import OpGraph

    g = OpGraph("two")
    g.add_op("a", compute_s=1.0, output_bytes=1)
    g.add_op("b", compute_s=1.0)
    g.add_edge("a", "b", bytes=1)
    cluster = uniform_cluster(2, 1e9)
    dev = cluster.devices[0].name
    with pytest.raises(InvalidSchedule, match=r"device .* waits to run op 'b', whose input\(s\) \['a'\]"):
        check_replays(g, cluster, {dev: ["b", "a"]})
    check_replays(g, cluster, {dev: ["a", "b"]})
