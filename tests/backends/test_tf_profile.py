"""TensorFlow backend: step-stats profiler (warm-up then traced steps, memory fields, multi-kernel ops counted
whole, profile at another batch size) and the communication micro-benchmark."""

from __future__ import annotations

import math

import pytest
from tensorflow.core.framework import step_stats_pb2

from algorithms.cluster import uniform_cluster
from backends.tensorflow import TFBackend
from backends.tensorflow.comm import fit_linear
from backends.tensorflow.config import load_model_cfg
from backends.tensorflow.profiler import allocation_peaks, parse_step_stats

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def backend() -> TFBackend:
    return TFBackend(inter_op_threads=2, intra_op_threads=1)


@pytest.fixture(scope="module")
def mlp(backend):
    m = backend.build(load_model_cfg("mlp_tiny", {"optimizer": "rmsprop"}))
    return m, backend.capture(m)


def test_profile_measures_every_op(backend, mlp):
    m, g = mlp
    p = backend.profile(m, g, warmup=2, steps=3)
    assert set(p.ops) == set(g.ops)
    assert all(p.op(n)["compute_s"] > 0 for n in p.ops if p.op(n)["type"] == "MatMul")
    # a step takes a fraction of a second: every op far below that
    assert all(0 <= a["compute_s"] < 0.5 for _, a in p.nx.nodes(data=True))
    # measured output memory: a MatMul allocates its output, a forwarding op (Identity) does not
    assert p.op("l0/MatMul")["output_bytes"] == 4 * 8 * 4
    idents = [n for n in p.ops if p.op(n)["type"] == "Identity"]
    assert idents and all(p.op(n)["output_bytes"] == 0 for n in idents)
    # persistent memory keeps the variables and the constants
    assert p.op("l0/kernel")["persistent_bytes"] == 16 * 8 * 4
    assert p.op("data/x")["persistent_bytes"] == 4 * 16 * 4
    # the input graph is left alone
    assert all(a["compute_s"] == 0 for _, a in g.nx.nodes(data=True))


def test_profile_calibrated_to_untraced_step(mlp):
    m, g = mlp
    be = TFBackend(intra_op_threads=1, profile_calibration="untraced_step")
    p = be.profile(m, g, warmup=2, steps=3)
    info = p.nx.graph["profile"]
    assert info["calibration"] == "untraced_step" and info["scale"] > 0
    total = sum(a["compute_s"] for _, a in p.nx.nodes(data=True))
    assert total == pytest.approx(info["untraced_step_s"], rel=0.02)
    from algorithms.errors import ConfigError

    with pytest.raises(ConfigError, match="calibration"):
        TFBackend(profile_calibration="magic")


def test_profile_at_other_batch_size(backend, mlp):
    m, g = mlp
    p = backend.profile(m, g, warmup=1, steps=1, batch_size=32)
    assert p.nx.edges["data/x", "l0/MatMul"]["bytes"] == 32 * 16 * 4
    assert p.op("l0/MatMul")["output_bytes"] == 32 * 8 * 4
    assert g.nx.edges["data/x", "l0/MatMul"]["bytes"] == 4 * 16 * 4


def _stats(entries):
    ss = step_stats_pb2.StepStats()
    for device, node, ns_time, mem in entries:
        ds = next((d for d in ss.dev_stats if d.device == device), None) or ss.dev_stats.add(device=device)
        rec = ds.node_stats.add(node_name=node, all_end_rel_nanos=ns_time)
        for t, b in mem:
            m = rec.memory.add(allocator_name="cpu", total_bytes=max(0, b))
            m.allocation_records.add(alloc_micros=t, alloc_bytes=b)
    return ss


def test_multi_kernel_op_counted_whole():
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    ss = _stats(
        [
            (gpu, "conv", 5_000, []),  # launch record
            (gpu + "/stream:7", "conv:Conv2D", 30_000, []),  # kernel 1
            (gpu + "/stream:8", "conv:Conv2D", 20_000, []),  # kernel 2
            (gpu + "/stream:all", "conv:Conv2D", 50_000, []),
            (gpu, "relu", 2_000, []),
        ]
    )
    stats = parse_step_stats(ss, {"conv", "relu"})
    assert stats["conv"].time_s == pytest.approx(50e-6)  # both kernels, launch record excluded
    assert stats["relu"].time_s == pytest.approx(2e-6)


def test_allocation_peaks_per_device():
    c0 = "/job:localhost/replica:0/task:0/device:CPU:0"
    c1 = "/job:localhost/replica:0/task:0/device:CPU:1"
    ss = _stats(
        [
            (c0, "a", 1, [(1, 100)]),
            (c0, "b", 1, [(2, 50)]),
            (c0, "c", 1, [(3, -100)]),
            (c0, "d", 1, [(4, 30)]),
            (c1, "e", 1, [(1, 7)]),
        ]
    )
    assert allocation_peaks(ss, {"CPU:0": "cpu0", "CPU:1": "cpu1"}) == {"cpu0": 150.0, "cpu1": 7.0}


def test_fit_linear_recovers_latency_and_bandwidth():
    pts = [(b, 2e-5 + b / 5e9) for b in (1024, 16384, 262144, 1048576, 4194304)]
    lat, bw = fit_linear(pts)
    assert lat == pytest.approx(2e-5, rel=1e-6) and bw == pytest.approx(5e9, rel=1e-6)
    lat, bw = fit_linear([(1024, 1e-5), (1 << 20, 1e-5)])
    assert lat == pytest.approx(1e-5) and math.isinf(bw)


def test_comm_benchmark_between_virtual_cpus(backend):
    cluster = uniform_cluster(2, 4e9)
    fit = backend.comm_benchmark(cluster, [1024, 65536, 1 << 20], repeats=3)
    assert fit.latency_s >= 0 and fit.bytes_per_s > 0
    assert set(fit.links) == {("cpu0", "cpu1"), ("cpu1", "cpu0")}
    assert len(fit.samples) == 2 * 3 * 3
    assert {(s, d) for s, d, _, _ in fit.samples} == set(fit.links)
    assert all(t >= 0 for *_, t in fit.samples)
    # one device: nothing to measure
    one = backend.comm_benchmark(uniform_cluster(1), [1024], 1)
    assert one.latency_s == 0 and not one.samples
