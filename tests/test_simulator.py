"""The execution simulator: hand-worked cases and hypothesis properties on random DAGs."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms import InvalidSchedule, OpGraph, simulate, uniform_cluster
from algorithms.cluster import Cluster, Device
from algorithms.dispatch import RankPolicy
from algorithms.errors import InvalidCluster
from algorithms.placement import topological_schedule
from algorithms.sim_result import sim_result_from_dict, sim_result_to_dict
from tests.strategies import random_clusters, random_dags


def chain(n=3, compute=1.0, out=100):
    g = OpGraph("chain")
    for i in range(n):
        g.add_op(f"o{i}", compute_s=compute, output_bytes=out)
    for i in range(n - 1):
        g.add_edge(f"o{i}", f"o{i + 1}", bytes=out)
    return g


def test_chain_across_two_devices_pays_one_transfer():
    g = chain(2)
    c = uniform_cluster(2, latency_s=0.5, bytes_per_s=100.0)  # 100 bytes: 0.5 + 1.0 s
    r = simulate(g, c, {"o0": "cpu0", "o1": "cpu1"})
    assert r.start == [0.0, 2.5]
    assert r.makespan == pytest.approx(3.5)
    assert r.traffic_bytes == 100
    assert r.transfers == [("o0", "cpu0", "cpu1", 1.0, 2.5, 100)]


def test_tensor_sent_once_per_destination_device():
    g = OpGraph()
    g.add_op("p", compute_s=1, output_bytes=50)
    for k in range(3):
        g.add_op(f"c{k}", compute_s=1)
        g.add_edge("p", f"c{k}", bytes=50)
    c = uniform_cluster(2, latency_s=0.0, bytes_per_s=50.0)
    r = simulate(g, c, {"p": "cpu0", "c0": "cpu1", "c1": "cpu1", "c2": "cpu0"})
    assert len(r.transfers) == 1 and r.traffic_bytes == 50
    assert r.cut_edge_bytes == 100  # thesis eq. 2.2 counts every cut edge
    # c0 and c1 both wait for the single arrival at t=2 and then run one after the other
    assert sorted(r.start[r.names.index(x)] for x in ("c0", "c1")) == [2.0, 3.0]


def test_sequential_mode_serialises_sends_of_one_device():
    g = OpGraph()
    g.add_op("a", compute_s=1, output_bytes=100)
    g.add_op("b", compute_s=1, output_bytes=100)
    g.add_op("x", compute_s=1)
    g.add_op("y", compute_s=1)
    g.add_edge("a", "x", bytes=100)
    g.add_edge("b", "y", bytes=100)
    place = {"a": "d0", "b": "d0", "x": "d1", "y": "d2"}
    devs = [Device(f"d{i}") for i in range(3)]
    par = simulate(g, Cluster(devs, 0.0, 100.0, "parallel"), place)
    seq = simulate(g, Cluster(devs, 0.0, 100.0, "sequential"), place)
    # a ends at 1, b at 2; each transfer takes 1 s: no overlap either way here
    assert par.makespan == seq.makespan == pytest.approx(4.0)
    # now make both sends ready at once: one producer, two devices
    g2 = OpGraph()
    g2.add_op("p", compute_s=1, output_bytes=100)
    g2.add_op("x", compute_s=1)
    g2.add_op("y", compute_s=1)
    g2.add_edge("p", "x", bytes=100)
    g2.add_edge("p", "y", bytes=100)
    pl2 = {"p": "d0", "x": "d1", "y": "d2"}
    par = simulate(g2, Cluster(devs, 0.0, 100.0, "parallel"), pl2)
    seq = simulate(g2, Cluster(devs, 0.0, 100.0, "sequential"), pl2)
    assert par.makespan == pytest.approx(3.0)
    assert seq.makespan == pytest.approx(4.0)  # the second send waits for the first (FIFO)


def test_dynamic_memory_frees_outputs_after_last_consumer():
    g = OpGraph()
    g.add_op("w", compute_s=1, persistent_bytes=1000, output_bytes=10)
    g.add_op("a", compute_s=1, temporary_bytes=300, output_bytes=100)
    g.add_op("b", compute_s=1, output_bytes=5)
    g.add_edge("w", "a", bytes=10)
    g.add_edge("a", "b", bytes=100)
    c = uniform_cluster(1, memory_bytes=2000)
    r = simulate(g, c, {o: "cpu0" for o in g.ops})
    tl = r.memory_timeline["cpu0"]
    # w's output (10) is freed once a finishes; a's temp is freed at its end; a's output once b finishes
    assert r.peak_memory["cpu0"] == 1000 + 10 + 300 + 100
    assert tl[-1][1] == 1000  # only persistent memory left at the end
    assert r.oom is None


def test_oom_is_reported_with_op_device_and_time():
    g = chain(3, out=600)
    c = uniform_cluster(1, memory_bytes=1000)
    r = simulate(g, c, {o: "cpu0" for o in g.ops})
    assert r.oom is not None
    assert (r.oom.op, r.oom.device, r.oom.time_s) == ("o1", "cpu0", 1.0)
    assert r.peak_memory["cpu0"] == 1200
    assert "o1" in r.oom.message() and "cpu0" in r.oom.message()


def test_static_order_deadlock_names_the_op():
    g = chain(2)
    g.add_op("z", compute_s=1)
    c = uniform_cluster(1)
    with pytest.raises(InvalidSchedule, match="o1"):
        simulate(g, c, {o: "cpu0" for o in g.ops}, {"cpu0": ["o1", "o0", "z"]})


def test_schedule_missing_op_is_rejected():
    g = chain(2)
    with pytest.raises(InvalidSchedule, match="o1"):
        simulate(g, uniform_cluster(1), {o: "cpu0" for o in g.ops}, {"cpu0": ["o0"]})


def test_compute_by_type_and_speed():
    g = OpGraph()
    g.add_op("a", compute_s=4.0, compute_s_by_type={"GPU": 1.0})
    cl = Cluster([Device("c", "CPU", speed=2.0), Device("g", "GPU", speed=0.5)])
    assert simulate(g, cl, {"a": "c"}).makespan == 2.0
    assert simulate(g, cl, {"a": "g"}).makespan == 2.0


def test_policy_order_replays_as_static_schedule_and_roundtrips():
    rng = random.Random(3)
    from algorithms.workloads.synthetic import level_dag

    g = level_dag(levels=8, seed=3, training=True)
    c = uniform_cluster(3, latency_s=1e-4, bytes_per_s=1e8, mode="sequential")
    pl = {o: rng.choice(c.names) for o in g.ops}
    r1 = simulate(g, c, pl)
    r2 = simulate(g, c, pl, r1.order)
    assert r2.makespan == pytest.approx(r1.makespan)
    assert r2.peak_memory == pytest.approx(r1.peak_memory)
    r3 = sim_result_from_dict(sim_result_to_dict(r2))
    assert r3.makespan == r2.makespan and r3.order == r2.order
    rank = {o: k for k, o in enumerate(g.topological_order())}
    r4 = simulate(g, c, pl, policy=RankPolicy(rank))
    assert r4.makespan > 0


def _critical_path(g: OpGraph) -> float:
    idx = g.index()
    best = [0.0] * idx.n
    for i in range(idx.n):
        s = max((best[j] for j, _ in idx.pred[i]), default=0.0)
        best[i] = s + idx.compute_s[i]
    return max(best, default=0.0)


@settings(max_examples=60, deadline=None)
@given(g=random_dags(max_ops=25), c=random_clusters(max_devices=4), data=st.data())
def test_simulator_properties(g, c, data):
    names = c.names
    pl = {o: data.draw(st.sampled_from(names)) for o in g.ops}
    use_static = data.draw(st.booleans())
    r = simulate(g, c, pl, topological_schedule(g, pl, names) if use_static else None)
    idx = g.index()
    eps = 1e-9
    arrival = {(t[0], t[2]): t[4] for t in r.transfers}
    for i in range(idx.n):
        d = r.device_of[i]
        assert r.end[i] - r.start[i] == pytest.approx(idx.exec_time(i, c.devices[d].type, c.devices[d].speed))
        for j, _ in idx.pred[i]:
            if r.device_of[j] == d:
                assert r.start[i] >= r.end[j] - eps  # never before a local input is computed
            else:
                assert r.start[i] >= arrival[(idx.names[j], c.devices[d].name)] - eps  # or has arrived
    for d in range(len(c)):  # never two ops at once on one device
        spans = sorted((r.start[i], r.end[i]) for i in range(idx.n) if r.device_of[i] == d)
        for (_, e0), (s1, _) in zip(spans, spans[1:]):
            assert s1 >= e0 - eps
    for dev, tl in r.memory_timeline.items():  # memory never exceeds what is reported as peak
        assert max(m for _, m in tl) == pytest.approx(r.peak_memory[dev])
        assert tl[-1][1] >= -eps
    assert r.makespan >= _critical_path_exec(g, c, r) - eps


def _critical_path_exec(g, c, r):
    idx = g.index()
    best = [0.0] * idx.n
    for i in range(idx.n):
        d = c.devices[r.device_of[i]]
        best[i] = max((best[j] for j, _ in idx.pred[i]), default=0.0) + idx.exec_time(i, d.type, d.speed)
    return max(best, default=0.0)


@settings(max_examples=40, deadline=None)
@given(g=random_dags(max_ops=25))
def test_one_device_takes_the_sum_of_compute_times_and_at_least_the_critical_path(g):
    c = uniform_cluster(1)
    r = simulate(g, c, {o: "cpu0" for o in g.ops})
    total = sum(g.op(o)["compute_s"] for o in g.ops)
    assert r.makespan == pytest.approx(total)
    assert r.makespan >= _critical_path(g) - 1e-9
    assert r.traffic_bytes == 0


@settings(max_examples=40, deadline=None)
@given(g=random_dags(max_ops=20), data=st.data())
def test_never_below_critical_path_on_many_devices(g, data):
    c = uniform_cluster(4, latency_s=0.01, bytes_per_s=1000)
    pl = {o: data.draw(st.sampled_from(c.names)) for o in g.ops}
    r = simulate(g, c, pl)
    assert r.makespan >= _critical_path(g) - 1e-9
    assert not math.isnan(r.makespan)


def test_a_received_copy_takes_the_bytes_that_crossed():
    # v is a view (no storage of its own: output 0) of w's 100-byte tensor; its consumer c sits on another
    # device, which must hold the 100 bytes it receives until c has run
    g = OpGraph("view")
    g.add_op("w", compute_s=1.0, output_bytes=100)
    g.add_op("v", compute_s=1.0, output_bytes=0)
    g.add_op("c", compute_s=1.0, output_bytes=5)
    g.add_edge("w", "v", bytes=100)
    g.add_edge("v", "c", bytes=100)
    cl = uniform_cluster(2, latency_s=0.5)
    res = simulate(g, cl, {"w": "cpu0", "v": "cpu0", "c": "cpu1"})
    assert res.peak_memory["cpu1"] == pytest.approx(105.0)
    assert res.peak_memory["cpu0"] == pytest.approx(100.0)
    assert g.index().copy_bytes == [100.0, 100.0, 5.0]


def _pull_graph():
    """a (1 s) on cpu0 feeds b (1 s) on cpu1, which also runs c (2 s) that needs nothing."""
    g = OpGraph("pull")
    g.add_op("a", compute_s=1.0, output_bytes=100)
    g.add_op("b", compute_s=1.0)
    g.add_op("c", compute_s=2.0)
    g.add_edge("a", "b", bytes=100)
    return g, {"a": "cpu0", "b": "cpu1", "c": "cpu1"}


def test_pulled_receives_are_requested_when_the_receiver_first_idles():
    g, p = _pull_graph()
    c = uniform_cluster(2, latency_s=0.5, bytes_per_s=100.0)  # a transfer takes 0.5 + 1.0 s
    posted = simulate(g, c, p)
    assert posted.transfers == [("a", "cpu0", "cpu1", 1.0, 2.5, 100)]
    assert posted.makespan == pytest.approx(3.5)  # b waits for the arrival at 2.5
    pulled = simulate(g, c, p, recv_requests="when_idle")
    # cpu1 runs c first and idles at 2.0; its request crosses in 0.5 s; then the tensor's 1.5 s
    assert pulled.transfers == [("a", "cpu0", "cpu1", 2.5, 4.0, 100)]
    assert pulled.makespan == pytest.approx(5.0)
    # without local work the receiver asks at once: the same as a posted receive
    q = {"a": "cpu0", "b": "cpu1", "c": "cpu0"}
    assert simulate(g, c, q, recv_requests="when_idle").transfers == simulate(g, c, q).transfers


def test_a_tensor_produced_after_the_request_leaves_when_its_producer_ends():
    g, p = _pull_graph()
    g.nx.nodes["a"]["compute_s"] = 3.0  # ends after cpu1 asked (at 2.0)
    c = uniform_cluster(2, latency_s=0.5, bytes_per_s=100.0)
    r = simulate(g, c, p, recv_requests="when_idle")
    assert r.transfers == [("a", "cpu0", "cpu1", 3.0, 4.5, 100)]
    with pytest.raises(InvalidCluster, match="recv_requests"):
        simulate(g, c, p, recv_requests="sometimes")
