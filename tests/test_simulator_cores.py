"""The simulator's shared-core model (issue 16): devices whose workers share a host core take turns."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms import OpGraph, simulate, uniform_cluster
from algorithms.cluster import Cluster, Device, worker_cores
from algorithms.errors import InvalidCluster
from tests.strategies import random_dags


def two_chains(n=3, compute=1.0):
    g = OpGraph("two")
    for c in "ab":
        for i in range(n):
            g.add_op(f"{c}{i}", compute_s=compute)
        for i in range(n - 1):
            g.add_edge(f"{c}{i}", f"{c}{i + 1}")
    return g


def test_devices_sharing_one_core_take_turns():
    g = two_chains()
    c = uniform_cluster(2)
    pl = {op: ("cpu0" if op[0] == "a" else "cpu1") for op in g.ops}
    assert simulate(g, c, pl).makespan == pytest.approx(3.0)
    assert simulate(g, c, pl, host_cores=2).makespan == pytest.approx(3.0)  # one core each: unchanged
    shared = simulate(g, c, pl, host_cores=1)
    assert shared.makespan == pytest.approx(6.0)
    # round robin: the devices alternate
    starts = sorted((shared.start[i], shared.devices[shared.device_of[i]]) for i in range(len(shared.names)))
    assert [d for _, d in starts] == ["cpu0", "cpu1"] * 3


def test_four_workers_on_two_cores_pair_up():
    g = OpGraph("four")
    for k in range(4):
        g.add_op(f"o{k}", compute_s=1.0)
    c = uniform_cluster(4)
    pl = {f"o{k}": f"cpu{k}" for k in range(4)}
    # worker_cores wraps: cpu0 and cpu2 share core 0, cpu1 and cpu3 core 1
    assert worker_cores(c, range(2)) == [[0], [1], [0], [1]]
    r = simulate(g, c, pl, host_cores=2)
    assert r.makespan == pytest.approx(2.0)
    assert r.start[r.names.index("o0")] != r.start[r.names.index("o2")]


def test_bad_host_cores():
    with pytest.raises(InvalidCluster, match="host_cores"):
        simulate(two_chains(), uniform_cluster(2), {op: "cpu0" for op in two_chains().ops}, host_cores=0)


@settings(max_examples=40, deadline=None)
@given(random_dags(max_ops=20, colocation=False), st.integers(2, 4), st.integers(1, 6), st.randoms())
def test_shared_cores_properties(g, n_dev, host, rnd):
    devs = [Device(f"cpu{k}", cores=1 + (k % 2)) for k in range(n_dev)]
    c = Cluster(devs, latency_s=0.01, bytes_per_s=1e4)
    pl = {op: f"cpu{rnd.randrange(n_dev)}" for op in g.ops}
    free = simulate(g, c, pl)
    r = simulate(g, c, pl, host_cores=host)
    asked = sum(d.cores for d in devs)
    if host >= asked:
        assert r.makespan == free.makespan and r.start == free.start
        return
    # the same work is done, and each host core's work fits in the step
    assert r.busy_s == pytest.approx(free.busy_s)
    cores = worker_cores(c, range(host))
    for core in range(host):
        work = sum(r.end[i] - r.start[i] for i in range(len(r.names)) if core in cores[r.device_of[i]])
        assert r.makespan >= work - 1e-9
    # no two ops whose workers share a core overlap in time
    spans = [(r.start[i], r.end[i], set(cores[r.device_of[i]])) for i in range(len(r.names)) if r.end[i] > r.start[i]]
    for a in range(len(spans)):
        for b in range(a + 1, len(spans)):
            s1, e1, c1 = spans[a]
            s2, e2, c2 = spans[b]
            if c1 & c2:
                assert e1 <= s2 + 1e-9 or e2 <= s1 + 1e-9
    # on one host core everything runs one op at a time
    if host == 1:
        total = sum(e - s for s, e, _ in spans)
        assert r.makespan >= total - 1e-9


def _pair() -> tuple[OpGraph, Any, dict[str, str]]:
    """a (1 s, 10 bytes out) on cpu0 feeding b (1 s) on cpu1 of a two-device cluster."""
    g = OpGraph("pair")
    g.add_op("a", compute_s=1.0, output_bytes=10)
    g.add_op("b", compute_s=1.0)
    g.add_edge("a", "b", bytes=10)
    return g, uniform_cluster(2), {"a": "cpu0", "b": "cpu1"}


def test_message_overheads():
    g, c, pl = _pair()
    assert simulate(g, c, pl).makespan == pytest.approx(2.0)
    r = simulate(g, c, pl, send_overhead_s=0.1, recv_overhead_s=0.2)
    assert r.makespan == pytest.approx(2.3)  # the sender's op pays the send, the consumer the receive
    assert r.busy_s == pytest.approx({"cpu0": 1.1, "cpu1": 1.2})
    # on one device nothing is sent: no overhead
    one = {"a": "cpu0", "b": "cpu0"}
    assert simulate(g, c, one, send_overhead_s=0.1, recv_overhead_s=1.5).makespan == pytest.approx(2.0)
    with pytest.raises(InvalidCluster):
        simulate(g, c, pl, send_overhead_s=-1.0)
    # a value with two consumers on the receiving device is received once, by the first in the static order
    g.add_op("c", compute_s=1.0)
    g.add_edge("a", "c", bytes=10)
    pl3 = {**pl, "c": "cpu1"}
    r = simulate(g, c, pl3, {"cpu0": ["a"], "cpu1": ["c", "b"]}, send_overhead_s=0.1, recv_overhead_s=0.2)
    assert r.makespan == pytest.approx(3.3) and r.busy_s["cpu1"] == pytest.approx(2.2)
    dur = {o: e - s for o, s, e in zip(r.names, r.start, r.end)}
    assert dur["c"] == pytest.approx(1.2) and dur["b"] == pytest.approx(1.0)


def test_per_byte_message_overheads():
    """`send_byte_s` / `recv_byte_s` charge the sender's op and the first consumer per byte of the message (the
    transfer's bytes), on top of the per-message costs; nothing on one device; negative or NaN refused."""
    g, c, pl = _pair()  # a sends 10 bytes to b
    r = simulate(g, c, pl, send_byte_s=0.01, recv_byte_s=0.02)
    assert r.busy_s == pytest.approx({"cpu0": 1.1, "cpu1": 1.2}) and r.makespan == pytest.approx(2.3)
    both = simulate(g, c, pl, send_overhead_s=0.1, recv_overhead_s=0.2, send_byte_s=0.01, recv_byte_s=0.02)
    assert both.busy_s == pytest.approx({"cpu0": 1.2, "cpu1": 1.4})
    # a larger message costs more
    g.add_op("big", compute_s=1.0, output_bytes=1000)
    g.add_op("use", compute_s=1.0)
    g.add_edge("big", "use", bytes=1000)
    pl2 = {**pl, "big": "cpu0", "use": "cpu1"}
    r2 = simulate(g, c, pl2, send_byte_s=1e-4)
    dur = {o: e - s for o, s, e in zip(r2.names, r2.start, r2.end)}
    assert dur["big"] == pytest.approx(1.1) and dur["a"] == pytest.approx(1.001) and dur["use"] == pytest.approx(1.0)
    one = {o: "cpu0" for o in g.ops}
    assert simulate(g, c, one, send_byte_s=1.0, recv_byte_s=1.0).makespan == pytest.approx(4.0)
    for bad in (-1e-9, float("nan")):
        with pytest.raises(InvalidCluster, match="per-byte"):
            simulate(g, c, pl2, recv_byte_s=bad)


def test_receive_buffers_held_from_the_step_start():
    g, c, pl = _pair()
    late = simulate(g, c, pl)
    early = simulate(g, c, pl, recv_buffers="step_start")
    assert late.peak_memory == early.peak_memory == {"cpu0": 10.0, "cpu1": 10.0}
    assert late.makespan == early.makespan
    # on the receiver the copy is taken at its arrival (after a's second), or at 0 with up-front receives
    assert min(t for t, m in late.memory_timeline["cpu1"] if m > 0) == pytest.approx(1.0)
    assert min(t for t, m in early.memory_timeline["cpu1"] if m > 0) == 0.0
    with pytest.raises(InvalidCluster, match="recv_buffers"):
        simulate(g, c, pl, recv_buffers="later")
    # the cluster's policy is the default (the placers' replays simulate the cluster they place on)
    held = replace(c, recv_buffers="step_start")
    assert simulate(g, held, pl).memory_timeline == early.memory_timeline
    assert simulate(g, held, pl, recv_buffers="arrival").memory_timeline == late.memory_timeline
    # it survives the cluster's copies and its config, which writes it only where it is not the default
    for copy in (held.with_memory(20.0), held.scaled(0.5), held.with_comm(0.1, 1e3)):
        assert copy.recv_buffers == "step_start"
    assert "recv_buffers" not in c.to_dict()["comm"]
    assert Cluster.from_dict(held.to_dict()).recv_buffers == "step_start"
    with pytest.raises(InvalidCluster, match="recv_buffers"):
        replace(c, recv_buffers="later")
    with pytest.raises(InvalidCluster, match="recv_buffers"):
        Cluster.from_dict({**c.to_dict(), "comm": {"recv_buffers": "soon"}})


def _message_into_a_busy_core() -> tuple[OpGraph, Any, dict[str, str]]:
    """cpu1 sends to cpu0 while cpu2, which shares cpu0's core, runs a chain of three 1 s ops."""
    g = OpGraph("busy")
    g.add_op("s", compute_s=0.5)
    g.add_op("r", compute_s=1.0)
    g.add_edge("s", "r", bytes=1.0)
    for k in range(3):
        g.add_op(f"m{k}", compute_s=1.0)
    g.add_edge("m0", "m1")
    g.add_edge("m1", "m2")
    c = uniform_cluster(4, latency_s=0.1)
    pl = {"s": "cpu1", "r": "cpu0", "m0": "cpu2", "m1": "cpu2", "m2": "cpu2"}
    return g, c, pl


def test_a_message_to_a_shared_core_is_read_when_the_core_idles():
    """Read when the core idles: the bytes arrive at 0.6 s, but cpu2 keeps the shared core busy until 3 s, so r
    is ready, and starts, only then; read on arrival (the default), r takes its turn when m0 ends."""
    g, c, pl = _message_into_a_busy_core()
    idle = simulate(g, c, pl, host_cores=2, shared_core_reads="when_idle")
    assert idle.start[idle.names.index("r")] == pytest.approx(3.0)
    assert idle.transfers[0][4] == pytest.approx(0.6)  # the transfer itself ends on arrival
    # read at arrival: r is ready at 0.6 and takes its turn when m0 ends (round robin)
    now = simulate(g, c, pl, host_cores=2)  # the default
    assert now.start[now.names.index("r")] == pytest.approx(1.0)
    # unshared cores (one per device): both rules read at arrival
    for rule in ("when_idle", "at_arrival"):
        r = simulate(g, c, pl, host_cores=4, shared_core_reads=rule)
        assert r.start[r.names.index("r")] == pytest.approx(0.6)
    with pytest.raises(InvalidCluster, match="shared_core_reads"):
        simulate(g, c, pl, host_cores=2, shared_core_reads="soon")


@settings(max_examples=40, deadline=None)
@given(random_dags(max_ops=14), st.integers(0, 2**16))
def test_deferred_reads_run_every_op_and_change_nothing_on_unshared_cores(g, seed):
    """Random graphs and placements over four devices: on two cores every op runs under both rules (a
    deferred read never deadlocks); on four cores (none shared) the two rules give the same step."""
    import random

    rnd = random.Random(seed)
    c = uniform_cluster(4, latency_s=1e-3, bytes_per_s=1e6)
    pl = {op: f"cpu{rnd.randrange(4)}" for op in g.ops}
    for rule in ("when_idle", "at_arrival"):
        r = simulate(g, c, pl, host_cores=2, shared_core_reads=rule)
        assert all(s == s for s in r.start), rule  # no NaN: every op ran
        assert r.makespan >= max(r.end)
    a = simulate(g, c, pl, host_cores=4, shared_core_reads="when_idle")
    b = simulate(g, c, pl, host_cores=4, shared_core_reads="at_arrival")
    assert a.start == b.start and a.makespan == b.makespan


# ------------------------------------------------------------------ the charge for time-sharing a core
def test_an_op_pays_the_shared_core_slowdown_while_another_worker_waits_for_its_core():
    """Two chains on devices sharing one core alternate: every op but the last starts while the other device has
    an executable op waiting and runs 1.35 times longer; the last runs alone at its cost."""
    g = two_chains()
    c = uniform_cluster(2)
    pl = {op: ("cpu0" if op[0] == "a" else "cpu1") for op in g.ops}
    for sched in (None, {"cpu0": ["a0", "a1", "a2"], "cpu1": ["b0", "b1", "b2"]}):
        r = simulate(g, c, pl, sched, host_cores=1, shared_core_slowdown=0.35)
        assert r.makespan == pytest.approx(5 * 1.35 + 1.0)
        durations = sorted(r.end[i] - r.start[i] for i in range(len(r.names)))
        assert durations == pytest.approx([1.0] + [1.35] * 5)
        assert sum(r.busy_s.values()) == pytest.approx(5 * 1.35 + 1.0)  # the charge is busy time
        # one core each: nothing is shared, nothing is charged
        assert simulate(g, c, pl, sched, host_cores=2, shared_core_slowdown=0.35).makespan == pytest.approx(3.0)
        assert simulate(g, c, pl, sched, shared_core_slowdown=0.35).makespan == pytest.approx(3.0)


def test_a_chain_across_devices_sharing_a_core_pays_no_slowdown():
    """A chain alternating between two devices on one core: when an op starts the other device waits for its
    input, not for the core, so the workers never contend and no op is charged."""
    g = OpGraph("chain")
    for k in range(4):
        g.add_op(f"o{k}", compute_s=1.0)
    for k in range(3):
        g.add_edge(f"o{k}", f"o{k + 1}")
    c = uniform_cluster(2, latency_s=0.0)
    pl = {f"o{k}": f"cpu{k % 2}" for k in range(4)}
    assert simulate(g, c, pl, host_cores=1, shared_core_slowdown=0.35).makespan == pytest.approx(4.0)


@pytest.mark.parametrize("bad", [-0.1, float("nan")])
def test_bad_shared_core_slowdown(bad):
    g = two_chains()
    with pytest.raises(InvalidCluster, match="shared_core_slowdown"):
        simulate(g, uniform_cluster(2), {op: "cpu0" for op in g.ops}, shared_core_slowdown=bad)


@settings(max_examples=40, deadline=None)
@given(random_dags(max_ops=16), st.integers(0, 2**16), st.sampled_from([0.1, 0.35, 1.0]))
def test_shared_core_slowdown_properties(g, seed, slow):
    """Random graphs and placements over four devices: on two cores every op runs, taking its cost or its cost
    times (1 + slowdown); on four cores (none shared) the charge changes nothing."""
    import random

    rnd = random.Random(seed)
    c = uniform_cluster(4, latency_s=1e-3, bytes_per_s=1e6)
    pl = {op: f"cpu{rnd.randrange(4)}" for op in g.ops}
    base = simulate(g, c, pl, host_cores=4)
    assert simulate(g, c, pl, host_cores=4, shared_core_slowdown=slow).start == base.start
    r = simulate(g, c, pl, host_cores=2, shared_core_slowdown=slow)
    idx = g.index()
    for i, name in enumerate(r.names):
        cost = idx.compute_s[idx.pos[name]]
        assert r.end[i] - r.start[i] in (pytest.approx(cost), pytest.approx(cost * (1 + slow))), name


# ------------------------------------------------------------------ receives read by an idle-class transport thread
def _gap_then_message() -> tuple[OpGraph, Any, dict[str, str], dict[str, list[str]]]:
    """cpu1 runs c1, waits for x (cpu0, 3 s) to run c2, then b, which reads a's 10-byte message (cpu0, 0.5 s):
    the message arrives at 0.5 s, while cpu1 is idle from 1 s to 3 s."""
    g = OpGraph("gap")
    for name, cost in (("a", 0.5), ("x", 3.0), ("c1", 1.0), ("c2", 1.0), ("b", 1.0)):
        g.add_op(name, compute_s=cost)
    g.add_edge("a", "b", bytes=10)
    g.add_edge("x", "c2", bytes=0)
    g.add_edge("c1", "c2")
    g.add_edge("c2", "b")
    c = uniform_cluster(2, latency_s=0.0)
    pl = {"a": "cpu0", "x": "cpu0", "c1": "cpu1", "c2": "cpu1", "b": "cpu1"}
    return g, c, pl, {"cpu0": ["a", "x"], "cpu1": ["c1", "c2", "b"]}


def test_an_idle_class_thread_reads_a_message_in_the_receivers_idle_time():
    """`recv_work="when_idle"`: a's message (0.2 s of receive work) is read while cpu1 waits for x, not in b; x's
    own message (no bytes, 0.1 s per message) is read when it arrives, cpu1 idle, before c2 can start."""
    g, c, pl, order = _gap_then_message()
    costs = {"recv_overhead_s": 0.1, "recv_byte_s": 0.01}
    consumer = simulate(g, c, pl, order, **costs)
    idle = simulate(g, c, pl, order, recv_work="when_idle", **costs)
    start = {n: (consumer.start[i], idle.start[i]) for i, n in enumerate(idle.names)}
    # in_consumer: c2 at 3.5 (x ends at 3.5) runs 1.1 s, b runs 1.2 s: 3.5 + 1.1 + 1.2
    assert consumer.makespan == pytest.approx(5.8)
    # when_idle: a's read (0.2 s) at 1.0-1.2 s, x's read (0.1 s) at 3.5; c2 then 1 s and b 1 s
    assert start["c2"][1] == pytest.approx(3.6) and start["b"][1] == pytest.approx(4.6)
    assert idle.makespan == pytest.approx(5.6)
    # the same work: only where it is done moves
    assert sum(idle.busy_s.values()) == pytest.approx(sum(consumer.busy_s.values()))
    # bytes_when_idle: a's bytes (0.1 s) read at 1.0-1.1 s; the per-message 0.1 s stays in c2 and in b, and x's
    # message, which has no bytes, reaches c2 on arrival
    hybrid = simulate(g, c, pl, order, recv_work="bytes_when_idle", **costs)
    assert hybrid.start[hybrid.names.index("c2")] == pytest.approx(3.5)
    assert hybrid.start[hybrid.names.index("b")] == pytest.approx(4.6) and hybrid.makespan == pytest.approx(5.7)
    assert sum(hybrid.busy_s.values()) == pytest.approx(sum(consumer.busy_s.values()))
    # without receive costs the two models are one
    plain = simulate(g, c, pl, order, send_overhead_s=0.1)
    assert simulate(g, c, pl, order, send_overhead_s=0.1, recv_work="when_idle").start == plain.start


def test_a_chain_pays_its_reads_on_the_critical_path_either_way():
    """A chain across two devices: the receiver has nothing else to run, so it reads each message as it arrives,
    which is where the consumer model charges it too."""
    g = OpGraph("chain")
    for k in range(4):
        g.add_op(f"o{k}", compute_s=1.0)
    for k in range(3):
        g.add_edge(f"o{k}", f"o{k + 1}", bytes=100)
    c = uniform_cluster(2, latency_s=0.01)
    pl = {f"o{k}": f"cpu{k % 2}" for k in range(4)}
    costs = {"recv_overhead_s": 0.05, "recv_byte_s": 1e-3}
    a = simulate(g, c, pl, **costs)
    b = simulate(g, c, pl, recv_work="when_idle", **costs)
    assert a.makespan == pytest.approx(b.makespan)


def test_a_read_waits_while_the_cores_sharer_runs_ops():
    """cpu0 and cpu2 share core 0 on two host cores: the message to cpu0 arrives at 0.6 s while cpu2 runs its
    chain until 3 s; the idle-class thread reads it only then (0.5 s), and r starts at 3.5 s. On four cores
    it is read on arrival."""
    g, c, pl = _message_into_a_busy_core()
    shared = simulate(g, c, pl, host_cores=2, recv_overhead_s=0.5, recv_work="when_idle")
    assert shared.start[shared.names.index("r")] == pytest.approx(3.5)
    own = simulate(g, c, pl, host_cores=4, recv_overhead_s=0.5, recv_work="when_idle")
    assert own.start[own.names.index("r")] == pytest.approx(1.1)
    with pytest.raises(InvalidCluster, match="recv_work"):
        simulate(g, c, pl, recv_work="later")
    with pytest.raises(InvalidCluster, match="shared_core_reads"):
        simulate(g, c, pl, host_cores=2, recv_work="when_idle", shared_core_reads="when_idle")


@settings(max_examples=60, deadline=None)
@given(random_dags(max_ops=16), st.integers(0, 2**16), st.sampled_from([2, 4]))
def test_idle_reads_properties(g, seed, host):
    """Random graphs and placements over four devices on two or four cores: every op runs after its inputs (a
    remote one after its arrival), no two ops overlap on a core, and the processor time is the consumer model's."""
    import random

    rnd = random.Random(seed)
    c = uniform_cluster(4, latency_s=1e-3, bytes_per_s=1e6)
    pl = {op: f"cpu{rnd.randrange(4)}" for op in g.ops}
    costs = {"send_overhead_s": 1e-3, "recv_overhead_s": 2e-3, "recv_byte_s": 1e-6}
    base = simulate(g, c, pl, host_cores=host, **costs)
    for work in ("when_idle", "bytes_when_idle"):
        _check_idle_reads(g, c, pl, simulate(g, c, pl, host_cores=host, recv_work=work, **costs), base, host)


def _check_idle_reads(g, c, pl, r, base, host):
    assert sum(r.busy_s.values()) == pytest.approx(sum(base.busy_s.values()))
    pos = {n: i for i, n in enumerate(r.names)}
    arrival = {(producer, dst): end for producer, _, dst, _, end, _ in r.transfers}
    for u, v, _ in g.edges():
        if pl[u] == pl[v]:
            assert r.start[pos[v]] >= r.end[pos[u]] - 1e-12
        else:
            assert r.start[pos[v]] >= arrival[(u, pl[v])] - 1e-12
    cores = worker_cores(c, range(host))
    spans: dict[int, list[tuple[float, float]]] = {}
    for i in range(len(r.names)):
        for core in cores[r.device_of[i]]:
            spans.setdefault(core, []).append((r.start[i], r.end[i]))
    for s in spans.values():
        s.sort()
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(s, s[1:]))


# ------------------------------------------------------------------------------ a send that wakes its receiver
def test_a_send_to_an_idle_receiver_holds_the_sender_and_delays_the_message():
    """A ping-pong a (cpu0) -> b (cpu1) -> c (cpu0): each receiver waits idle, so each of the two sends pays the
    wake-up; with the receiver busy when the value leaves, the send does not."""
    g = OpGraph("pp")
    for o in "abc":
        g.add_op(o, compute_s=100e-6)
    g.add_edge("a", "b", 0)
    g.add_edge("b", "c", 0)
    c = uniform_cluster(2, latency_s=0.0, bytes_per_s=1e12)
    pl = {"a": "cpu0", "b": "cpu1", "c": "cpu0"}
    base = simulate(g, c, pl, send_overhead_s=10e-6, record_memory=False)
    woken = simulate(g, c, pl, send_overhead_s=10e-6, send_wake_s=30e-6, record_memory=False)
    assert woken.makespan == pytest.approx(base.makespan + 60e-6)
    assert woken.busy_s["cpu0"] == pytest.approx(base.busy_s["cpu0"] + 30e-6)  # a's send woke cpu1
    assert woken.busy_s["cpu1"] == pytest.approx(base.busy_s["cpu1"] + 30e-6)  # b's send woke cpu0
    arrive = {src: end for src, _, _, _, end, _ in woken.transfers}
    assert arrive["a"] == pytest.approx(110e-6 + 30e-6)  # the message leaves after the wake-up
    # cpu1 computing `side` when a's value leaves: that send wakes nobody; b's still wakes cpu0
    g.add_op("side", compute_s=500e-6)
    pl["side"] = "cpu1"
    order = {"cpu0": ["a", "c"], "cpu1": ["side", "b"]}
    base = simulate(g, c, pl, order, send_overhead_s=10e-6, record_memory=False)
    woken = simulate(g, c, pl, order, send_overhead_s=10e-6, send_wake_s=30e-6, record_memory=False)
    assert woken.makespan == pytest.approx(base.makespan + 30e-6)
    assert woken.busy_s["cpu0"] == pytest.approx(base.busy_s["cpu0"])


def test_a_send_to_a_device_on_the_senders_own_core_wakes_nobody():
    """cpu4 on two host cores: cpu0 and cpu2 share core 0, so a send from cpu0 to an idle cpu2 is on an awake
    core; to an idle cpu1 (core 1, idle) it pays the wake-up."""
    g = OpGraph("shared")
    g.add_op("a", compute_s=100e-6)
    g.add_op("b", compute_s=100e-6)
    g.add_edge("a", "b", 0)
    c = uniform_cluster(4, latency_s=0.0, bytes_per_s=1e12)
    assert worker_cores(c, range(2))[0] == worker_cores(c, range(2))[2]
    same = simulate(g, c, {"a": "cpu0", "b": "cpu2"}, host_cores=2, send_wake_s=30e-6, record_memory=False)
    assert same.makespan == pytest.approx(200e-6)
    other = simulate(g, c, {"a": "cpu0", "b": "cpu1"}, host_cores=2, send_wake_s=30e-6, record_memory=False)
    assert other.makespan == pytest.approx(230e-6)


@pytest.mark.parametrize("bad", [-1e-6, float("nan")])
def test_bad_send_wake(bad):
    g, c, pl = _pair()
    with pytest.raises(InvalidCluster, match="send_wake_s"):
        simulate(g, c, pl, send_wake_s=bad)


@settings(max_examples=60, deadline=None)
@given(random_dags(max_ops=16), st.integers(0, 2**16), st.sampled_from([None, 2, 4]))
def test_send_wake_properties(g, seed, host):
    """Random graphs and placements over four devices: with no wake-up cost the step is the plain one; with one,
    the processor time grows by a whole number of wake-ups, at most one per message, every op still runs after
    its inputs arrive, and no two ops overlap on a core."""
    import random

    rnd = random.Random(seed)
    c = uniform_cluster(4, latency_s=1e-3, bytes_per_s=1e6)
    pl = {op: f"cpu{rnd.randrange(4)}" for op in g.ops}
    costs = {"send_overhead_s": 1e-3, "recv_overhead_s": 2e-3}
    base = simulate(g, c, pl, host_cores=host, **costs)
    assert simulate(g, c, pl, host_cores=host, send_wake_s=0.0, **costs).makespan == base.makespan
    w = 0.25
    r = simulate(g, c, pl, host_cores=host, send_wake_s=w, **costs)
    k = (sum(r.busy_s.values()) - sum(base.busy_s.values())) / w
    assert k == pytest.approx(round(k), abs=1e-6) and 0 <= round(k) <= len(r.transfers)
    _check_idle_reads(g, c, pl, r, r, host or 4)
