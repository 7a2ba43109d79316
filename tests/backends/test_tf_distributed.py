"""TensorFlow distributed runtime (one pinned tf.distribute.Server process per device): the parsers and fits
on synthetic input, then real runs of mlp_tiny on two worker processes (slow: each worker imports TensorFlow)."""

from __future__ import annotations

import math
import os
import statistics
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import step_stats_pb2
from tensorflow.core.protobuf import config_pb2

from algorithms.cluster import Cluster, Device, uniform_cluster
from algorithms.errors import ConfigError, InvalidPlacement
from algorithms.graph import OpGraph
from algorithms.placers.baseline import ExpertPlacer, SinglePlacer
from backends.base import agrees
from backends.tensorflow import TFBackend, distributed
from backends.tensorflow.comm import fit_linear_relative
from backends.tensorflow.config import load_model_cfg
from backends.tensorflow.dist_profile import (
    _process_cpu_s,
    comm_benchmark_distributed,
    predicted_step,
    profile_distributed,
    residuals,
)
from backends.tensorflow.distributed import (
    TFDistributedRuntime,
    _diff_scale,
    _rel_error,
    iqr,
    output_bytes,
    recv_traffic,
    task_allocations,
    task_of_device,
    traced_step,
)
from backends.tensorflow.workers import WorkerPool, free_ports

pytestmark = pytest.mark.tf

W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# ----------------------------------------------------------------------------------------------- fast, synthetic
def test_task_of_device():
    assert task_of_device(W1) == 1
    assert task_of_device("/job:worker/task:3/device:CPU:0") == 3
    assert task_of_device("/job:localhost/replica:0/task:0/device:CPU:0") is None


def test_recv_traffic_counts_only_bytes_between_tasks():
    ss = step_stats_pb2.StepStats()
    ds = ss.dev_stats.add(device=W1)
    ds.node_stats.add(node_name="RecvTensor", timeline_label=f"[128B] [3.3Mb/s] edge_11_l0/Relu from {W0} to {W1}")
    ds.node_stats.add(node_name="RecvTensor", timeline_label=f"[0B] [0Mb/s] edge_7_ctrl from {W0} to {W1}")
    ds.node_stats.add(node_name="RecvTensor", timeline_label=f"[64B] [1Mb/s] edge_3_x from {W1} to {W1}")
    ds.node_stats.add(node_name="l1/MatMul", timeline_label="[999B] not a receive")
    ds2 = ss.dev_stats.add(device=W0)
    ds2.node_stats.add(node_name="RecvTensor", timeline_label=f"[32B] [1Mb/s] edge_9_g from {W1} to {W0}")
    assert recv_traffic(ss) == {(0, 1): 128.0, (1, 0): 32.0}
    # from 0.1 MiB on TensorFlow writes MiB with one decimal: the source op's output size that fits is taken
    ds.node_stats.add(node_name="RecvTensor", timeline_label=f"[1.5MB] [8.1Gb/s] edge_103_l0/w from {W0} to {W1}")
    assert recv_traffic(ss) == {(0, 1): 128.0 + 1.5 * 2**20, (1, 0): 32.0}  # no sizes known: the label's value
    sizes = {"l0/w": [4.0, 1605632.0], "other": [1572864.0]}  # 784 x 512 float32, and a 4-byte second output
    assert recv_traffic(ss, sizes) == {(0, 1): 128.0 + 1605632.0, (1, 0): 32.0}
    assert recv_traffic(ss, {"l0/w": [1.0e6]})[(0, 1)] == 128.0 + 1.5 * 2**20  # outside the rounding: the label


def _md(*pairs: tuple[str, str, int]):
    """RunMetadata whose receiving tasks recorded one RecvTensor of `bytes` per (src, dst, bytes)."""
    md = config_pb2.RunMetadata()
    for src, dst, nbytes in pairs:
        ds = md.step_stats.dev_stats.add(device=dst)
        ds.node_stats.add(node_name="RecvTensor", timeline_label=f"[{nbytes}B] [1Mb/s] edge_1_a from {src} to {dst}")
    return md


def test_traced_step_traces_again_until_every_cut_pair_shows_its_receives():
    # the first traced step lacks task 1's receives (as in a CI run under full load), the second has both
    steps = iter([_md((W1, W0, 32)), _md((W1, W0, 32), (W0, W1, 128)), _md((W1, W0, 32), (W0, W1, 999))])
    md, n, missing = traced_step(lambda: next(steps), {(0, 1), (1, 0)}, None, 3)
    assert n == 2 and missing == set() and recv_traffic(md.step_stats) == {(1, 0): 32.0, (0, 1): 128.0}
    # never complete: the most complete step is kept and the missing pair named
    steps = iter([_md((W1, W0, 32)), _md(), _md((W1, W0, 16))])
    md, n, missing = traced_step(lambda: next(steps), {(0, 1), (1, 0)}, None, 3)
    assert n == 3 and missing == {(0, 1)} and recv_traffic(md.step_stats) == {(1, 0): 32.0}
    # nothing cut: one traced step
    calls = []
    md, n, missing = traced_step(lambda: calls.append(1) or _md(), set(), None, 3)
    assert n == 1 and len(calls) == 1 and missing == set()
    with pytest.raises(ConfigError, match="traced step"):
        traced_step(_md, set(), None, 0)
    with pytest.raises(ConfigError, match="trace_attempts"):
        TFDistributedRuntime(trace_attempts=0)


def test_output_bytes_of_a_graph():
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [64, 784], name="x")
        tf.compat.v1.placeholder(tf.float32, [None, 3], name="free")
        tf.identity(tf.cast(x, tf.float64), name="y")
    sizes = output_bytes(g)
    assert sizes["x"] == [64 * 784 * 4.0] and sizes["y"] == [64 * 784 * 8.0] and "free" not in sizes


def test_task_allocations_held_and_peak():
    ss = step_stats_pb2.StepStats()
    ns = ss.dev_stats.add(device=W0).node_stats.add(node_name="a")
    m = ns.memory.add(allocator_name="cpu")
    for t, b in [(1, 100), (2, 50), (3, -100), (4, 30)]:
        m.allocation_records.add(alloc_micros=t, alloc_bytes=b)
    ss.dev_stats.add(device=W1)  # a task without records gets no entry
    assert task_allocations(ss) == {0: (80.0, 150.0)}


def test_iqr_and_relative_error():
    assert iqr([1.0]) == 0.0
    assert iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0)
    assert _rel_error([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert _rel_error([1.0, 2.2], [1.0, 2.0]) == pytest.approx(0.1)
    assert _rel_error([1.0], [1.0, 2.0]) == math.inf
    assert _diff_scale([1.0, 2.2], [1.0, -2.0]) == pytest.approx((4.2, 2.0))
    assert _diff_scale([1.0], [1.0, 2.0]) == (math.inf, 0.0)


def test_gradients_that_are_zero_up_to_rounding_agree_by_the_absolute_tolerance():
    # measured: TensorFlow gnmt_tiny under m-ETF, a gradient whose largest element is 3.7e-11 and differs by 4e-14
    diff, scale = _diff_scale([-1.70307e-11, 3.6e-11], [-1.70724e-11, 3.66e-11])
    assert diff / scale > 1e-4  # the relative rule alone calls this a mismatch
    assert agrees(diff, scale, rtol=1e-4, atol=1e-6)
    assert not agrees(1e-3, 1.0, rtol=1e-4, atol=1e-6)  # a real difference still fails
    assert not agrees(math.nan, 1.0, rtol=1e-4, atol=1e-6)
    with pytest.raises(ConfigError, match="grad_atol"):
        TFDistributedRuntime(grad_atol=-1.0)


@settings(max_examples=30, deadline=None)
@given(st.floats(1e-6, 1e-3), st.floats(1e7, 1e11))
def test_relative_fit_recovers_latency_and_bandwidth(latency, bw):
    pts = [(float(b), latency + b / bw) for b in (1024, 16384, 262144, 1048576, 4194304, 16777216, 67108864)]
    lat, fitted = fit_linear_relative(pts, floor_s=1e-9)
    assert lat == pytest.approx(latency, rel=1e-3, abs=1e-9)
    assert fitted == pytest.approx(bw, rel=1e-3)
    rms, worst = residuals(pts, lat, fitted)
    assert rms < 1e-6 and worst < 1e-2


def test_residuals_of_a_bad_fit():
    rms, worst = residuals([(1.0, 1.0), (2.0, 3.0)], 0.0, 1.0)  # fit says 1 and 2
    assert rms == pytest.approx(math.sqrt(0.5)) and worst == pytest.approx(1 / 3)


def test_free_ports_are_distinct():
    ports = free_ports(4)
    assert len(set(ports)) == 4 and all(p > 0 for p in ports)


def test_bad_hyper_parameters_and_devices_are_refused():
    with pytest.raises(ConfigError, match="steps"):
        TFDistributedRuntime(steps=0)
    with pytest.raises(ConfigError, match="warmup"):
        TFDistributedRuntime(warmup=-1)
    with pytest.raises(ConfigError, match="max_interference"):
        TFDistributedRuntime(max_interference=-0.1)
    with pytest.raises(ConfigError, match="retries"):
        TFDistributedRuntime(retries=-1)
    with pytest.raises(ConfigError, match="gpu9"):
        WorkerPool(uniform_cluster(2, 1e9), ["gpu9"])
    with pytest.raises(ConfigError, match="t0"):
        WorkerPool(Cluster([Device("t0", "TPU")]), None)


def test_predicted_step_adds_the_measured_empty_step():
    graph = OpGraph()
    graph.nx.graph["profile"] = {"step_overhead_s": 0.5}
    assert predicted_step(1.0, graph, {2: 0.7}, 1) == pytest.approx(1.5)
    assert predicted_step(1.0, graph, {2: 0.7}, 2) == pytest.approx(1.7)
    assert predicted_step(1.0, graph, {2: 0.7}, 3) == pytest.approx(1.7)


# --------------------------------------------------------------------------------- slow: real worker processes
@pytest.fixture(scope="module")
def mlp():
    backend = TFBackend()
    m = backend.build(load_model_cfg("mlp_tiny", {"optimizer": "rmsprop"}))
    return backend, m, backend.capture(m)


@pytest.fixture(scope="module")
def split_run(mlp):
    backend, m, g = mlp
    cluster = uniform_cluster(2, 4e9)
    rules = [["l0", 0], ["l1", 1], ["out", 1], ["loss", 1]]
    placement = ExpertPlacer(rules, strip_prefixes=["gradients/"]).place(g, cluster).assignment
    runtime = TFDistributedRuntime(warmup=2, steps=10)
    res = runtime.run(backend, m, g, placement, {}, cluster)
    return cluster, placement, res, runtime.last_step_stats


@pytest.mark.slow
def test_split_run_matches_one_device_and_measures(split_run):
    cluster, placement, res, step_stats = split_run
    assert len(set(placement.values())) == 2
    ex = res.extra
    assert ex["loss_match"] and ex["grad_match"] and ex["correct"] and ex["gradients_checked"] >= 6
    assert ex["grad_max_rel_error"] <= 1e-4 and ex["misplaced_ops"] == 0
    # the update: every variable after the first step, RMSProp's two slots per parameter included
    assert ex["update_match"] and ex["variables_checked"] >= 3 * ex["gradients_checked"]
    assert ex["update_max_rel_error"] <= 1e-4 and math.isfinite(ex["loss_after_update"])
    assert len(res.step_times_s) == 10 and res.measured_step_s > 0
    assert min(res.step_times_s) <= res.measured_step_s <= max(res.step_times_s)
    # the workers' paces judged every step; at most half may be left out, and the median is of the rest
    assert ex["slow_steps"] is None or ex["slow_steps"] == len(res.slow_steps) <= 5
    assert res.measured_step_s == pytest.approx(statistics.median(res.counted_times()))
    assert res.step_iqr_s is not None and res.step_iqr_s >= 0
    # measured gRPC bytes in both directions, close to the graph-edge estimate (a few bytes differ: TF moves
    # each tensor once per destination task, the estimate takes the largest edge per producer and device)
    assert set(ex["traffic_by_pair_bytes"]) == {"cpu0->cpu1", "cpu1->cpu0"}
    assert 1 <= ex["traced_steps"] <= 3 and ex["traffic_pairs_missing"] == []
    assert res.traffic_bytes == pytest.approx(ex["traffic_estimate_bytes"], rel=0.25)
    assert all(res.peak_memory_bytes[d] > 0 for d in ("cpu0", "cpu1"))
    assert all(ex["rss_growth_bytes"][d] > 0 for d in ("cpu0", "cpu1"))
    assert ex["oversubscribed"] is False
    # each worker's processor time per measured step: a delta over the measured steps, at most its one core
    cpu = ex["worker_cpu_per_step_s"]
    assert set(cpu) == {"cpu0", "cpu1"} and all(v >= 0 for v in cpu.values())
    assert max(cpu.values()) * len(res.step_times_s) <= sum(res.step_times_s) + 0.05
    # the traced step is kept for experiments: nearly every placed op is in it, each on its device's task
    traced = {ns.node_name: ds.device for ds in step_stats.dev_stats for ns in ds.node_stats}
    task = {"cpu0": "/task:0/", "cpu1": "/task:1/"}
    assert all(task[placement[op]] in traced[op] for op in placement if op in traced)
    assert len([op for op in placement if op in traced]) >= 0.9 * len(placement)


@pytest.mark.slow
def test_a_wrong_update_is_caught_and_named(mlp, monkeypatch):
    """The correctness check compares every variable after the first update with the reference's: one variable
    of the reference moved by 1 % must make the run incorrect and be named as the worst."""
    backend, m, g = mlp
    real = distributed._reference

    def moved(*args, **kwargs):
        values, losses, after = real(*args, **kwargs)
        name = sorted(after)[0]
        after[name] = after[name] * 1.01 + 1e-3
        return values, losses, after

    monkeypatch.setattr(distributed, "_reference", moved)
    cluster = uniform_cluster(2, 4e9)
    placement = ExpertPlacer([["l0", 0], ["l1", 1], ["out", 1], ["loss", 1]], strip_prefixes=["gradients/"]).place(
        g, cluster
    )
    res = TFDistributedRuntime(warmup=0, steps=1).run(backend, m, g, placement.assignment, {}, cluster)
    ex = res.extra
    assert ex["loss_match"] and ex["grad_match"]
    assert not ex["update_match"] and not ex["correct"]
    assert ex["update_worst_variable"] == sorted(distributed.model_variables(m), key=lambda v: v.op.name)[0].op.name
    assert ex["update_max_rel_error"] > 1e-3


@pytest.mark.slow
def test_a_badly_conditioned_model_split_is_correct_by_its_update():
    """inception_v3_tiny split over two workers: gradients and every variable after the first update agree with
    the single-device reference to rounding, while the loss after that update, which its training-mode batch
    norms over maps of a few pixels amplify, may differ by more than the loss tolerance (2.1e-4 of 3.12 here, 29
    Nov 2026): it is reported, not judged."""
    backend = TFBackend()
    m = backend.build(load_model_cfg("inception_v3_tiny", {}))
    g = backend.capture(m)
    idx = g.index()
    side: dict[str, str] = {}
    placement = {}
    for i, name in enumerate(idx.names):  # runs of 40 colocation groups, alternately on each device
        key = idx.colocation[i] or name
        side.setdefault(key, f"cpu{(len(side) // 40) % 2}")
        placement[name] = side[key]
    res = TFDistributedRuntime(warmup=0, steps=1).run(backend, m, g, placement, {}, uniform_cluster(2, 4e9))
    ex = res.extra
    assert len(set(placement.values())) == 2 and ex["traffic_by_pair_bytes"]
    assert ex["correct"] and ex["update_match"] and ex["variables_checked"] > 100
    assert ex["update_max_rel_error"] <= 1e-4 and ex["grad_max_rel_error"] <= 1e-4
    assert ex["loss_after_update_rel_error"] >= 0 and math.isfinite(ex["loss_after_update"])


@pytest.mark.slow
def test_workers_are_pinned_and_gone_after_the_run(split_run):
    _, _, res, _ = split_run
    pids = [w["pid"] for w in res.workers]
    assert [w["device"] for w in res.workers] == ["cpu0", "cpu1"]
    assert len(set(pids)) == 2 and os.getpid() not in pids
    host = res.extra["host_cores"]
    assert [w["cores"] for w in res.workers] == [[host[0]], [host[1 % len(host)]]]
    assert not any(_alive(p) for p in pids)


@pytest.mark.slow
def test_disturbed_measured_steps_are_measured_again(mlp, monkeypatch):
    """The first set of measured steps reads as disturbed (20 % of the cores taken), the second as clean: the
    steps are measured twice in the same session and the clean set kept. (The cores' paces are read as all fast:
    the VM's real slow spells would add attempts of their own.)"""
    import backends.tensorflow.distributed as tfdist

    shares = iter([0.2, 0.01])
    monkeypatch.setattr(tfdist.interference, "others_share", lambda spans: next(shares))
    monkeypatch.setattr(tfdist.interference, "slow_steps", lambda paces: [False] * (len(paces[0]) - 1))
    backend, m, g = mlp
    cluster = uniform_cluster(2, 4e9)
    placement = SinglePlacer().place(g, cluster).assignment
    res = TFDistributedRuntime(warmup=1, steps=3, check_correctness=False).run(backend, m, g, placement, {}, cluster)
    assert res.extra["interference_attempts"] == [0.2, 0.01] and res.extra["host_interference"] == 0.01
    assert len(res.step_times_s) == 3 and len(res.extra["losses"]) == 4  # warm-up + the first measured set


@pytest.mark.slow
def test_single_device_run_has_one_worker_and_no_traffic(mlp):
    backend, m, g = mlp
    cluster = uniform_cluster(2, 4e9)
    placement = SinglePlacer().place(g, cluster).assignment
    res = TFDistributedRuntime(warmup=1, steps=10, check_correctness=False).run(backend, m, g, placement, {}, cluster)
    assert [w["device"] for w in res.workers] == ["cpu0"]
    assert res.traffic_bytes == 0 and res.extra["traffic_estimate_bytes"] == 0
    assert not _alive(res.workers[0]["pid"])


@pytest.mark.slow
def test_workers_are_stopped_when_the_run_fails(mlp, monkeypatch):
    backend, m, g = mlp
    cluster = uniform_cluster(2, 4e9)
    placement = ExpertPlacer([["l0", 0], ["l1", 1]], strip_prefixes=["gradients/"]).place(g, cluster).assignment
    seen: list[int] = []

    def boom(self, pool, *args, **kwargs):
        seen.extend(pool.pids())
        assert all(_alive(p) for p in seen)
        raise RuntimeError("injected failure")

    monkeypatch.setattr(TFDistributedRuntime, "_run_on", boom)
    with pytest.raises(RuntimeError, match="injected"):
        TFDistributedRuntime(warmup=0, steps=1).run(backend, m, g, placement, {}, cluster)
    assert len(seen) == 2 and not any(_alive(p) for p in seen)


def test_invalid_placement_starts_no_worker(mlp):
    backend, m, g = mlp
    placement = {op: "cpu7" for op in g.ops}
    with pytest.raises(InvalidPlacement, match="cpu7"):
        TFDistributedRuntime().run(backend, m, g, placement, {}, uniform_cluster(2, 4e9))


@pytest.mark.slow
def test_steps_in_a_slow_spell_of_a_workers_core_are_left_out(mlp, monkeypatch):
    """The runtime asks every worker for its core's pace before each measured step and after the last; a slow
    pace of either worker marks the steps on both sides of it, which the median leaves out (the paces are
    replaced here: the VM's spells do not come on demand)."""
    import backends.interference as interference

    backend, m, g = mlp
    monkeypatch.setattr(interference, "_pace_floor", [float("inf")])
    calls: list[list[float]] = []
    real = WorkerPool.paces

    def paces(self):
        got = real(self)  # the real request, on every worker
        assert len(got) == 2 and all(p > 0 for p in got)
        calls.append(got)
        return [1e-5, 2e-5 if len(calls) == 4 else 1e-5]  # the 4th pace: after step 2, before step 3

    monkeypatch.setattr(WorkerPool, "paces", paces)
    cluster = uniform_cluster(2, 4e9)
    rules = [["l0", 0], ["l1", 1], ["out", 1], ["loss", 1]]
    placement = ExpertPlacer(rules, strip_prefixes=["gradients/"]).place(g, cluster).assignment
    res = TFDistributedRuntime(warmup=1, steps=6, check_correctness=False).run(backend, m, g, placement, {}, cluster)
    assert len(calls) == 7 and res.slow_steps == [2, 3] and res.extra["slow_steps"] == 2
    assert res.measured_step_s == pytest.approx(statistics.median(res.step_times_s[:2] + res.step_times_s[4:]))
    assert res.extra["interference_attempts"][-1] is not None


@pytest.mark.slow
def test_profile_in_a_pinned_worker_adds_up_to_the_measured_step(mlp):
    _, m, g = mlp
    p = profile_distributed(m, g, uniform_cluster(2, 4e9), warmup=2, steps=5)
    info = p.nx.graph["profile"]
    assert set(p.ops) == set(g.ops)
    assert info["traced_op_sum_s"] > 0 and info["untraced_step_s"] > 0 and info["step_overhead_s"] > 0
    total = sum(a["compute_s"] for _, a in p.nx.nodes(data=True))
    # the ops add up to the median difference of the paired untraced and empty steps (the traced sum where
    # that difference is within the noise)
    want = info["untraced_ops_s"] if info["untraced_ops_s"] > 0 else info["traced_op_sum_s"]
    assert total == pytest.approx(want, rel=1e-6)
    assert "cores [" in info["setting"]
    # ten untraced/empty pairs, of which slow spells of the core may have taken at most half
    assert 5 <= info["pairs_counted"] <= 10 and len(info["interference_attempts"]) >= 1


@pytest.mark.slow
def test_comm_fit_from_grpc_transfers_between_workers():
    fit = comm_benchmark_distributed(uniform_cluster(2, 4e9), sizes=[1024, 262144, 4194304], repeats=3)
    assert set(fit.links) == {("cpu0", "cpu1"), ("cpu1", "cpu0")}
    assert len(fit.samples) == 2 * 3 * 3
    assert fit.latency_s >= 0 and fit.bytes_per_s > 0 and fit.step_overhead_s > 0
    # 4 MB over loopback gRPC takes measurable time: a finite bandwidth, below 100 GB/s
    assert math.isfinite(fit.bytes_per_s) and fit.bytes_per_s < 1e11
    assert fit.residual_rms_s >= 0 and math.isfinite(fit.residual_max_rel)
    # bursts of small transfers: one median per count, a non-negative marginal cost per transfer
    assert [k for k, _ in fit.burst_medians] == [1, 16, 64, 256]
    assert 0 <= fit.per_transfer_s < 0.1
    # each RecvTensor RPC costs both processes processor time (tens of microseconds here), read from procfs
    assert 0 < fit.send_overhead_s < 0.01 and 0 < fit.recv_overhead_s < 0.01


def test_process_cpu_time_counts_every_thread():
    import threading

    before = _process_cpu_s(os.getpid())

    def spin() -> None:
        t = time.thread_time()
        while time.thread_time() - t < 0.2:
            pass

    th = threading.Thread(target=spin)
    th.start()
    th.join()
    assert _process_cpu_s(os.getpid()) - before >= 0.15  # a thread that has exited still counts
    assert _process_cpu_s(2**22 + 12345) == 0.0  # no such process


def test_more_cores_than_the_host_has_is_flagged_and_logged(monkeypatch, caplog):
    spawned = []
    monkeypatch.setattr(WorkerPool, "_spawn", lambda self, sub, pins: spawned.append(pins))
    pool = WorkerPool(uniform_cluster(3, 1e9), None, host_cores=[0, 1])
    with caplog.at_level("WARNING", logger="backends.tensorflow.workers"):
        pool.start()
    assert pool.oversubscribed and "share cores" in caplog.text
    assert spawned == [[[0], [1], [0]]]  # the third worker wraps round onto core 0
    ok = WorkerPool(uniform_cluster(2, 1e9), None, host_cores=[0, 1])
    ok.start()
    assert not ok.oversubscribed and spawned[-1] == [[0], [1]]


@pytest.mark.slow
def test_reference_runs_on_the_workers_kernels_after_a_local_session():
    """The single-device reference is computed on a worker, not in the client: a client's local session sums in
    the thread order of the process's first session (here a profile's, with TensorFlow's default threads), and
    inception_v3_tiny's batch norms over maps of a few pixels turned that rounding into gradients 43 % apart.
    One device placed and the reference must now agree bit for bit."""
    backend = TFBackend()
    m = backend.build(load_model_cfg("inception_v3_tiny", {}))
    g = backend.profile(m, backend.capture(m), warmup=1, steps=1)  # local sessions in this process first
    cluster = uniform_cluster(2, 4e9)
    placement = {op: "cpu0" for op in g.ops}
    res = TFDistributedRuntime(warmup=0, steps=1).run(backend, m, g, placement, {}, cluster)
    ex = res.extra
    assert ex["correct"] and ex["gradients_checked"] > 50
    assert ex["grad_max_abs_error"] == 0.0 and ex["loss_abs_error"] == 0.0


@pytest.mark.slow
def test_in_step_calibration_fits_the_runtimes_own_placed_steps():
    """End to end on two pinned gRPC workers: the calibration program's block placements exchange more
    tensors the shorter the blocks, the fitted costs are non-negative, and the fit explains the measured steps
    (loosely: a shared machine is noisy)."""
    from backends.tensorflow.calibrate import calibrate_in_step

    cluster = uniform_cluster(2, latency_s=50e-6, bytes_per_s=1e9)
    cal = calibrate_in_step(
        cluster, step_overhead_s=5e-4, blocks=(4, 128), rounds=1, warmup=1, steps=3, profile_warmup=1, profile_steps=2
    )
    few, many = sorted(cal.placements, key=lambda r: r["messages"])
    assert many["block"] == 4 and few["block"] == 128 and many["messages"] > 2 * few["messages"]
    assert cal.latency_s >= 0 and cal.send_overhead_s >= 0 and cal.recv_overhead_s >= 0
    assert all(r["measured_s"] > 0 and r["predicted_s"] > 0 for r in cal.placements)
    assert cal.rel_rms < 0.5, cal
    assert len(cal.profile_step_s) == 1
    # the wide program's placements ran by the same blocks, and the per-byte time fits them at least as well as
    # none does (it is fitted on them: 0 is among its candidates)
    assert [r["block"] for r in cal.byte_placements] == [4, 128]
    assert cal.send_byte_s >= 0 and cal.recv_byte_s >= 0

    def rms(key: str) -> float:
        return math.sqrt(
            statistics.fmean(((r[key] - r["measured_s"]) / r["measured_s"]) ** 2 for r in cal.byte_placements)
        )

    assert cal.rel_rms_bytes == pytest.approx(rms("predicted_s"), rel=1e-6)
    assert rms("predicted_s") <= rms("predicted_without_byte_costs_s") + 1e-12


@pytest.mark.slow
def test_in_step_calibration_on_an_evaluated_models_own_block_placements():
    """`model_cfg`: the same fit on block placements of the model under evaluation (mlp_tiny here): its own
    op count sets how many tensors the blocks exchange, and the costs come out non-negative."""
    from backends.tensorflow.calibrate import calibrate_in_step

    cluster = uniform_cluster(2, latency_s=50e-6, bytes_per_s=1e9)
    cfg = load_model_cfg("mlp_tiny", {"optimizer": "rmsprop"})
    cal = calibrate_in_step(
        cluster,
        step_overhead_s=5e-4,
        blocks=(2, 64),
        rounds=1,
        warmup=1,
        steps=3,
        profile_warmup=1,
        profile_steps=2,
        model_cfg=cfg,
        byte_costs=False,
    )
    assert cal.byte_placements == [] and cal.send_byte_s == cal.recv_byte_s == 0.0
    few, many = sorted(cal.placements, key=lambda r: r["messages"])
    assert many["block"] == 2 and few["block"] == 64 and many["messages"] > few["messages"]
    # fewer tensors than the 24-layer calibration program's shortest blocks exchange (308 at block 2)
    assert many["messages"] < 200
    assert cal.latency_s >= 0 and cal.send_overhead_s >= 0 and cal.recv_overhead_s >= 0


def test_received_tensors_count_from_arrival_to_their_last_reader():
    """A tensor received over gRPC is in no op's allocation records: `received_buffers` counts it on the
    receiving task from the receive's end to the end of the last op there that reads it, and
    `task_allocations` adds those events to the ops' own."""
    from backends.tensorflow.distributed import received_buffers

    ss = step_stats_pb2.StepStats()
    ds = ss.dev_stats.add(device=W1)
    ds.node_stats.add(
        node_name="RecvTensor",
        timeline_label=f"[1.5MB] [8.1Gb/s] edge_103_l0/w from {W0} to {W1}",
        all_start_micros=100,
        all_end_rel_micros=10,
    )
    ds.node_stats.add(
        node_name="RecvTensor",
        timeline_label=f"[64B] [1Mb/s] edge_7_l0/b from {W0} to {W1}",
        all_start_micros=105,
        all_end_rel_micros=5,
    )
    mm = ds.node_stats.add(node_name="l1/MatMul", all_start_micros=120, all_end_rel_micros=30)
    mem = mm.memory.add()
    mem.allocation_records.add(alloc_micros=130, alloc_bytes=1000)
    mem.allocation_records.add(alloc_micros=160, alloc_bytes=-1000)
    ds.node_stats.add(node_name="l1/Add", all_start_micros=155, all_end_rel_micros=20)
    sizes = {"l0/w": [1605632.0]}
    consumers = {"l0/w": {"l1/MatMul", "on_task_0_only"}, "l0/b": {"l1/Add"}}
    events = received_buffers(ss, sizes, consumers)
    assert sorted(events[1]) == [(110, 64), (110, 1605632), (150, -1605632), (175, -64)]
    assert task_allocations(ss, events) == {1: (0.0, 1605632.0 + 64 + 1000)}
    assert task_allocations(ss) == {1: (0.0, 1000.0)}  # the ops' own records alone
    # a receive none of whose readers ran on the task stays allocated to the step's end
    left = received_buffers(ss, sizes, {"l0/b": {"l1/Add"}})
    assert (110, 1605632) in left[1] and not any(b == -1605632 for _, b in left[1])
