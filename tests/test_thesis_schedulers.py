"""The thesis' schedulers (seed 004, chapter 5), send/receive insertion (2.4) and the worked example (2.5)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, Link, uniform_cluster
from algorithms.dispatch import SimState
from algorithms.graph import OpGraph
from algorithms.placement import Placement, check_schedule
from algorithms.placers.baseline import SinglePlacer
from algorithms.placers.thesis import HEFTPlacer, MITEPlacer
from algorithms.schedulers.thesis import (
    IDLE_BONUS,
    FIFOScheduler,
    MsrPolicy,
    MSRScheduler,
    PCTScheduler,
    path_computation_time,
)
from algorithms.sendrecv import insert_send_recv, makespan, traffic
from algorithms.simulator import simulate
from tests.strategies import random_clusters, random_dags

SCHEDULERS = [FIFOScheduler, PCTScheduler, MSRScheduler]
SIDS = [s.name for s in SCHEDULERS]


def example_2_5():
    """Section 2.5 reconstructed: Figure 2.3's graph (#ops as compute_s, speeds in ops per EU, 50-unit tensors).

    Device 0 (speed 10) runs n0 (30 ops), n1 (50), n6 (10), n8 (10); device 1 (speed 30) n2 (60), n3 (30); device 2
    (speed 40) n4 (40), n5 (80). n6 feeds n2 across a 25/EU link (2 EU), n8 feeds n4 across a 50/EU link (1 EU).
    """
    g = OpGraph("example-2.5")
    for n, ops in [("n0", 30), ("n1", 50), ("n6", 10), ("n8", 10), ("n2", 60), ("n3", 30), ("n4", 40), ("n5", 80)]:
        g.add_op(n, compute_s=ops, output_bytes=50)
    for a, b in [("n0", "n1"), ("n1", "n6"), ("n1", "n8"), ("n6", "n2"), ("n2", "n3"), ("n8", "n4"), ("n4", "n5")]:
        g.add_edge(a, b, bytes=50)
    cl = Cluster(
        [Device("d0", "CPU", 1e9, 10.0), Device("d1", "CPU", 1e9, 30.0), Device("d2", "CPU", 1e9, 40.0)],
        0.0,
        1.0,
        "parallel",
        {("d0", "d1"): Link(0.0, 25.0), ("d0", "d2"): Link(0.0, 50.0)},
        "ex",
    )
    p = Placement({"n0": "d0", "n1": "d0", "n6": "d0", "n8": "d0", "n2": "d1", "n3": "d1", "n4": "d2", "n5": "d2"})
    return g, cl, p


def test_worked_example_2_5_makespan_is_14_eu():
    """By hand: d0 runs n0 [0,3], n1 [3,8], n6 [8,9], n8 [9,10]; n6's tensor reaches d1 at 9 + 2 = 11, n8's
    reaches d2 at 10 + 1 = 11; d1 runs n2 [11,13], n3 [13,14]; d2 runs n4 [11,12], n5 [12,14]: 14 EU."""
    g, cl, p = example_2_5()
    g2, p2 = insert_send_recv(g, p)
    recv = sorted(op for op in g2.ops if g2.op(op)["type"] == "Recv")
    assert recv == ["n6/_recv/d1", "n8/_recv/d2"]
    table_2_1 = {"d0": ["n0", "n1", "n6", "n8"], "d1": ["n6/_recv/d1", "n2", "n3"], "d2": ["n8/_recv/d2", "n4", "n5"]}
    res = simulate(g2, cl, p2, schedule=table_2_1)
    assert res.makespan == pytest.approx(14.0)
    idx = g2.index()
    start = {n: res.start[idx.pos[n]] for n in idx.names}
    assert start["n6/_recv/d1"] == pytest.approx(11.0) and start["n8/_recv/d2"] == pytest.approx(11.0)
    assert makespan(g, cl, p, {"d0": ["n0", "n1", "n6", "n8"], "d1": ["n2", "n3"], "d2": ["n4", "n5"]}) == 14.0
    # every thesis scheduler finds Table 2.1's order here
    for S in SCHEDULERS:
        assert S().order(g2, cl, p2) == table_2_1
    assert traffic(g, p) == 100 and traffic(g2, p2) == 100


def test_pct_values_by_hand():
    """Eq. 5.1 on the 2.5 example: n5 = 2, n4 = 1 + 2, n3 = 1, n2 = 2 + 1, n8 = 1 + (1 + 3), n6 = 1 + (2 + 3),
    n1 = 5 + max(6, 5), n0 = 3 + 11 = 14 (= the makespan: the critical path has no slack)."""
    g, cl, p = example_2_5()
    idx = g.index()
    dev_of = [cl.index_of(p[n]) for n in idx.names]
    pct = dict(zip(idx.names, path_computation_time(g, cl, dev_of)))
    assert pct == pytest.approx({"n5": 2, "n4": 3, "n3": 1, "n2": 3, "n8": 5, "n6": 6, "n1": 11, "n0": 14})


def msr_graph():
    """p(1) -> p2(10) on d0; q(1) on d0 -> r(8) on d1. PCT prefers p (11 > 9); MSR prefers q because r becomes
    executable on the idle d1 (rank 1 + 1 + 1 + 5 = 8 against 1 + 0 + 1 + 0 = 2)."""
    g = OpGraph("msr")
    for n, o in [("p", 1), ("p2", 10), ("q", 1), ("r", 8)]:
        g.add_op(n, compute_s=o)
    g.add_edge("p", "p2")
    g.add_edge("q", "r")
    cl = uniform_cluster(2)
    pl = Placement({"p": "cpu0", "p2": "cpu0", "q": "cpu0", "r": "cpu1"})
    return g, cl, pl


def test_msr_ranks_with_idle_bonus_by_hand():
    g, cl, pl = msr_graph()
    idx = g.index()
    pos = idx.pos
    dev_of = [cl.index_of(pl[n]) for n in idx.names]
    pol = MsrPolicy()
    pol.prepare(g, cl, dev_of)
    unfinished = [len(idx.pred[i]) for i in range(idx.n)]
    ready = [[pos["p"], pos["q"]], []]
    state = SimState(0.0, dev_of, [0.0, 0.0], unfinished, ready)
    assert pol.successor_rank(pos["q"], state) == 1 + 1 + 1 + IDLE_BONUS
    assert pol.successor_rank(pos["p"], state) == 1 + 0 + 1 + 0
    assert ready[0][pol.choose(0, ready[0], state)] == pos["q"]
    busy = SimState(0.0, dev_of, [0.0, 5.0], unfinished, ready)  # d1 busy: no idle bonus
    assert pol.successor_rank(pos["q"], busy) == 3
    # a successor with another unfinished predecessor earns only the first two points
    unfinished2 = list(unfinished)
    unfinished2[pos["r"]] = 2
    assert pol.successor_rank(pos["q"], SimState(0.0, dev_of, [0.0, 0.0], unfinished2, ready)) == 2


def test_msr_beats_pct_where_a_successor_wakes_an_idle_device():
    g, cl, pl = msr_graph()
    pct = PCTScheduler().order(g, cl, pl)
    msr = MSRScheduler().order(g, cl, pl)
    assert pct["cpu0"] == ["p", "p2", "q"]
    assert msr["cpu0"] == ["q", "p", "p2"]
    assert makespan(g, cl, pl, pct) == pytest.approx(20.0)  # r runs [12, 20]
    assert makespan(g, cl, pl, msr) == pytest.approx(12.0)  # r runs [1, 9], p2 [2, 12]


def test_msr_tie_breaks_by_pct():
    g = OpGraph("tie")
    for n, o in [("a", 1), ("b", 1), ("a2", 5), ("b2", 1)]:
        g.add_op(n, compute_s=o)
    g.add_edge("a", "a2")
    g.add_edge("b", "b2")
    cl = uniform_cluster(1)
    pl = Placement({n: "cpu0" for n in g.ops})
    # equal successor ranks (2 each); PCT(a) = 6 > PCT(b) = 2
    assert MSRScheduler().order(g, cl, pl)["cpu0"][0] == "a"


def test_fifo_runs_in_readiness_order():
    g = OpGraph("fifo")
    for n, o in [("a", 1), ("b", 1), ("c", 5), ("d", 1)]:
        g.add_op(n, compute_s=o)
    g.add_edge("a", "d")
    cl = uniform_cluster(1)
    pl = Placement({n: "cpu0" for n in g.ops})
    # a, b, c ready at 0 in that order; d ready at 1 -> after c
    assert FIFOScheduler().order(g, cl, pl)["cpu0"] == ["a", "b", "c", "d"]
    assert PCTScheduler().order(g, cl, pl)["cpu0"] == ["c", "a", "b", "d"]


def test_run_returns_the_decision_log():
    g, cl, pl = msr_graph()
    res = MSRScheduler().run(g, cl, pl)
    assert [(t, d, k) for t, d, k in res.decisions][:1] == [(0.0, "cpu0", 2)]
    assert sum(1 for _ in res.decisions) == 4


# ---------------------------------------------------------------------------------------------- send / receive
def test_send_recv_one_pair_per_producer_and_device():
    g = OpGraph("sr")
    g.add_op("u", output_bytes=8)
    for v in ("v1", "v2", "w"):
        g.add_op(v)
        g.add_edge("u", v, bytes=8)
    pl = Placement({"u": "a", "v1": "b", "v2": "b", "w": "c"})
    g2, p2 = insert_send_recv(g, pl, send_ops=True)
    assert p2.info["send_recv_pairs"] == 2
    assert set(g2.successors("u")) == {"u/_send/b", "u/_send/c"}
    assert set(g2.successors("u/_recv/b")) == {"v1", "v2"}
    assert p2["u/_send/b"] == "a" and p2["u/_recv/b"] == "b"
    assert traffic(g, pl) == 24  # eq. 2.2 on the original graph: every cut edge
    assert traffic(g2, p2) == 16  # after insertion: once per (producer, device)
    assert len(g) == 4 and g.number_of_edges() == 3  # input untouched


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(max_ops=25), cluster=random_clusters(hetero=True), seed=st.integers(0, 10_000))
def test_property_send_recv_traffic_matches_simulator(graph, cluster, seed):
    rng = random.Random(seed)
    pl = Placement({op: rng.choice(cluster.names) for op in graph.ops})
    g2, p2 = insert_send_recv(graph, pl)
    sim = simulate(graph, cluster, pl)
    assert traffic(g2, p2) == pytest.approx(sim.traffic_bytes)
    assert traffic(graph, pl) == pytest.approx(sim.cut_edge_bytes)
    cross = [(u, v) for u, v, _ in g2.edges() if p2[u] != p2[v]]
    assert all(g2.op(v)["type"] == "Recv" for _, v in cross)
    assert len(cross) == len({(u, p2[v]) for u, v in cross})


# ---------------------------------------------------------------------------------------------- properties
@st.composite
def placed(draw):
    graph = draw(random_dags(max_ops=30, training=draw(st.booleans())))
    cluster = draw(random_clusters(hetero=True))
    kind = draw(st.sampled_from(["random", "single", "heft"]))
    if kind == "random":
        rng = random.Random(draw(st.integers(0, 10_000)))
        pl = Placement({op: rng.choice(cluster.names) for op in graph.ops})
    elif kind == "single":
        pl = SinglePlacer().place(graph, cluster)
    else:
        pl = HEFTPlacer().place(graph, cluster.with_memory(math.inf))
    return graph, cluster, pl


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=placed())
def test_property_orders_are_valid_and_replay_to_the_same_run(case):
    """Every scheduler, on random, single-device and HEFT placements: the order is a valid schedule and replays
    in the simulator to the very same run."""
    graph, cluster, pl = case
    for scheduler in SCHEDULERS:
        s = scheduler()
        res = s.run(graph, cluster, pl)
        order = s.order(graph, cluster, pl)
        assert set(order) == set(cluster.names)
        check_schedule(graph, pl, order)
        replay = simulate(graph, cluster, pl, schedule=order)
        assert replay.makespan == res.makespan, scheduler.name
        assert replay.start == res.start, scheduler.name
        assert replay.order == res.order, scheduler.name


def test_schedulers_work_on_thesis_placements_of_a_training_graph():
    from algorithms.workloads.synthetic import level_dag, thesis_devices

    g = level_dag(levels=12, colocated_fraction=0.2, training=True, memory_unit_bytes=1e3, seed=3)
    cl = thesis_devices(5, seed=2)
    pl = MITEPlacer().place(g, cl)
    spans = {}
    for S in SCHEDULERS:
        order = S().order(g, cl, pl)
        spans[S.name] = makespan(g, cl, pl, order)
    assert all(v > 0 for v in spans.values())


def _other_placers():
    from algorithms.placers.baechi import METFPlacer, MSCTPlacer, MTOPOPlacer
    from algorithms.placers.celeritas import CeleritasPlacer, OrderPlacePlacer

    return [METFPlacer, MSCTPlacer, MTOPOPlacer, CeleritasPlacer, OrderPlacePlacer]


@pytest.mark.parametrize("placer", _other_placers(), ids=lambda p: getattr(p, "name", p.__name__))
def test_schedulers_on_baechi_and_celeritas_placements(placer):
    """The thesis' schedulers order any placement, including the other seeds' placers'."""
    from algorithms.workloads.synthetic import level_dag

    g = level_dag(levels=10, colocated_fraction=0.2, training=True, memory_unit_bytes=1e3, seed=5)
    cl = uniform_cluster(4, memory_bytes=1e12, latency_s=1e-5, bytes_per_s=1e9)
    pl = placer().place(g, cl)
    for S in SCHEDULERS:
        res = S().run(g, cl, pl)
        order = S().order(g, cl, pl)
        check_schedule(g, pl, order)
        assert simulate(g, cl, pl, schedule=order).makespan == res.makespan
