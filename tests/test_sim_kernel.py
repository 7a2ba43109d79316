"""Issue 22: the simulator's compiled loop (`algorithms.sim_kernel`, static orders) gives exactly the
`SimResult` of the Python loop: times, order, transfers, memory timeline, peaks, traffic, the first OOM, or the
same deadlock / NaN error; parallel and sequential communication, receive buffers at arrival or step start,
memory recorded or not.  (NaN times cannot be built: clusters and graphs refuse NaN costs.)"""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algorithms import simulator
from algorithms.cluster import Cluster, Device
from algorithms.errors import LabError
from algorithms.memory import single_device_need
from algorithms.simulator import simulate
from tests.strategies import random_dags

pytest.importorskip("algorithms.sim_kernel")  # needs numba


def _both(monkeypatch, *args, **kw):
    out = []
    for threshold in (math.inf, 0):
        monkeypatch.setattr(simulator, "COMPILED_MIN_OPS", threshold)
        try:
            out.append(asdict(simulate(*args, **kw)))
        except LabError as exc:
            out.append(f"{type(exc).__name__}: {exc}")
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    g=random_dags(max_ops=30, training=True),
    n_dev=st.integers(1, 4),
    frac=st.sampled_from([0.3, 0.7, 2.0]),
    mode=st.sampled_from(["parallel", "sequential"]),
    latency=st.sampled_from([0.0, 1e-3]),
    buffers=st.sampled_from(["arrival", "step_start"]),
    record=st.booleans(),
    data=st.data(),
)
def test_compiled_equals_python(monkeypatch, g, n_dev, frac, mode, latency, buffers, record, data):
    need = single_device_need(g) or 1.0
    devs = [Device(f"d{k}", memory_bytes=need * frac) for k in range(n_dev)]
    cl = Cluster(devs, latency_s=latency, bytes_per_s=1e3, mode=mode)
    names = g.index().names
    assign = {o: f"d{data.draw(st.integers(0, n_dev - 1))}" for o in names}
    order = {d.name: [o for o in names if assign[o] == d.name] for d in devs}
    if data.draw(st.booleans()):  # any order, deadlocks included
        order = {d: data.draw(st.permutations(ops)) for d, ops in order.items()}
    python, compiled = _both(monkeypatch, g, cl, assign, order, record_memory=record, recv_buffers=buffers)
    assert compiled == python
