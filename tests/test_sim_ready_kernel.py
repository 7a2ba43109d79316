"""Issue 22: the simulator's readiness order compiled (`sim_kernel.simulate_ready`: no static order, FIFO or a
`RankPolicy`) gives exactly the `SimResult` of the Python loop, which stays the reference: times, order,
transfers, memory timeline, peaks, traffic, the first OOM; parallel and sequential communication, tight
memory, receive buffers at arrival or step start, colocated ops on one device, zero-cost ops (ties at one
instant), ranks with ties and infinities.  Shared host cores, message overheads and recorded decisions stay
with the Python loop (checked here to give the same result whatever the threshold)."""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms import simulator
from algorithms.cluster import Cluster, Device
from algorithms.dispatch import FifoPolicy, RankPolicy
from algorithms.errors import LabError
from algorithms.memory import single_device_need
from algorithms.schedulers.thesis import FIFOScheduler
from algorithms.simulator import simulate
from tests.strategies import random_dags

pytest.importorskip("algorithms.sim_kernel")  # needs numba


def _both(monkeypatch, *args, **kw):
    """The result (as a dict) or the error of `simulate` through the Python loop, then the compiled one."""
    out = []
    for threshold in (math.inf, 0):
        monkeypatch.setattr(simulator, "COMPILED_MIN_OPS", threshold)
        try:
            out.append(asdict(simulate(*args, **kw)))
        except LabError as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    return out


def _setting(g, n_dev, frac, mode, latency, data):
    need = single_device_need(g) or 1.0
    devs = [
        Device(f"d{k}", memory_bytes=need * frac, speed=data.draw(st.sampled_from([1.0, 2.5]))) for k in range(n_dev)
    ]
    cl = Cluster(devs, latency_s=latency, bytes_per_s=1e3, mode=mode)
    names = g.index().names
    assign: dict[str, str] = {}
    group_dev: dict[str, str] = {}
    for o in names:  # colocated ops on one device, as a placer puts them
        d = f"d{data.draw(st.integers(0, n_dev - 1))}"
        grp = g.op(o).get("colocation")
        assign[o] = group_dev.setdefault(grp, d) if grp is not None else d
    return cl, names, assign


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    g=random_dags(max_ops=30, training=True),
    n_dev=st.integers(1, 4),
    frac=st.sampled_from([0.3, 0.7, 2.0]),
    mode=st.sampled_from(["parallel", "sequential"]),
    latency=st.sampled_from([0.0, 1e-3]),
    buffers=st.sampled_from(["arrival", "step_start"]),
    record=st.booleans(),
    policy=st.sampled_from(["none", "fifo", "rank"]),
    data=st.data(),
)
def test_ready_compiled_equals_python(monkeypatch, g, n_dev, frac, mode, latency, buffers, record, policy, data):
    cl, names, assign = _setting(g, n_dev, frac, mode, latency, data)
    pol = None
    if policy == "fifo":
        pol = FifoPolicy()
    elif policy == "rank":  # ties, infinities and ops without a rank (infinite) included
        values = st.sampled_from([0.0, 1.0, 2.0, -1.0, math.inf, -math.inf, 0.5])
        rank = {o: data.draw(values) for o in names if data.draw(st.integers(0, 5))}
        pol = RankPolicy(rank)
    python, compiled = _both(monkeypatch, g, cl, assign, policy=pol, record_memory=record, recv_buffers=buffers)
    assert compiled == python


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    g=random_dags(max_ops=20, training=True),
    n_dev=st.integers(2, 4),
    mode=st.sampled_from(["parallel", "sequential"]),
    extra=st.sampled_from(["host_cores", "overheads", "decisions", "nan_rank"]),
    data=st.data(),
)
def test_python_only_modes_unchanged(monkeypatch, g, n_dev, mode, extra, data):
    """Shared host cores, message overheads, the decision log and NaN ranks take the Python loop at any size."""
    cl, names, assign = _setting(g, n_dev, 0.7, mode, 1e-3, data)
    kw: dict = {}
    if extra == "host_cores":
        kw["host_cores"] = 1
        kw["shared_core_reads"] = data.draw(st.sampled_from(["when_idle", "at_arrival"]))
    elif extra == "overheads":
        kw["send_overhead_s"] = 1e-3
        kw["recv_overhead_s"] = 2e-3
    elif extra == "decisions":
        kw["record_decisions"] = True
    else:
        kw["policy"] = RankPolicy({o: (math.nan if k % 2 else float(k)) for k, o in enumerate(names)})
    python, compiled = _both(monkeypatch, g, cl, assign, **kw)
    assert compiled == python


def test_fifo_scheduler_and_benchmark_graph(monkeypatch):
    """A benchmark graph (bench_scale's random training graph, 3,000 ops) on four devices: FIFO (no static
    order: hashing's case), a rank policy, and the FIFO scheduler's order, compiled and in Python."""
    from benchmarks.bench_scale import make_graph

    g = make_graph("random", 3000)
    names = g.index().names
    n_dev = 4
    devs = [Device(f"d{k}", memory_bytes=g.total_memory() / 50) for k in range(n_dev)]
    for mode in ("parallel", "sequential"):
        cl = Cluster(devs, latency_s=1.34e-4, bytes_per_s=5.7e9, mode=mode)
        assign = {o: f"d{k % n_dev}" for k, o in enumerate(sorted(names))}
        python, compiled = _both(monkeypatch, g, cl, assign)
        assert compiled == python
        assert isinstance(compiled, dict) and compiled["oom"] is not None  # memory binds
        rank = {o: float(k % 17) for k, o in enumerate(names)}
        python, compiled = _both(monkeypatch, g, cl, assign, policy=RankPolicy(rank))
        assert compiled == python
        orders = []
        for threshold in (math.inf, 0):
            monkeypatch.setattr(simulator, "COMPILED_MIN_OPS", threshold)
            orders.append(FIFOScheduler().order(g, cl, assign))
        assert orders[0] == orders[1]
