"""The graphed step (`backends.torch.cudagraph`, `runtime.cuda_graph`): on a CPU through its host stand-in
(the same capture, check and bookkeeping), on a GPU for real where one exists (marked `cuda`)."""

from __future__ import annotations

import pytest
import torch

from algorithms.cluster import uniform_cluster
from algorithms.errors import ConfigError
from algorithms.placement import topological_schedule
from backends.torch import TorchBackend, cudagraph
from backends.torch.config import load_model_cfg
from backends.torch.distributed import TorchDistributedRuntime, launch
from backends.torch.worker import _Worker

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_one_thread")]


def _one_device(name: str, cluster):
    backend = TorchBackend(device="cpu")
    model = backend.build(load_model_cfg(name, {}))
    graph = backend.capture(model)
    placement = {op: cluster.names[0] for op in graph.ops}
    return backend, model, graph, placement, topological_schedule(graph, placement, cluster.names)


def _in_process_worker(name: str = "mlp_tiny") -> _Worker:
    cluster = uniform_cluster(1)
    backend, model, graph, placement, sched = _one_device(name, cluster)
    prepared = TorchDistributedRuntime(warmup=1, steps=1).prepare(backend, model, graph, placement, sched, cluster)
    return _Worker(0, prepared.job)  # one device: no process group is needed


def test_a_host_graphed_run_continues_the_eager_runs_losses():
    """The workers' path with graphs (host stand-in): the first step eager and checked against the
    single-device reference, the capture check one step on, then replays: the losses are the eager run's with
    the check's step left out, and the result says the run was graphed."""
    cluster = uniform_cluster(1)
    backend, model, graph, placement, sched = _one_device("mlp_tiny", cluster)
    rt = TorchDistributedRuntime(warmup=1, steps=4)
    eager = rt.finish(prep := rt.prepare(backend, model, graph, placement, sched, cluster), launch(prep.job))
    eager_long = TorchDistributedRuntime(warmup=1, steps=5)
    prep = eager_long.prepare(backend, model, graph, placement, sched, cluster)
    reference = eager_long.finish(prep, launch(prep.job)).extra["losses"]
    prep = rt.prepare(backend, model, graph, placement, sched, cluster)
    prep.job.host_graphs = True
    res = rt.finish(prep, launch(prep.job))
    assert res.extra["correct"] and res.extra["cuda_graph"] is True
    assert res.extra["cuda_graph_check"] == pytest.approx(0.0, abs=1e-6)
    assert "cuda_graph" not in eager.extra
    losses = res.extra["losses"]
    assert len(losses) == 5 and losses[-1] < losses[0]
    assert losses == pytest.approx(reference[:1] + reference[2:6], rel=1e-5)
    assert len(res.step_times_s) == 4 and res.measured_step_s > 0


def test_a_timed_replay_gives_every_op_its_time_in_schedule_order():
    w = _in_process_worker("gnmt_tiny")
    w.step(retain=False, time_ops=False)
    gs = cudagraph.GraphedStep(w, timed=True, host_graphs=True)
    assert gs.check() == pytest.approx(0.0, abs=1e-6)
    o = gs.replay(time_ops=True)
    assert list(o["op_times"]) == list(w.order) and all(t >= 0 for t in o["op_times"].values())
    # the marks tile the replay: their sum is the step less the clock reads around it
    assert 0.5 * o["wall"] <= sum(o["op_times"].values()) <= o["wall"]
    assert [s[0] for s in o["spans"]] == list(w.order)
    assert all(a[2] == pytest.approx(b[1]) for a, b in zip(o["spans"], o["spans"][1:]))
    plain = gs.replay(time_ops=False)
    assert plain["op_times"] == {} and plain["spans"] == [] and plain["loss"] < o["loss"]


def test_a_replay_that_differs_from_the_eager_step_is_refused_naming_the_tensor(monkeypatch):
    w = _in_process_worker("mlp_tiny")
    w.step(retain=False, time_ops=False)
    real_body = cudagraph.step_body
    first = w.updates[0][0]

    def drifting(worker, mark=None):
        loss = real_body(worker, mark)
        worker.ex.store[first].add_(1.0)  # what a graph that read a stale host value would do
        return loss

    monkeypatch.setattr(cudagraph, "step_body", drifting)
    gs = cudagraph.GraphedStep(w, host_graphs=True)
    with pytest.raises(cudagraph.GraphMismatch, match=repr(w.prog.param_names[0])):
        gs.check()


def test_cuda_graph_settings_are_checked():
    cluster = uniform_cluster(1)
    backend, model, graph, placement, sched = _one_device("mlp_tiny", cluster)
    with pytest.raises(ConfigError, match="GPU workers"):
        TorchDistributedRuntime(cuda_graph=True).prepare(backend, model, graph, placement, sched, cluster)
    with pytest.raises(ConfigError, match="warmup >= 1"):
        TorchDistributedRuntime(warmup=0, cuda_graph=True)
    from backends.torch.profiler import worker_setting

    with pytest.raises(ConfigError, match="GPU workers"):
        worker_setting(cluster, cuda_graph=True)
    assert "cuda_graph" not in worker_setting(cluster)  # earlier profiles keep their cache keys
    gpu_setting = worker_setting(uniform_cluster(1, type="GPU"), cuda=True, cuda_graph=True)
    assert gpu_setting["cuda_graph"] is True and gpu_setting["untimed"] == "block"
    assert "untimed" not in worker_setting(cluster)
    from backends.torch.profiler import profile_in_worker

    with pytest.raises(ConfigError, match="'untimed'"):
        profile_in_worker(model, graph, setting={**worker_setting(cluster), "untimed": "interleaved"})


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp_tiny", "gnmt_tiny"])
def test_one_gpu_graphed_run_and_profile(name):
    """On a GPU: the graphed run is correct, its capture check passes, its step is shorter than the eager
    one's (no host launches), and a graph-mode profile times ops on the device and adds up to its replay."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from backends.torch.profiler import profile_in_worker, worker_setting

    cluster = uniform_cluster(1, type="GPU")
    backend, model, graph, placement, sched = _one_device(name, cluster)
    eager = TorchDistributedRuntime(warmup=3, steps=10).run(backend, model, graph, placement, sched, cluster)
    res = TorchDistributedRuntime(warmup=3, steps=10, cuda_graph=True).run(
        backend, model, graph, placement, sched, cluster
    )
    assert res.extra["correct"] and res.extra["cuda_graph"] is True, res.extra
    assert res.extra["cuda_graph_check"] < 1e-3
    # the allocator's peak: the tensors plus a cuBLAS and a cuBLASLt workspace per stream (cuda_memory)
    for run in (eager, res):
        dev = next(iter(run.peak_memory_bytes))
        want = run.extra["tensor_peak_bytes"][dev] + run.extra["framework_reserve_bytes"][dev]
        assert run.peak_memory_bytes[dev] == pytest.approx(want, rel=0.02), (run.peak_memory_bytes, want)
    assert res.measured_step_s < eager.measured_step_s, (res.measured_step_s, eager.measured_step_s)
    setting = worker_setting(cluster, cuda=True, cuda_graph=True)
    g, info = profile_in_worker(model, graph, setting=setting, warmup=3, steps=10)
    assert {g.op(o)["profiled_on"] for o in g.ops} == {"cuda-graph-worker"}
    # event nodes between ops add to the step (2.3-3.1 times on an H100): their cost comes off every op alike,
    # and the ops add up to the plain replay
    assert 0.9 < info["sum_op_median_s"] / info["step_median_s"] < 6.0, info
    assert info["event_node_s"] > 0 and info["sum_op_s"] == pytest.approx(info["step_median_s"], rel=1e-6)


def test_event_node_costs_come_off_every_op_alike():
    # three ops of 10, 4 and 1 us in the plain graph, each timed with a 2 us event node
    costs, c = cudagraph.costs_less_event_nodes({"a": 12e-6, "b": 6e-6, "c": 3e-6}, 15e-6)
    assert c == pytest.approx(2e-6)
    assert costs == pytest.approx({"a": 10e-6, "b": 4e-6, "c": 1e-6})
    # an op shorter than the node's cost is clipped at 0, and the rest still add up to the step
    costs, c = cudagraph.costs_less_event_nodes({"a": 20e-6, "b": 1e-6}, 15e-6)
    assert costs["b"] == 0.0 and sum(costs.values()) == pytest.approx(15e-6)
    assert cudagraph.costs_less_event_nodes({}, 1.0) == ({}, 0.0)
