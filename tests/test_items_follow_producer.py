"""`items_follow_their_producer`: an op of a tuple's items runs right after the op that makes them, and the
order stays a valid, replaying schedule."""

from __future__ import annotations

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.errors import InvalidSchedule
from algorithms.graph import OpGraph
from algorithms.placement import check_schedule, items_follow_their_producer
from orchestrator.stages.schedule import check_replays

from .strategies import random_clusters, random_dags


def _graph() -> OpGraph:
    g = OpGraph("items")
    for name in ("a", "p", "x", "y", "b", "z"):
        g.add_op(name, compute_s=1.0, output_bytes=8)
    g.op("x")["items_of"] = "p"
    g.op("y")["items_of"] = "p"
    g.op("z")["items_of"] = "b"  # reads more than its producer: stays
    for s, d in (("a", "p"), ("p", "x"), ("p", "y"), ("a", "b"), ("x", "b"), ("b", "z"), ("y", "z"), ("a", "z")):
        g.add_edge(s, d, bytes=8)
    return g


def test_items_move_up_in_their_order_and_others_stay():
    g = _graph()
    order = {"d0": ["a", "p", "y", "b", "x", "z"]}
    with_items = items_follow_their_producer(g, order)
    assert with_items == {"d0": ["a", "p", "y", "x", "b", "z"]}
    assert items_follow_their_producer(g, with_items) == with_items
    assert order == {"d0": ["a", "p", "y", "b", "x", "z"]}  # the input is not changed


def test_items_on_another_device_stay_where_they_are():
    g = _graph()
    order = {"d0": ["a", "p", "b", "z"], "d1": ["y", "x"]}
    assert items_follow_their_producer(g, order) == order


def test_a_graph_without_items_keeps_its_order_object():
    g = OpGraph("plain")
    g.add_op("a")
    order = {"d0": ["a"]}
    assert items_follow_their_producer(g, order) is order


@st.composite
def _graphs_with_items(draw):
    g = draw(random_dags(min_ops=1, max_ops=20, colocation=False, training=False))
    producers = draw(st.lists(st.sampled_from(sorted(g.ops)), max_size=6))
    for k, p in enumerate(producers):
        name = f"{p}/out{k}"
        g.add_op(name, compute_s=0.0, output_bytes=draw(st.integers(0, 64)), items_of=p)
        g.add_edge(p, name, bytes=8)
        before = nx.ancestors(g.nx, p)
        readers = [o for o in g.ops if o not in (p, name) and o not in before]
        for r in draw(st.lists(st.sampled_from(readers), max_size=2, unique=True)) if readers else []:
            g.add_edge(name, r, bytes=8)
    return g


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_graphs_with_items(), random_clusters(min_devices=1, max_devices=3), st.data())
def test_random_orders_stay_valid_and_items_follow(graph, cluster, data):
    names = [d.name for d in cluster.devices]
    assign = {o: data.draw(st.sampled_from(names)) for o in graph.ops}
    for o in graph.ops:  # most items on their producer's device
        p = graph.op(o).get("items_of")
        if p is not None and data.draw(st.booleans()):
            assign[o] = assign[p]
    order: dict[str, list[str]] = {d: [] for d in names}
    topo = graph.topological_order()
    for o in data.draw(st.permutations(topo)) if data.draw(st.booleans()) else topo:
        order[assign[o]].append(o)
    try:
        check_replays(graph, cluster, order)
        replays = True
    except InvalidSchedule:
        replays = False
    out = items_follow_their_producer(graph, order)
    check_schedule(graph, assign, out)
    if replays:
        check_replays(graph, cluster, out)
    for d, ops in out.items():
        for k, o in enumerate(ops):
            p = graph.op(o).get("items_of")
            if p is not None and assign[p] == d and set(graph.nx.predecessors(o)) == {p}:
                j = k - 1
                while ops[j] != p:  # only other items' ops between it and its producer
                    assert graph.op(ops[j]).get("items_of") is not None
                    j -= 1
