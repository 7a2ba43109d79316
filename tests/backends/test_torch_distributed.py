"""PyTorch process-per-device runtime (backends/torch/distributed.py): the program ships to workers intact,
placed steps on gloo workers give the single-device loss and gradients, oversubscription is reported, the
communication fit recovers a known model, and the fidelity protocol runs end to end (issue 16)."""

from __future__ import annotations

import logging
import os
import pickle
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.cluster import Cluster, Device, uniform_cluster
from algorithms.errors import ConfigError, InvalidPlacement, OutOfMemory
from algorithms.placement import topological_schedule
from algorithms.simulator import simulate
from backends.torch import TorchBackend
from backends.torch.capture import trace_program
from backends.torch.comm import fit_linear_relative
from backends.torch.config import load_model_cfg
from backends.torch.distributed import (
    TorchDistributedRuntime,
    _alloc,
    dump_program,
    iqr,
    value_spec,
)
from backends.torch.program import run_program
from backends.torch.worker import has_strides, plan_receive_posts, restrided

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_one_thread")]


def _setup(name="mlp_tiny"):
    backend = TorchBackend(device="cpu")
    model = backend.build(load_model_cfg(name, {}))
    return backend, model, backend.capture(model)


def _random_placement(graph, cluster, seed):
    rng = random.Random(seed)
    group_dev, out = {}, {}
    for op in graph.topological_order():
        grp = graph.op(op)["colocation"]
        if grp is not None and grp in group_dev:
            out[op] = group_dev[grp]
            continue
        out[op] = rng.choice(cluster.names)
        if grp is not None:
            group_dev[grp] = out[op]
    return out


def test_program_pickles_by_op_name_and_runs_the_same():
    _, model, _ = _setup()
    prog = trace_program(model, "operator", model.batch_size)
    again = pickle.loads(dump_program(prog))
    assert prog.gm is not None and again.gm is None
    flat = prog.flat_inputs(model)
    a, b = run_program(prog, flat), run_program(again, flat)
    assert float(a[0]) == float(b[0])
    for x, y in zip(a[1:], b[1:]):
        assert torch.equal(x, y)


def test_a_received_transpose_keeps_its_strides():
    # transformer_tiny, random placement seed 1 (the slow test below) failed in aten.view before: a transpose
    # arrived contiguous, and the transpose of it taken on the receiver could no longer be viewed
    x = torch.arange(12.0).reshape(3, 4).t()
    spec = value_spec(x)
    assert has_strides(spec) and not has_strides(value_spec(x.contiguous()))
    assert not has_strides(value_spec(torch.ones(3, 1).expand(3, 4)))  # overlapping: received contiguous
    buf, bufs = _alloc(spec, torch.device("cpu"))
    bufs[0].copy_(x.contiguous())  # what the sender's isend(t.contiguous()) delivers
    y = restrided(spec, buf)
    assert torch.equal(y, x) and y.stride() == x.stride()
    assert torch.equal(y.t().view(12), torch.arange(12.0))
    with pytest.raises(RuntimeError, match="view size"):
        buf.t().view(12)
    nested = restrided(value_spec([x, (x.contiguous(), 3)]), [buf, (buf, 3)])
    assert nested[0].stride() == x.stride() and nested[1][0] is buf and nested[1][1] == 3


def test_value_layouts_round_trip():
    v = [torch.ones(2, 3), (torch.zeros(4, dtype=torch.int64), None, 3), torch.tensor(True)]
    spec = value_spec(v)
    out, bufs = _alloc(spec, torch.device("cpu"))
    assert len(bufs) == 3
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].shape == (2, 3) and out[1][0].dtype == torch.int64 and out[1][1] is None and out[1][2] == 3
    assert out[2].dtype == torch.bool


@settings(max_examples=30, deadline=None)
@given(st.floats(1e-6, 1e-2), st.floats(1e7, 1e11), st.lists(st.floats(0.95, 1.05), min_size=7, max_size=7))
def test_relative_fit_recovers_latency_and_bandwidth(lat, bw, noise):
    sizes = [1024 * 4**k for k in range(7)]
    samples = [(float(s), (lat + s / bw) * n) for s, n in zip(sizes, noise)]
    a, b = fit_linear_relative(samples)
    # every fitted transfer time within the noise band (+-5%) plus fitting slack
    for s in sizes:
        assert abs((a + s / b) - (lat + s / bw)) <= 0.12 * (lat + s / bw)


def test_relative_fit_mean_keeps_the_tail_the_median_drops():
    sizes = [1024 * 4**k for k in range(5)]
    lat, bw = 1e-4, 1e9
    samples = [(float(s), lat + s / bw) for s in sizes for _ in range(4)]
    samples += [(float(s), lat + s / bw + 4e-3) for s in sizes]  # one preempted sample per size
    a_med, _ = fit_linear_relative(samples, stat="median")
    a_mean, _ = fit_linear_relative(samples, stat="mean")
    assert a_med == pytest.approx(lat, rel=0.05)
    assert a_mean > 5 * lat  # the mean of five samples carries 1/5 of the 4 ms tail
    with pytest.raises(ValueError, match="stat"):
        fit_linear_relative(samples, stat="max")


def test_median_step_timeline_aligns_workers_on_the_shared_clock():
    from backends.torch.distributed import median_step_timeline

    # two workers, three measured steps; the median step (index 2: 0.5 s) is the one reported
    reports = [
        {"spans": [(10.0, [("a", 0.0, 0.1)]), (20.0, [("a", 0.0, 0.2)]), (30.0, [("a", 0.0, 0.3), ("b", 0.3, 0.4)])]},
        {"spans": [(10.0, [("c", 0.0, 0.1)]), (20.0, [("c", 0.0, 0.2)]), (30.25, [("c", 0.0, 0.1)])]},
    ]
    tl = median_step_timeline(reports, [0.2, 0.9, 0.5], ["cpu0", "cpu1"])
    assert [(r["op"], r["device"]) for r in tl] == [("a", "cpu0"), ("c", "cpu1"), ("b", "cpu0")]
    assert tl[1]["start_s"] == pytest.approx(0.25) and tl[1]["end_s"] == pytest.approx(0.35)
    assert median_step_timeline([{"spans": []}], [0.1], ["cpu0"]) == []  # a worker without spans: none


def test_iqr():
    assert iqr([1.0]) == 0.0
    assert iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0)


def test_transport_priority_is_checked():
    from algorithms.errors import ConfigError

    with pytest.raises(ConfigError, match="transport_priority"):
        TorchDistributedRuntime(transport_priority="realtime")


def test_bad_placement_fails_before_any_process_starts():
    backend, model, graph = _setup()
    cluster = uniform_cluster(2)
    placement = {op: "cpu0" for op in graph.ops}
    placement[next(iter(graph.ops))] = "gpu9"
    with pytest.raises(InvalidPlacement, match="gpu9"):
        TorchDistributedRuntime(warmup=0, steps=1).run(
            backend, model, graph, placement, topological_schedule(graph, placement, cluster.names), cluster
        )


@pytest.mark.slow
@pytest.mark.parametrize("model_name,seed", [("mlp_tiny", 0), ("gnmt_tiny", 1), ("transformer_tiny", 1)])
def test_placed_step_matches_single_device(model_name, seed):
    backend, model, graph = _setup(model_name)
    cluster = Cluster([Device("cpu0"), Device("cpu1")], latency_s=1e-5, bytes_per_s=1e9, name="cpu2")
    placement = _random_placement(graph, cluster, seed)
    sched = topological_schedule(graph, placement, cluster.names)
    trace = model_name == "mlp_tiny"  # the debug trace and unpinned transport threads must not change the result
    res = TorchDistributedRuntime(warmup=1, steps=3, trace=trace, pin_transport_threads=not trace).run(
        backend, model, graph, placement, sched, cluster
    )
    assert res.extra["correct"], res.extra
    # gloo's device loop runs under SCHED_IDLE in every worker (it must not spin on the compute thread's core)
    assert all(n >= 1 for n in res.extra["lower_transport_threads"].values()), res.extra["lower_transport_threads"]
    if trace:
        tr = res.extra["trace"]
        assert set(tr) == {"cpu0", "cpu1"}
        # two devices: every value one sends, the other receives (once per step)
        assert tr["cpu0"]["sends"] + tr["cpu1"]["sends"] == tr["cpu0"]["receives"] + tr["cpu1"]["receives"] > 0
        for t in tr.values():
            # disjoint parts of the step (the set-up's own sends are in send_s too)
            assert 0 <= t["recv_wait_s"] + t["send_s"] <= 1.01 * t["step_s"] + 1e-3
            assert 0 <= t["setup_s"] <= t["step_s"]
            # the tail after the last op (moves, send waits, the next step's receives) is part of the step
            tail = t["tail_moves_s"] + t["tail_send_wait_s"] + t["tail_post_s"]
            assert 0 <= tail <= t["step_s"]
            assert min(t["tail_moves_s"], t["tail_send_wait_s"], t["tail_post_s"]) >= 0
    else:
        assert "trace" not in res.extra
    assert res.extra["max_grad_abs_diff"] < 1e-5
    # trace.json's measured part: every scheduled op once, on its device, in the schedule's order, no overlap
    tl = res.extra["op_timeline"]
    assert sorted(r["op"] for r in tl) == sorted(op for ops in sched.values() for op in ops)
    for dev, ops in sched.items():
        mine = [r for r in tl if r["device"] == dev]
        assert [r["op"] for r in mine] == list(ops)
        assert all(r["op"] in placement and placement[r["op"]] == dev for r in mine)
        assert all(0 <= a["start_s"] <= a["end_s"] <= b["start_s"] for a, b in zip(mine, mine[1:]))
    assert max(r["end_s"] for r in tl) <= max(res.step_times_s) * 1.5 + 1e-2
    assert len(res.step_times_s) == 3 and res.measured_step_s > 0 and res.step_iqr_s >= 0
    assert [w["device"] for w in res.workers] == ["cpu0", "cpu1"]
    assert len({w["pid"] for w in res.workers}) == 2
    assert res.traffic_bytes > 0  # a random placement cuts edges
    assert set(res.peak_memory_bytes) == {"cpu0", "cpu1"} and all(v > 0 for v in res.peak_memory_bytes.values())
    # the losses go down from step to step (the update ran and the parameters stayed on their devices)
    losses = res.extra["losses"]
    assert len(losses) == 4 and losses[-1] < losses[0]


@pytest.mark.slow
def test_a_storage_is_received_once_and_its_views_rebuilt():
    """mlp_tiny with the ops whose output leaves with a view of it (a ReLU and the ``detach`` its backward
    reads) on cpu0 and their readers on cpu1: the gloo workers send such a storage once and rebuild the view on
    the receiver, so the traffic and each device's live peak are the simulator's (one copy per op and device,
    receive buffers from the step's start), and the step stays correct. Sending each value apart, as before,
    sent more bytes than the simulator counts."""
    from backends.torch.analysis import StepAnalysis
    from backends.torch.capture import program_matching
    from backends.torch.devices import PhysDevice

    backend, model, graph = _setup("mlp_tiny")
    prog = program_matching(model, graph, "operator", model.batch_size, ["cpu"])
    readers: dict[int, set[str]] = {}
    for r in prog.nodes:
        if r.kind == "call":
            for i in r.inputs:
                readers.setdefault(i, set()).add(prog.op_of[r.nid])
    shared = {
        prog.op_of[v]
        for v, o in prog.alias_owner.items()
        if prog.op_of.get(o) == prog.op_of.get(v) is not None
        and readers.get(v, set()) - {prog.op_of[v]}
        and readers.get(o, set()) - {prog.op_of[v]}
    }
    assert shared
    groups = {graph.op(op)["colocation"] for op in shared} - {None}
    cluster = Cluster([Device("cpu0"), Device("cpu1")], latency_s=1e-5, bytes_per_s=1e9, name="cpu2")
    placement = {op: "cpu0" if op in shared or graph.op(op)["colocation"] in groups else "cpu1" for op in graph.ops}
    sched = topological_schedule(graph, placement, cluster.names)
    flat = prog.flat_inputs(model)
    P, S = prog.n_params, prog.n_params * prog.n_state
    sent_bytes = {}
    for share in (False, True):
        a = StepAnalysis(
            prog, placement, sched, [PhysDevice(n, torch.device("cpu")) for n in cluster.names], flat[:P],
            flat[P : P + S], flat[P + S :], share_storages=share,
        )  # fmt: skip
        sent_bytes[share] = sum(prog.nodes[i].nbytes * len(d) for i, d in a.sends.items())
        assert bool(a.rebuilt[1]) == share
    res = TorchDistributedRuntime(warmup=0, steps=2).run(backend, model, graph, placement, sched, cluster)
    assert res.extra["correct"], res.extra
    sim = simulate(graph, cluster, placement, sched, recv_buffers="step_start")
    assert res.traffic_bytes == sim.traffic_bytes == sent_bytes[True] < sent_bytes[False]
    assert res.peak_memory_bytes == pytest.approx(sim.peak_memory, rel=1e-9)


@pytest.mark.slow
def test_distributed_comm_fit_measures_latency_and_per_message_time():
    from backends.torch.comm import comm_benchmark_distributed

    cluster = Cluster([Device("cpu0"), Device("cpu1")], latency_s=1e-5, bytes_per_s=1e9, name="cpu2")
    fit = comm_benchmark_distributed(cluster, sizes=[1024, 1 << 20], repeats=2)
    assert fit.latency_s >= 0 and fit.bytes_per_s > 0
    assert len(fit.samples) == 2 * 2
    # a gloo message over loopback costs its busy sender and receiver some processor time, well under 10 ms
    assert 0 < fit.send_overhead_s < 1e-2 and 0 < fit.recv_overhead_s < 1e-2


@pytest.mark.slow
def test_worker_over_its_memory_limit_fails_the_run_with_out_of_memory():
    backend, model, graph = _setup()
    cluster = Cluster([Device("cpu0"), Device("cpu1", memory_bytes=300.0)], name="small")
    placement = _random_placement(graph, cluster, 0)
    sched = topological_schedule(graph, placement, cluster.names)
    with pytest.raises(OutOfMemory, match="cpu1") as info:
        TorchDistributedRuntime(warmup=0, steps=1).run(backend, model, graph, placement, sched, cluster)
    assert info.value.device == "cpu1" and info.value.op
    assert info.value.used_bytes > info.value.limit_bytes == 300.0


def test_receive_plan_posts_up_front_where_there_is_room():
    # ops 0..3 peak at 10, 50, 20, 10 bytes with every receive posted when needed; limit 100, margin 2 %: 98
    peaks, needed = [10.0, 50.0, 20.0, 10.0], {7: 3, 8: 2, 9: 1}
    assert plan_receive_posts(peaks, needed, {7: 5.0, 8: 5.0, 9: 5.0}, [7, 8, 9], float("inf")) == {7: 0, 8: 0, 9: 0}
    # 40 bytes for value 7 (needed at op 3) fit over every earlier op (at most 50 + 40 = 90 of 98): up front
    assert plan_receive_posts(peaks, needed, {7: 40.0}, [7], 100.0) == {7: 0}
    # 60 bytes: op 1 would hold 110: posted after it, before op 2
    assert plan_receive_posts(peaks, needed, {7: 60.0}, [7], 100.0) == {7: 2}
    # the first in the senders' order takes the room: 7 goes to op 2 (20 + 60 = 80); 8 (needed at op 2) then
    # finds op 1 at 50 + 60 = 110 with 60 bytes: stays at op 2
    assert plan_receive_posts(peaks, needed, {7: 60.0, 8: 60.0}, [7, 8], 100.0) == {7: 2, 8: 2}
    # a receive never needed (position = the op count) moves back like any other
    assert plan_receive_posts(peaks, {}, {5: 1.0}, [5], 100.0) == {5: 0}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 100), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 12), st.floats(0, 60)), max_size=8),
    st.floats(1, 200),
)
def test_receive_plan_keeps_every_op_within_the_limit_it_found_room_under(peaks, recvs, limit):
    """Property: a receive is never posted after it is needed, and the buffers the plan moves earlier never take
    an op over the limit (less the margin) that it was under."""
    needed = {i: min(c, len(peaks)) for i, (c, _) in enumerate(recvs)}
    sizes = {i: b for i, (_, b) in enumerate(recvs)}
    plan = plan_receive_posts(peaks, needed, sizes, list(sizes), limit, margin=0.02)
    held = list(peaks)
    for i, k in plan.items():
        assert 0 <= k <= needed[i]
        for q in range(k, needed[i]):
            held[q] += sizes[i]
    budget = limit * 0.98
    for q, (before, after) in enumerate(zip(peaks, held)):
        assert after <= max(budget, before) + 1e-9, (q, before, after)


@pytest.mark.slow
def test_receives_posted_within_the_limit_fit_where_posting_them_up_front_runs_out():
    """``post_receives="within_limit"``: with room every receive is posted up front (no late receive, the same
    peak); under a limit below that peak the up-front run stops out of memory, while this one plans later posts,
    stays within the limit and computes the single-device step."""
    backend, model, graph = _setup("gnmt_tiny")
    cluster = Cluster([Device("cpu0"), Device("cpu1")], latency_s=1e-5, bytes_per_s=1e9, name="cpu2")
    placement = _random_placement(graph, cluster, 1)
    sched = topological_schedule(graph, placement, cluster.names)
    roomy = TorchDistributedRuntime(warmup=1, steps=2, post_receives="within_limit").run(
        backend, model, graph, placement, sched, cluster
    )
    assert roomy.extra["correct"] and roomy.extra["late_receives"] == {"cpu0": 0, "cpu1": 0}
    limit = 0.88 * max(roomy.peak_memory_bytes.values())
    small = Cluster([Device("cpu0", memory_bytes=limit), Device("cpu1", memory_bytes=limit)], name="small")
    with pytest.raises(OutOfMemory):
        TorchDistributedRuntime(warmup=1, steps=1, post_receives="up_front").run(
            backend, model, graph, placement, sched, small
        )
    res = TorchDistributedRuntime(warmup=1, steps=2, post_receives="within_limit").run(
        backend, model, graph, placement, sched, small
    )
    assert res.extra["correct"], res.extra
    assert all(v <= limit for v in res.peak_memory_bytes.values()), (res.peak_memory_bytes, limit)
    assert sum(res.extra["late_receives"].values()) > 0
    losses = res.extra["losses"]
    assert len(losses) == 3 and losses[-1] < losses[0]


def test_post_receives_is_checked():
    with pytest.raises(ConfigError, match="post_receives"):
        TorchDistributedRuntime(post_receives="lazy")


@pytest.mark.slow
def test_oversubscription_is_reported(caplog):
    import os

    backend, model, graph = _setup()
    n_host = len(os.sched_getaffinity(0))
    cluster = uniform_cluster(2 * n_host)
    placement = _random_placement(graph, cluster, 3)
    sched = topological_schedule(graph, placement, cluster.names)
    with caplog.at_level(logging.WARNING):
        res = TorchDistributedRuntime(warmup=0, steps=2).run(backend, model, graph, placement, sched, cluster)
    assert res.extra["oversubscribed"] == pytest.approx(2.0)
    assert any("share each core" in r.getMessage() for r in caplog.records)
    assert res.extra["correct"]
    assert sorted({c for w in res.workers for c in w["cores"]}) == sorted(os.sched_getaffinity(0))


@pytest.mark.slow
def test_fidelity_protocol_on_a_tiny_model():
    """The fidelity script's protocol end to end; the bound is loose (a shared machine is noisy)."""
    from experiments.fidelity import run, summarise
    from orchestrator.report.fidelity import DISTURBED

    rows = run(["mlp_tiny"], ["single", "m_topo"], ["cpu2"], warmup=1, steps=3, repeats=1, rounds=2)
    assert [r["placer"] for r in rows] == ["single", "m_topo"]
    for r in rows:
        assert r["correct"]
        assert r["predicted_s"] > 0 and r["measured_s"] > 0
        # loose: seven sessions share this machine's two cores (measured IQRs reach the median); a measurement
        # the protocol itself calls disturbed (other processes took more than DISTURBED of the workers' cores,
        # after its retries; a CI run on 29 Nov measured m-TOPO's 1.1 ms step at 25 ms with 10 % and 33 %) is
        # not one to judge the prediction by, and the report marks it so
        shares = [x for x in r["interference"] if x is not None]
        if max(shares, default=0.0) <= DISTURBED:
            assert 0.05 < r["predicted_s"] / r["measured_s"] < 20.0, r
        # one profile and one run per round; the measured median pools both rounds' steps
        assert len(r["profile_step_s"]) == len(r["round_medians_s"]) == 2
        assert min(r["round_medians_s"]) <= r["measured_s"] <= max(r["round_medians_s"]) * 1.5
        assert all(0 < a <= 1.5 * b for a, b in zip(r["profile_sum_s"], r["profile_step_s"])), r
    s = summarise(rows)
    assert len(s) == 1 and s[0]["runs"] == 2


@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_workers_with_nccl():
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices (one NCCL rank per GPU)")
    backend, model, graph = _setup("gnmt_tiny")
    cluster = uniform_cluster(2, type="GPU")
    placement = _random_placement(graph, cluster, 0)
    sched = topological_schedule(graph, placement, cluster.names)
    rt = TorchDistributedRuntime(warmup=1, steps=3, device="cuda", rtol=1e-3, atol=1e-4)
    res = rt.run(backend, model, graph, placement, sched, cluster)
    assert res.extra["backend"] == "nccl" and res.extra["correct"], res.extra
    assert all(v > 0 for v in res.peak_memory_bytes.values())


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("name", ["gnmt_tiny", "inception_v3_tiny"])
def test_one_gpu_worker_times_with_cuda_events(name):
    """A one-GPU placed run: the step is timed with CUDA events (within the host clock's step), memory comes
    from the allocator, the loss and gradients match a reference on the same GPU (TF32 convolutions included),
    and a GPU worker's profile (CUDA events between ops, no synchronisation per op) adds up to its step."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from backends.torch.profiler import profile_in_worker, worker_setting

    backend, model, graph = _setup(name)
    cluster = uniform_cluster(1, type="GPU")
    placement = {op: cluster.names[0] for op in graph.ops}
    sched = topological_schedule(graph, placement, cluster.names)
    res = TorchDistributedRuntime(warmup=2, steps=5).run(backend, model, graph, placement, sched, cluster)
    assert res.extra["correct"], res.extra
    assert res.extra["backend"] == "nccl" and res.workers[0]["cores"] == []
    assert 0 < res.measured_step_s <= 1.05 * res.extra["wall_step_s"], res.extra
    assert res.peak_memory_bytes[cluster.names[0]] > 0
    setting = worker_setting(cluster, cuda=True)
    assert setting["device"] == "cuda" and setting["corun"] == 1
    g, info = profile_in_worker(model, graph, setting=setting, warmup=2, steps=5, statistic="median")
    assert {g.op(o)["profiled_on"] for o in g.ops} == {"cuda-worker"}
    assert all(g.op(o)["compute_s"] >= 0 for o in g.ops)
    # the intervals tile the step from its first event to the last op's (the parameter moves after it are not
    # an op's); medians of parts add up to about the median of the whole
    assert 0.7 < info["sum_op_median_s"] / info["step_median_s"] < 1.1, info


@pytest.mark.cuda
@pytest.mark.slow
def test_nccl_pingpong_fit():
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices (NCCL refuses two ranks on one GPU)")
    from backends.torch.comm import comm_benchmark_distributed

    fit = comm_benchmark_distributed(
        uniform_cluster(2, type="GPU"), sizes=[1 << 10, 1 << 20, 1 << 24], repeats=3, cuda=True
    )
    assert fit.latency_s > 0 and 1e8 < fit.bytes_per_s < 1e13
    assert fit.send_overhead_s == fit.recv_overhead_s == 0.0
    assert len(fit.samples) == 9


@pytest.mark.slow
def test_torchrun_launch(tmp_path):
    """The same job started by torchrun (env:// rendezvous, reports written per rank) gives a correct step."""
    import os
    import shutil
    import subprocess
    import sys

    from backends.torch.distributed import free_port
    from backends.torch.torchrun import read_result, write_job

    if shutil.which("torchrun") is None:
        pytest.skip("torchrun is not on PATH")
    backend, model, graph = _setup()
    cluster = uniform_cluster(2)
    placement = _random_placement(graph, cluster, 5)
    sched = topological_schedule(graph, placement, cluster.names)
    rt = TorchDistributedRuntime(warmup=0, steps=2)
    prepared = write_job(rt, backend, model, graph, placement, sched, cluster, tmp_path / "job.pkl")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
        "-m", "backends.torch.torchrun", str(tmp_path / "job.pkl"), str(tmp_path / "reports"),
    ]  # fmt: skip
    subprocess.run(cmd, cwd=root, env=env, check=True, timeout=600, capture_output=True)
    res = read_result(rt, prepared, tmp_path / "reports")
    assert res.extra["correct"], res.extra
    assert len(res.step_times_s) == 2 and len(res.workers) == 2


def test_gradient_check_scales_with_the_tensor_not_the_element():
    from types import SimpleNamespace

    from backends.torch.reference import compare_outputs

    prog = SimpleNamespace(param_names=["w"], split_outputs=lambda outs: {"loss": outs[0], "grads": [outs[1]]})
    ref = torch.tensor([1000.0, 1e-3, -500.0])
    close = ref + torch.tensor([0.0, 7e-4, 0.0])  # the small element is 70 % off, 7e-7 of the tensor's scale
    info = compare_outputs([torch.tensor(2.0), close], [torch.tensor(2.0), ref], prog, rtol=1e-4, atol=1e-5)
    assert info["correct"] and info["worst_param"] == "w"
    far = ref + torch.tensor([0.0, 0.0, 1.0])  # 1e-3 of the scale: beyond rtol
    assert not compare_outputs([torch.tensor(2.0), far], [torch.tensor(2.0), ref], prog, rtol=1e-4, atol=1e-5)[
        "correct"
    ]
    nan = ref + torch.tensor([float("nan"), 0.0, 0.0])
    assert not compare_outputs([torch.tensor(2.0), nan], [torch.tensor(2.0), ref], prog)["correct"]


def test_gradient_check_reports_the_relative_difference_and_its_tolerance():
    from types import SimpleNamespace

    from backends.torch.reference import compare_outputs

    prog = SimpleNamespace(param_names=["w"], split_outputs=lambda outs: {"loss": outs[0], "grads": [outs[1]]})
    ref = torch.tensor([200.0, -3.0, 50.0])
    tf32_like = ref + torch.tensor([0.0, 0.0, 0.1])  # 5e-4 of the tensor's scale, about TF32's unit roundoff
    strict = compare_outputs([torch.tensor(1.0), tf32_like], [torch.tensor(1.0), ref], prog, rtol=1e-4, atol=1e-5)
    assert not strict["correct"] and strict["rtol"] == 1e-4
    assert strict["max_grad_rel_diff"] == pytest.approx(0.1 / 200.0, rel=1e-3)
    loose = compare_outputs([torch.tensor(1.0), tf32_like], [torch.tensor(1.0), ref], prog, rtol=1e-2, atol=1e-5)
    assert loose["correct"] and loose["rtol"] == 1e-2


def test_check_tolerance_widens_only_for_tf32_workers(monkeypatch):
    from backends.torch.distributed import check_rtol
    from backends.torch.reference import tf32_in_effect

    assert check_rtol(1e-4, 1e-2, [{"tf32": False}, {}]) == 1e-4
    assert check_rtol(1e-4, 1e-2, [{"tf32": False}, {"tf32": True}]) == 1e-2
    assert check_rtol(1e-1, 1e-2, [{"tf32": True}]) == 1e-1  # never tighter than rtol
    if not torch.cuda.is_available():
        assert tf32_in_effect() is False  # no CUDA, no TF32
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    assert tf32_in_effect() is False


def test_worker_setting_coruns_one_worker_per_device_the_host_can_hold(monkeypatch):
    import os

    from backends.torch.profiler import worker_setting

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert worker_setting(uniform_cluster(2))["corun"] == 2
    assert worker_setting(uniform_cluster(4))["corun"] == 2  # four devices on two cores: two busy at once
    assert worker_setting(uniform_cluster(1))["corun"] == 1
    two_core = Cluster([Device("cpu0", cores=2), Device("cpu1", cores=2)], name="wide")
    assert worker_setting(two_core)["corun"] == 1  # one two-core worker fills the host


@pytest.mark.slow
def test_corun_profile_pools_every_workers_samples():
    """`corun` workers profile at once on disjoint cores; every op gets each worker's samples."""
    import os

    from algorithms.errors import ConfigError
    from backends.torch.profiler import profile_in_worker

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two host cores")
    _, model, graph = _setup()
    setting = {"runtime": "torch_distributed", "device": "cpu", "pinned": True, "cores": 1, "threads": 1}
    g, info = profile_in_worker(model, graph, setting={**setting, "corun": 2}, warmup=1, steps=3)
    assert set(g.ops) == set(graph.ops) and info["step_s"] > 0
    assert info["steps_measured"] + info["slow_steps"] == 2 * 3  # both workers' steps (slow spells left out)
    # others' share of the two workers' cores, each worker's own time subtracted; repeated above 5 %
    assert 1 <= len(info["interference_attempts"]) <= 3 and info["host_interference"] in info["interference_attempts"]
    assert sum(g.op(o)["compute_s"] for o in g.ops) == pytest.approx(info["sum_op_s"])
    # the scaled median adds up to the median of the steps run without per-op timing, which alternate with the
    # timed ones; the timed steps' median is reported beside it
    assert info["sum_op_s"] == pytest.approx(info["step_median_s"]) and info["step_timed_median_s"] > 0
    with pytest.raises(ConfigError, match="corun"):
        profile_in_worker(model, graph, setting={**setting, "corun": 0}, warmup=1, steps=1)


def test_a_graph_from_another_capture_is_refused_naming_the_devices_tried():
    """The runtime traces the step on its workers' kind of device and checks the ops against the graph's: a
    graph whose ops the capture does not have is refused before any process starts, naming the ops."""
    import networkx as nx

    from algorithms.errors import InvalidGraph
    from backends.torch.capture import program_matching

    backend, model, graph = _setup("mlp_tiny")
    assert program_matching(model, graph, "operator", None, ["cpu"]) is trace_program(model, "operator")
    other = graph.copy("other")  # one op renamed, as a GPU capture names a batch norm
    other.nx = nx.relabel_nodes(other.nx, {next(iter(other.ops)): "stem/bn/cudnn_batch_norm"})
    other.invalidate()
    with pytest.raises(InvalidGraph, match=r"on cpu: e\.g\. \['stem/bn/cudnn_batch_norm'\].*backend\.device=cpu"):
        program_matching(model, other, "operator", None, ["cpu"])
    cluster = uniform_cluster(2)
    placement = {o: "cpu0" for o in other.ops}
    with pytest.raises(InvalidGraph, match="does not match"):
        TorchDistributedRuntime(warmup=0, steps=1).prepare(backend, model, other, placement, None, cluster)


def test_value_specs_run_nothing_for_a_one_device_placement():
    from backends.torch.worker import value_specs

    _, model, _ = _setup("mlp_tiny")
    prog = trace_program(model, "operator")
    flat = prog.flat_inputs(model)
    assert value_specs(prog, [], set()) == {}  # no inputs needed: nothing is executed
    some = {n.nid for n in prog.nodes if n.kind == "call"}
    specs = value_specs(prog, flat, some)
    assert set(specs) == some and all(s[0] in "tluc" for s in specs.values())


@pytest.mark.slow
def test_a_device_the_placement_leaves_empty_gets_no_worker():
    """cpu4 with everything on one device: one worker (an idle worker would share the busy one's cores and
    join every barrier), the others listed as idle with no memory, and the step still correct."""
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(4)
    placement = {op: "cpu2" for op in graph.ops}
    res = TorchDistributedRuntime(warmup=0, steps=2).run(
        backend, model, graph, placement, topological_schedule(graph, placement, cluster.names), cluster
    )
    assert [w["device"] for w in res.workers] == ["cpu2"] and res.extra["correct"]
    assert res.extra["idle_devices"] == ["cpu0", "cpu1", "cpu3"]
    assert res.peak_memory_bytes["cpu0"] == 0.0 and res.peak_memory_bytes["cpu2"] > 0
    assert res.traffic_bytes == 0


def test_a_run_other_tasks_disturbed_is_run_again_and_the_cleaner_one_kept(monkeypatch):
    """runtime.max_interference: the first launch reads as 30 % of the core taken by other tasks, the second as
    none; the run is repeated once and the second kept, with both shares reported."""
    import backends.torch.distributed as dist_mod
    from backends.interference import CoreSample

    real_launch = dist_mod.launch
    shares = iter([0.3, 0.0])

    def launch(job, timeout_s=600.0):
        reports = real_launch(job, timeout_s)
        other = next(shares)
        for r in reports:  # one second on core 0, the worker busy 0.2 s of it, others `other`
            r["core_samples"] = (CoreSample({0: 0.0}, 0.0, 0.0), CoreSample({0: 0.2 + other}, 0.2, 1.0))
            r.pop("paces", None)  # a slow spell of the core is another test's (test_interference.py)
        return reports

    monkeypatch.setattr(dist_mod, "launch", launch)
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(2)
    placement = {op: "cpu0" for op in graph.ops}
    order = topological_schedule(graph, placement, cluster.names)
    res = TorchDistributedRuntime(warmup=0, steps=2).run(backend, model, graph, placement, order, cluster)
    disturbed = 0.3 - 2 / os.sysconf("SC_CLK_TCK")  # less a tick for the core and one for the worker
    assert res.extra["interference_attempts"] == [pytest.approx(disturbed), 0.0]
    assert res.extra["host_interference"] == pytest.approx(0.0) and res.extra["correct"]
    # max_interference None: measured and reported, never repeated
    shares = iter([0.3, 0.0])
    res = TorchDistributedRuntime(warmup=0, steps=2, max_interference=None).run(
        backend, model, graph, placement, order, cluster
    )
    assert res.extra["interference_attempts"] == [pytest.approx(disturbed)]
    with pytest.raises(Exception, match="max_interference"):
        TorchDistributedRuntime(max_interference=1.5)
    with pytest.raises(Exception, match="retries"):
        TorchDistributedRuntime(retries=-1)


def test_untimed_steps_alternate_with_the_timed_ones():
    from backends.torch.worker import untimed_flags

    assert untimed_flags(3, 3) == [False, True] * 3
    assert untimed_flags(3, 1) == [False, True, False, False]
    assert untimed_flags(1, 3) == [False, True, True, True]
    assert untimed_flags(4, 0) == [False] * 4
    # in one block first, back to back as a placed run's steps (the graphed GPU profile's layout)
    assert untimed_flags(3, 2, block=True) == [True, True, False, False, False]
