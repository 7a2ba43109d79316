"""PyTorch backend, profiling: measured per-op times and memory, profiles at another batch size, and the
communication micro-benchmark's least-squares fit."""

from __future__ import annotations

import pytest

from algorithms.cluster import Cluster, uniform_cluster
from backends.torch import TorchBackend
from backends.torch.comm import fit_linear
from backends.torch.config import load_model_cfg

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_one_thread")]


@pytest.fixture(scope="module")
def mlp():
    backend = TorchBackend(granularity="operator", device="cpu")
    model = backend.build(load_model_cfg("mlp_tiny"))
    return backend, model, backend.capture(model)


def test_profile_fills_costs(mlp):
    backend, model, graph = mlp
    prof = backend.profile(model, graph, warmup=1, steps=3)
    assert set(prof.ops) == set(graph.ops)
    prof.validate()
    calls = [a for _, a in prof.nx.nodes(data=True) if a["type"] in ("addmm", "mm", "relu")]
    assert calls and all(a["compute_s"] > 0 for a in calls)
    assert all(a["profiled_on"] == "cpu" and a["profiled_batch"] == 4 for _, a in prof.nx.nodes(data=True))
    # the first layer's matmul output is [batch, 8] float32
    mm = next(o for o in prof.ops if o.startswith("layers/l0/0/addmm"))
    assert prof.op(mm)["output_bytes"] == 4 * 8 * 4
    # the input graph is left alone
    assert all(a["compute_s"] == 0 for _, a in graph.nx.nodes(data=True))


def test_profile_at_another_batch_size(mlp):
    backend, model, graph = mlp
    big = backend.profile(model, graph, warmup=0, steps=1, batch_size=16)
    mm = next(o for o in big.ops if o.startswith("layers/l0/0/addmm"))
    assert big.op(mm)["output_bytes"] == 16 * 8 * 4
    x_out = max(d["bytes"] for _, _, d in big.nx.out_edges("data/in0", data=True))
    assert x_out == 16 * 16 * 4
    # parameters do not grow with the batch
    assert big.op("layers/l0/0/weight")["persistent_bytes"] == graph.op("layers/l0/0/weight")["persistent_bytes"]


def test_fit_linear_recovers_a_line():
    lat, bw = 3e-5, 2e9
    samples = [(b, lat + b / bw) for b in (1e3, 1e4, 1e5, 1e6, 1e7) for _ in range(3)]
    fit_lat, w = fit_linear(samples)
    assert fit_lat == pytest.approx(lat, rel=1e-6)
    assert w == pytest.approx(bw, rel=1e-6)
    # a negative intercept is refitted through the origin
    fit_lat, w = fit_linear([(1e3, 0.5e-6), (1e6, 1e-3)])
    assert fit_lat == 0.0 and w > 0


def test_comm_benchmark_on_virtual_cpus():
    backend = TorchBackend(device="cpu")
    cluster = uniform_cluster(2)
    fit = backend.comm_benchmark(cluster, sizes=[4096, 65536, 1048576], repeats=2)
    assert fit.latency_s >= 0 and fit.bytes_per_s > 0
    assert set(fit.links) == {("cpu0", "cpu1"), ("cpu1", "cpu0")}
    assert len(fit.samples) == 2 * 3 * 2
    assert all(t > 0 for _, _, _, t in fit.samples)
    fitted = cluster.with_comm(fit.latency_s, fit.bytes_per_s)
    assert isinstance(fitted, Cluster) and fitted.transfer_time(0, 1, 1e6) > 0
