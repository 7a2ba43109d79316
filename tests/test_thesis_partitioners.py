"""The thesis' partitioners (seed 004, chapter 4): hand-worked instances and property tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, Link, uniform_cluster
from algorithms.errors import InfeasiblePlacement
from algorithms.graph import OpGraph
from algorithms.placement import check_placement
from algorithms.placers.thesis import (
    BatchSplitPlacer,
    CriticalPathPlacer,
    DFSPlacer,
    HashingPlacer,
    HEFTPlacer,
    IteratedCriticalPathPlacer,
    MITEPlacer,
)
from algorithms.placers.thesis.common import (
    AssignState,
    build_units,
    memory_by_device,
    operations_rank,
    operations_sink_rank,
    operations_source_rank,
    size_est,
    upward_rank,
)
from algorithms.placers.thesis.critical_path import critical_path
from algorithms.placers.thesis.mite import ZERO_TRAFFIC, MiteScorer
from algorithms.simulator import simulate
from tests.strategies import random_clusters, random_dags

ALL = [
    HashingPlacer,
    HEFTPlacer,
    BatchSplitPlacer,
    IteratedCriticalPathPlacer,
    CriticalPathPlacer,
    MITEPlacer,
    DFSPlacer,
]
IDS = [p.name for p in ALL]


# ---------------------------------------------------------------------------------------------- helpers
def chain_graph(ops, nbytes=1.0, name="chain"):
    g = OpGraph(name)
    for k, o in enumerate(ops):
        g.add_op(f"n{k}", compute_s=o, output_bytes=nbytes)
    for k in range(len(ops) - 1):
        g.add_edge(f"n{k}", f"n{k + 1}", bytes=nbytes)
    return g


def hetero3(mem=1000.0):
    """Three devices: d0 CPU speed 10, d1 GPU speed 20, d2 CPU speed 40; rates 10 / 20 / 40 bytes per second."""
    devs = [Device("d0", "CPU", mem, 10.0), Device("d1", "GPU", mem, 20.0), Device("d2", "CPU", mem, 40.0)]
    links = {("d0", "d1"): Link(0.0, 10.0), ("d0", "d2"): Link(0.0, 20.0), ("d1", "d2"): Link(0.0, 40.0)}
    return Cluster(devs, 0.0, 10.0, "parallel", links, "hetero3")


def assert_valid(graph, cluster, placement):
    check_placement(graph, cluster, placement)
    used = memory_by_device(graph, placement)
    for d in cluster.devices:
        assert used.get(d.name, 0.0) <= d.memory_bytes * (1 + 1e-9) + 1e-9, (d.name, used.get(d.name), d)


# ---------------------------------------------------------------------------------------------- common
def test_size_est_and_units():
    g = OpGraph("u")
    g.add_op("a", persistent_bytes=10, temporary_bytes=5, output_bytes=7)
    g.add_op("b", persistent_bytes=1, output_bytes=3, colocation="G", device_type="GPU")
    g.add_op("c", output_bytes=2, colocation="G")
    g.add_edge("a", "b", bytes=7)
    g.add_edge("a", "c", bytes=7)
    g.add_edge("b", "c", bytes=3)
    idx = g.index()
    assert size_est(idx, idx.pos["a"]) == 22  # 10 + 5 + 7, no inputs
    assert size_est(idx, idx.pos["b"]) == 1 + 3 + 7
    assert size_est(idx, idx.pos["c"]) == 2 + 7 + 3
    units, unit_of = build_units(g)
    assert [u.name for u in units] == ["a", "G"]
    grp = units[1]
    assert grp.is_group and grp.device_type == "GPU" and grp.size == 11 + 12
    assert unit_of[idx.pos["b"]] == unit_of[idx.pos["c"]] == 1


def test_operation_ranks_by_hand():
    # a(10) -> b(20), a -> c(30): source ranks 0, 10, 10; sink ranks 40, 20, 30; ranks 40, 30, 40
    g = OpGraph("r")
    for n, o in [("a", 10), ("b", 20), ("c", 30)]:
        g.add_op(n, compute_s=o)
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    idx = g.index()
    src = operations_source_rank(idx)
    sink = operations_sink_rank(idx)
    rank = operations_rank(idx)
    p = idx.pos
    assert [src[p[n]] for n in "abc"] == [0, 10, 10]
    assert [sink[p[n]] for n in "abc"] == [40, 20, 30]
    assert [rank[p[n]] for n in "abc"] == [40, 30, 40]


def test_upward_rank_by_hand():
    # speeds 1 and 2 -> speed_avr 1.5 (eq. 4.2); rate 2 -> c = bytes / 2
    g = OpGraph("h")
    g.add_op("a", compute_s=2, output_bytes=1)
    g.add_op("b", compute_s=4, output_bytes=1)
    g.add_op("c", compute_s=2, output_bytes=1)
    g.add_edge("a", "b", bytes=1)
    g.add_edge("a", "c", bytes=1)
    cl = Cluster([Device("d0", "CPU", math.inf, 1.0), Device("d1", "CPU", math.inf, 2.0)], 0.0, 2.0)
    rank, w, lat, rate = upward_rank(g, cl)
    p = g.index().pos
    assert rate == 2.0 and lat == 0.0
    assert rank[p["b"]] == pytest.approx(8 / 3)
    assert rank[p["c"]] == pytest.approx(4 / 3)
    assert rank[p["a"]] == pytest.approx(4 / 3 + 0.5 + 8 / 3)


# ---------------------------------------------------------------------------------------------- hashing
def test_hashing_round_robin_groups_first_and_skips_infeasible():
    g = OpGraph("hash")
    g.add_op("x0", persistent_bytes=1)
    g.add_op("g1", persistent_bytes=1, colocation="G")
    g.add_op("g2", persistent_bytes=1, colocation="G")
    g.add_op("x1", persistent_bytes=1, device_type="GPU")
    g.add_op("x2", persistent_bytes=1)
    cl = Cluster([Device("c0", "CPU", 10, 1), Device("c1", "CPU", 10, 1), Device("g0", "GPU", 10, 1)])
    p = HashingPlacer().place(g, cl)
    # group G first (hash 0 -> c0); then x0 (hash 1 -> c1), x1 (hash 2 -> g0), x2 (hash 3 % 3 = 0 -> c0)
    assert p.assignment == {"g1": "c0", "g2": "c0", "x0": "c1", "x1": "g0", "x2": "c0"}
    # x1 needs a GPU: with hash 0 it probes c0, c1, then g0
    g2 = OpGraph("hash2")
    g2.add_op("y", device_type="GPU")
    assert HashingPlacer().place(g2, cl).assignment == {"y": "g0"}


# ---------------------------------------------------------------------------------------------- HEFT
def test_heft_tiny_graph_by_hand():
    """a(2) -> b(4), a -> c(2); speeds 1 and 2; rate 2 bytes/s; 1-byte tensors.

    Order by upward rank: a (4.5), b (8/3), c (4/3). a: EFT d0 = 2, d1 = 1 -> d1 [0, 1]. b: d0: 1 + 0.5 + 4 =
    5.5, d1: 1 + 2 = 3 -> d1 [1, 3]. c: d0: 1.5 + 2 = 3.5, d1: 3 + 1 = 4 -> d0 [1.5, 3.5]. Makespan 3.5.
    """
    g = OpGraph("h")
    g.add_op("a", compute_s=2, output_bytes=1)
    g.add_op("b", compute_s=4, output_bytes=1)
    g.add_op("c", compute_s=2, output_bytes=1)
    g.add_edge("a", "b", bytes=1)
    g.add_edge("a", "c", bytes=1)
    cl = Cluster([Device("d0", "CPU", math.inf, 1.0), Device("d1", "CPU", math.inf, 2.0)], 0.0, 2.0)
    p = HEFTPlacer().place(g, cl)
    assert p.assignment == {"a": "d1", "b": "d1", "c": "d0"}
    assert p.order == {"d0": ["c"], "d1": ["a", "b"]}
    assert p.info["heft_makespan_s"] == pytest.approx(3.5)
    assert simulate(g, cl, p, schedule=p.order).makespan == pytest.approx(3.5)


def test_heft_insertion_fills_a_gap():
    """One device; x waits for a slow input from another device, leaving a gap that a later op fills.

    src(1) on GPU g0 (forced by device type) -> x(3) forced on CPU c0 through a 10 s transfer; y(2)
    independent, lower upward rank than x (2 < 3), also on c0: inserted at [0, 2] before x at [11, 14]; without
    insertion it is appended after x, [14, 16].
    """
    g = OpGraph("ins")
    g.add_op("src", compute_s=1, output_bytes=10, device_type="GPU")
    g.add_op("x", compute_s=3, device_type="CPU")
    g.add_op("y", compute_s=2, device_type="CPU")
    g.add_edge("src", "x", bytes=10)
    cl = Cluster([Device("c0", "CPU", math.inf, 1.0), Device("g0", "GPU", math.inf, 1.0)], 0.0, 1.0)
    p = HEFTPlacer().place(g, cl)
    assert p.order["c0"] == ["y", "x"]
    assert p.info["heft_makespan_s"] == pytest.approx(14.0)
    p2 = HEFTPlacer(insertion=False).place(g, cl)
    assert p2.order["c0"] == ["x", "y"]
    assert p2.info["heft_makespan_s"] == pytest.approx(16.0)


def test_heft_colocated_members_share_device_and_time_slots_follow_rank():
    g = OpGraph("col")
    g.add_op("a", compute_s=1, output_bytes=1)
    g.add_op("v", compute_s=1, output_bytes=1, colocation="G")
    g.add_op("u", compute_s=1, output_bytes=1, colocation="G")
    g.add_edge("a", "u", bytes=1)
    g.add_edge("v", "a", bytes=1)
    cl = uniform_cluster(3, bytes_per_s=1.0)
    p = HEFTPlacer().place(g, cl)
    assert p.assignment["u"] == p.assignment["v"]
    sim = simulate(g, cl, p, schedule=p.order)
    assert sim.makespan == pytest.approx(p.info["heft_makespan_s"])


# ---------------------------------------------------------------------------------------------- batch split
def test_batch_split_ranges_go_to_fastest_devices():
    # chain ranks are all equal (critical path) -> order by topo index; 4 ops, 2 devices -> ranges of 2
    g = OpGraph("bs")
    for k in range(4):
        g.add_op(f"n{k}", compute_s=1)
    g.add_edge("n0", "n1")
    g.add_op("iso", compute_s=0.5)  # rank 0.5: last
    cl = Cluster([Device("slow", "CPU", math.inf, 1.0), Device("fast", "CPU", math.inf, 5.0)])
    p = BatchSplitPlacer().place(g, cl)
    # ranks: n0, n1 = 2 (path of 2), n2, n3 = 1, iso = 0.5; 5 ops / 2 devices -> ranges of 3
    assert p.assignment == {"n0": "fast", "n1": "fast", "n2": "fast", "n3": "slow", "iso": "slow"}


# ---------------------------------------------------------------------------------------------- ICP / CP
def test_icp_keeps_the_critical_path_together_and_balances_exec_min():
    # long chain a-b-c (ops 5 each) and a short chain x-y (ops 1 each); two equal devices
    g = OpGraph("icp")
    for n, o in [("a", 5), ("b", 5), ("c", 5), ("x", 1), ("y", 1)]:
        g.add_op(n, compute_s=o, output_bytes=1)
    g.add_edge("a", "b", bytes=1)
    g.add_edge("b", "c", bytes=1)
    g.add_edge("x", "y", bytes=1)
    cl = uniform_cluster(2)
    p = IteratedCriticalPathPlacer().place(g, cl)
    # path 1 = a-b-c (15 ops) -> d0 (all exec_min 0, lowest index); path 2 = x-y -> d1 (exec_min 0 < 15)
    assert p.assignment == {"a": "cpu0", "b": "cpu0", "c": "cpu0", "x": "cpu1", "y": "cpu1"}
    assert p.info["paths"] == 2


def test_icp_splits_paths_at_assigned_nodes_and_type_changes():
    # a(9) -> b(9, GPU) -> c(9); side chain s(1) -> b. Path 1: a, b, c split by the GPU constraint of b.
    g = OpGraph("split")
    g.add_op("a", compute_s=9, output_bytes=1)
    g.add_op("b", compute_s=9, output_bytes=1, device_type="GPU")
    g.add_op("c", compute_s=9, output_bytes=1, device_type="CPU")
    g.add_op("s", compute_s=1, output_bytes=1)
    for u, v in [("a", "b"), ("b", "c"), ("s", "b")]:
        g.add_edge(u, v, bytes=1)
    cl = Cluster(
        [Device("c0", "CPU", math.inf, 1.0), Device("c1", "CPU", math.inf, 1.0), Device("g0", "GPU", math.inf, 1.0)]
    )
    p = IteratedCriticalPathPlacer().place(g, cl)
    # subpaths [a, b] (type GPU) and [c] (CPU): [a, b] -> g0, [c] -> c0; then [s] alone -> c1 (exec_min 0)
    assert p.assignment == {"a": "g0", "b": "g0", "c": "c0", "s": "c1"}


def test_icp_splits_a_path_that_does_not_fit():
    g = chain_graph([1, 1, 1, 1], nbytes=0)
    for n in g.ops:
        g.op(n)["persistent_bytes"] = 10
    g.invalidate()
    cl = uniform_cluster(2, memory_bytes=25)
    p = IteratedCriticalPathPlacer().place(g, cl)
    assert_valid(g, cl, p)
    assert sorted(memory_by_device(g, p).values()) == [20, 20]


def test_critical_path_on_fastest_feasible_device_rest_by_exec_min():
    g = OpGraph("cp")
    for n, o in [("a", 5), ("b", 5), ("x", 1), ("y", 1), ("z", 1)]:
        g.add_op(n, compute_s=o, output_bytes=1)
    g.add_edge("a", "b", bytes=1)
    cl = Cluster(
        [Device("s0", "CPU", math.inf, 1.0), Device("f", "CPU", math.inf, 10.0), Device("s1", "CPU", math.inf, 2.0)],
        0.0,
        1.0,
    )
    assert [g.index().names[i] for i in critical_path(g, cl)] == ["a", "b"]
    p = CriticalPathPlacer().place(g, cl)
    # a, b on f (exec_min 1.0); x -> s0 (0), y -> s1 (0), z -> s1 (0.5 < 1)
    assert p.assignment == {"a": "f", "b": "f", "x": "s0", "y": "s1", "z": "s1"}
    assert CriticalPathPlacer(rank="operations").place(g, cl).assignment == p.assignment


# ---------------------------------------------------------------------------------------------- MITE
def mite_graph():
    g = OpGraph("mite")
    g.add_op("a", compute_s=10, persistent_bytes=100, output_bytes=50)
    g.add_op("b", compute_s=20, persistent_bytes=100, output_bytes=50)
    g.add_op("c", compute_s=30, output_bytes=50)
    g.add_edge("a", "b", bytes=50)
    g.add_edge("a", "c", bytes=50)
    return g


def test_mite_equations_by_hand():
    """Factors of eq. 4.6 - 4.16 on a 3-op graph and 3 devices (see `hetero3`), worked out by hand."""
    g, cl = mite_graph(), hetero3()
    units, unit_of = build_units(g, cl)
    st_ = AssignState(g, cl, units, unit_of)
    sc = MiteScorer(st_)
    a, b, c = units
    assert sc.omax == 40
    # unit a: no neighbour placed -> t^ = 0 -> traffic 1; exec (0 + 10) / speed = 1, .5, .25 (e^ = 1);
    # memory all 0 -> m~ = 1 -> 0.1; importance 40 / 40 = 1 -> boost 1 - speed / 40 = .75, .5, 0
    f = sc.factors(a, [0, 1, 2])
    np.testing.assert_allclose(f.traffic, [1, 1, 1])
    np.testing.assert_allclose(f.exec_temp, [1, 0.5, 0.25])
    np.testing.assert_allclose(f.exec, [1, 0.5, 0.25])
    np.testing.assert_allclose(f.memory, [0.1, 0.1, 0.1])
    assert f.importance == 1.0
    np.testing.assert_allclose(f.boost, [0.75, 0.5, 0.0])
    np.testing.assert_allclose(f.heu, [0.075, 0.025, 0.0])
    sc.assign(a, 2)  # size_est(a) = 150 -> portion of d2 = 0.15
    # unit b: pred a on d2; traffic_temp = 50/20, 50/40, 0 -> t^ = 2.5 -> 1, .5, 1e-6
    # exec (0+20)/10, 20/20, (10+20)/40 = 2, 1, .75 -> /2; memory m~ = .15 -> .015, .015, .15
    # importance 30/40 = .75 -> boost 1 - .75 * (10, 20, 40) / 40 = .8125, .625, .25
    f = sc.factors(b, [0, 1, 2])
    np.testing.assert_allclose(f.traffic_temp, [2.5, 1.25, 0.0])
    np.testing.assert_allclose(f.traffic, [1.0, 0.5, ZERO_TRAFFIC])
    np.testing.assert_allclose(f.exec, [1.0, 0.5, 0.375])
    np.testing.assert_allclose(f.memory, [0.015, 0.015, 0.15])
    np.testing.assert_allclose(f.boost, [0.8125, 0.625, 0.25])
    np.testing.assert_allclose(f.heu, [0.0121875, 0.00234375, 1e-6 * 0.375 * 0.15 * 0.25])
    assert MITEPlacer().place(g, cl).assignment == {"a": "d2", "b": "d2", "c": "d2"}


def test_mite_send_receive_aggregation_conditions():
    g, cl = mite_graph(), hetero3()
    units, unit_of = build_units(g, cl)
    st_ = AssignState(g, cl, units, unit_of)
    sc = MiteScorer(st_)
    a, b, c = units
    sc.assign(a, 2)
    sc.assign(b, 0)
    # c: pred a on d2 already has successor b on d0 -> cond_pred(a, d0) = 0 (eq. 4.8)
    f = sc.factors(c, [0, 1, 2])
    np.testing.assert_allclose(f.traffic_temp, [0.0, 50 / 40, 0.0])
    np.testing.assert_allclose(f.traffic, [ZERO_TRAFFIC, 1.0, ZERO_TRAFFIC])
    # eq. 4.9: a producer with two successors on one device counts one transfer
    g2 = OpGraph("succ")
    g2.add_op("x", compute_s=1, output_bytes=50)
    g2.add_op("y", compute_s=1)
    g2.add_op("z", compute_s=1)
    g2.add_edge("x", "y", bytes=50)
    g2.add_edge("x", "z", bytes=50)
    units, unit_of = build_units(g2, cl)
    st2 = AssignState(g2, cl, units, unit_of)
    sc2 = MiteScorer(st2)
    sc2.assign(units[1], 1)
    sc2.assign(units[2], 1)
    np.testing.assert_allclose(sc2.traffic_temp(units[0]), [50 / 10, 0.0, 50 / 40])


def test_mite_group_traffic_is_summed_over_members_and_memory_factor_small_case():
    g = OpGraph("grp")
    g.add_op("p", compute_s=1, output_bytes=20)
    g.add_op("q", compute_s=1, output_bytes=40)
    g.add_op("m1", compute_s=1, colocation="G")
    g.add_op("m2", compute_s=1, colocation="G")
    g.add_edge("p", "m1", bytes=20)
    g.add_edge("q", "m2", bytes=40)
    g.add_edge("p", "m2", bytes=20)
    cl = hetero3()
    units, unit_of = build_units(g, cl)
    st_ = AssignState(g, cl, units, unit_of)
    sc = MiteScorer(st_)
    grp = next(u for u in units if u.is_group)
    sc.assign(units[unit_of[g.index().pos["p"]]], 0)
    sc.assign(units[unit_of[g.index().pos["q"]]], 2)
    # p (d0) feeds both members: one transfer of 20; q (d2) 40 bytes
    expect = [0 + 40 / 20, 20 / 10 + 40 / 40, 20 / 20 + 0]
    np.testing.assert_allclose(sc.traffic_temp(grp), expect)
    # memory: d0 holds p (20), d2 holds q (40) -> portions .02, 0, .04 -> d1 gets m~/10 = .002
    np.testing.assert_allclose(sc.memory_factor(), [0.02, 0.002, 0.04])


def test_dfs_follows_the_critical_path_and_minimises_traffic_times_exec():
    g, cl = mite_graph(), hetero3()
    p = DFSPlacer().place(g, cl)
    # a: traffic 1 everywhere, exec 1, .5, .25 -> d2; b: traffic 1, .5, 1e-6 -> d2; c likewise -> d2
    assert p.assignment == {"a": "d2", "b": "d2", "c": "d2"}


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("placer", ALL, ids=IDS)
def test_too_big_op_is_named(placer):
    g = chain_graph([1, 1, 1])
    g.op("n1")["persistent_bytes"] = 500
    g.invalidate()
    cl = uniform_cluster(3, memory_bytes=100)
    with pytest.raises(InfeasiblePlacement, match="op 'n1'"):
        placer().place(g, cl)


@pytest.mark.parametrize("placer", ALL, ids=IDS)
def test_too_big_group_is_named(placer):
    g = chain_graph([1, 1, 1, 1], nbytes=0)
    for n in ("n0", "n3"):
        g.op(n)["colocation"] = "big"
        g.op(n)["persistent_bytes"] = 60
    g.invalidate()
    cl = uniform_cluster(3, memory_bytes=100)
    with pytest.raises(InfeasiblePlacement, match="colocation group 'big'"):
        placer().place(g, cl)


@pytest.mark.parametrize("placer", ALL, ids=IDS)
def test_missing_device_type_is_named(placer):
    g = chain_graph([1, 1])
    g.op("n1")["device_type"] = "TPU"
    g.invalidate()
    with pytest.raises(InfeasiblePlacement, match="op 'n1' needs a TPU"):
        placer().place(g, uniform_cluster(2))


# ---------------------------------------------------------------------------------------------- properties
@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(max_ops=25, device_types=True), cluster=random_clusters(hetero=True, max_devices=5))
def test_property_constraints_or_clear_error(graph, cluster):
    """For every partitioner: device types, colocation and memory hold whenever it succeeds; otherwise the error
    names the unit (an op or a colocation group) that found no feasible device."""
    for placer in ALL:
        try:
            p = placer().place(graph, cluster)
        except InfeasiblePlacement as exc:
            msg = str(exc)
            assert "op '" in msg or "colocation group '" in msg, (placer.name, msg)
            continue
        assert_valid(graph, cluster, p)
        if p.order is not None:
            simulate(graph, cluster, p, schedule=p.order)


@st.composite
def roomy_cluster(draw):
    """A heterogeneous cluster with both CPU and GPU devices and memory for the whole graph on every device."""
    cl = draw(random_clusters(min_devices=2, hetero=True, max_devices=6, memory=1e9))
    devs = list(cl.devices)
    devs[0] = Device(devs[0].name, "CPU", devs[0].memory_bytes, devs[0].speed)
    devs[1] = Device(devs[1].name, "GPU", devs[1].memory_bytes, devs[1].speed)
    return Cluster(devs, cl.latency_s, cl.bytes_per_s, cl.mode, dict(cl.links), cl.name)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(max_ops=30, device_types=True, training=True), cluster=roomy_cluster())
def test_property_feasible_instances_are_placed(graph, cluster):
    """When every device could hold the whole graph and both device types exist, every partitioner succeeds."""
    for placer in ALL:
        p = placer().place(graph, cluster)
        assert_valid(graph, cluster, p)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_dags(max_ops=25, device_types=True), cluster=roomy_cluster())
def test_property_heft_order_replays_no_later_than_its_estimate(graph, cluster):
    """In parallel mode with one tensor size per producer, replaying HEFT's per-device order in the simulator
    never finishes later than HEFT's own timeline (the simulator starts every op as early as the order allows)."""
    cluster = Cluster(
        list(cluster.devices), cluster.latency_s, cluster.bytes_per_s, "parallel", dict(cluster.links), cluster.name
    )
    for insertion in (True, False):
        p = HEFTPlacer(insertion=insertion).place(graph, cluster)
        sim = simulate(graph, cluster, p, schedule=p.order)
        assert sim.makespan <= p.info["heft_makespan_s"] * (1 + 1e-9) + 1e-12


def test_mite_zero_traffic_factor_is_a_hyper_parameter():
    g, cl = mite_graph(), hetero3()
    units, unit_of = build_units(g, cl)
    st_ = AssignState(g, cl, units, unit_of)
    sc = MiteScorer(st_, zero_traffic=0.5)
    sc.assign(units[0], 2)
    np.testing.assert_allclose(sc.factors(units[1], [0, 1, 2]).traffic, [1.0, 0.5, 0.5])
    with pytest.raises(Exception, match="zero_traffic"):
        MITEPlacer(zero_traffic=0)
    assert DFSPlacer(zero_traffic=0.01).place(g, cl).assignment.keys() == set("abc")
