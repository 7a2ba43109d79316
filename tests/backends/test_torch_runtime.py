"""PyTorch backend, placed execution: random placements, expert and single-device placements, and every placer
configured under conf/placer give the same loss and gradients as a single-device step; bad schedules and
memory caps are reported."""

from __future__ import annotations

import functools
import random

import pytest
import torch

from algorithms.cluster import uniform_cluster
from algorithms.errors import InfeasiblePlacement, InvalidSchedule, OutOfMemory
from algorithms.placement import Placement, check_placement, topological_schedule
from algorithms.placers.baseline import ExpertPlacer, SinglePlacer
from algorithms.schedulers.baseline import PlacerOrderScheduler
from algorithms.simulator import simulate
from backends.torch import TorchBackend
from backends.torch.config import load_model_cfg
from orchestrator.context import build_cluster
from orchestrator.registry import load_choice
from tests.stage_configs import PLACERS, build_placer

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("torch_one_thread")]


@functools.cache
def _cached_setup(name, granularity, overrides):
    return _build(name, granularity, **dict(overrides))


def _setup(name, granularity="operator", **overrides):
    """Backend, model and profiled graph (shared between tests: runs never modify the model)."""
    return _cached_setup(name, granularity, tuple(sorted(overrides.items())))


def _build(name, granularity, **overrides):
    backend = TorchBackend(granularity=granularity, device="cpu")
    model = backend.build(load_model_cfg(name, overrides))
    graph = backend.profile(model, backend.capture(model), warmup=0, steps=1)
    return backend, model, graph


def random_placement(graph, cluster, seed):
    """Every colocation group on one random device, every other op anywhere."""
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


def _run_and_check(backend, model, graph, placement, cluster, schedule=None):
    assign = placement.assignment if isinstance(placement, Placement) else placement
    check_placement(graph, cluster, assign)
    if schedule is None:
        schedule = topological_schedule(graph, assign, cluster.names)
    result = backend.run(model, graph, assign, schedule, cluster, warmup=0, steps=2)
    assert result.extra["correct"], result.extra
    assert result.measured_step_s > 0 and len(result.step_times_s) == 2
    sim = simulate(graph, cluster, assign, schedule)
    # the runtime moves what the simulator predicts (one copy per producer and destination device)
    used = set(assign.values())
    if len(used) == 1:
        assert result.traffic_bytes == 0
    else:
        assert result.traffic_bytes >= 0.5 * sim.traffic_bytes
    assert set(result.peak_memory_bytes) == set(cluster.names)
    for d in used:
        assert result.peak_memory_bytes[d] > 0
    return result


@pytest.mark.parametrize("seed", [0, 1])
def test_random_placements_mlp(seed):
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(3)
    _run_and_check(backend, model, graph, random_placement(graph, cluster, seed), cluster)


def test_random_placement_linreg_rmsprop_module():
    backend, model, graph = _setup("linreg_tiny", granularity="module", optimizer="rmsprop")
    cluster = uniform_cluster(2)
    r = _run_and_check(backend, model, graph, random_placement(graph, cluster, 3), cluster)
    # training goes on: the loss falls over the steps
    assert r.extra["losses"][-1] < r.extra["losses"][0]


def test_single_device_has_no_traffic():
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(2)
    r = _run_and_check(backend, model, graph, SinglePlacer().place(graph, cluster), cluster)
    assert r.peak_memory_bytes["cpu1"] == 0


def test_deadlocking_schedule_is_rejected():
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(2)
    assign = random_placement(graph, cluster, 0)
    sched = topological_schedule(graph, assign, cluster.names)
    for dev in sched:
        sched[dev] = list(reversed(sched[dev]))
    with pytest.raises(InvalidSchedule):
        backend.run(model, graph, assign, sched, cluster, warmup=0, steps=1)


def test_memory_cap_is_enforced():
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(2, memory_bytes=100.0)
    assign = random_placement(graph, cluster, 0)
    with pytest.raises(OutOfMemory):
        backend.run(model, graph, assign, None, cluster, warmup=0, steps=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gnmt_tiny", "inception_v3_tiny", "transformer_tiny", "gpt_tiny"])
@pytest.mark.parametrize("granularity", ["operator", "module"])
def test_random_placements_tiny_models(name, granularity):
    backend, model, graph = _setup(name, granularity)
    cluster = uniform_cluster(3)
    _run_and_check(backend, model, graph, random_placement(graph, cluster, 7), cluster)


@pytest.mark.slow
def test_gnmt_expert_placement():
    cfg = load_model_cfg("gnmt_tiny")
    backend, model, graph = _setup("gnmt_tiny", "module")
    cluster = uniform_cluster(4)
    placer = ExpertPlacer(cfg["expert_rules"], strip_prefixes=cfg["expert_strip_prefixes"])
    pl = placer.place(graph, cluster)
    # Baechi 5.3: each LSTM layer on its own device, embedding with the first, projection with the last
    assert pl["enc/l1/c0"] == "cpu1" and pl["dec/l2/c1"] == "cpu2"
    assert pl["embed/src"] == pl["enc/l0/c0"] == "cpu0"
    assert pl[next(o for o in graph.ops if o.startswith("proj"))] == pl["dec/l3/c0"] == "cpu3"
    assert pl["gradients/enc/l2/c1"] == "cpu2"
    _run_and_check(backend, model, graph, pl, cluster)


@pytest.mark.slow
@pytest.mark.parametrize("placer_name", PLACERS)
@pytest.mark.parametrize("name", ["mlp_tiny", "gnmt_tiny"])
def test_every_configured_placer(placer_name, name):
    """Whatever placers the registry finds when this runs: place, schedule, run, compare. A placement that
    does not fit the devices' memory is the one outcome that is not run."""
    cfg = load_model_cfg(name)
    backend, model, graph = _setup(name, "module")
    cluster = build_cluster(load_choice("cluster", "cpu4"), "cpu4")
    placer = build_placer(placer_name, cfg)
    try:
        pl = placer.place(graph, cluster)
    except InfeasiblePlacement as exc:
        pytest.skip(f"{placer_name} finds no placement within the devices' memory: {exc}")
    sched = PlacerOrderScheduler().order(graph, cluster, pl)
    _run_and_check(backend, model, graph, pl, cluster, sched)


def test_threads_per_virtual_device():
    _, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(2)
    assign = random_placement(graph, cluster, 0)
    torch.set_num_threads(2)
    split = TorchBackend(device="cpu", threads=None).run(model, graph, assign, None, cluster, warmup=0, steps=1)
    fixed = TorchBackend(device="cpu", threads=2).run(model, graph, assign, None, cluster, warmup=0, steps=1)
    assert split.extra["threads_per_worker"] == 1 and fixed.extra["threads_per_worker"] == 2
    assert torch.get_num_threads() == 2  # restored after the run
    assert split.extra["correct"] and fixed.extra["correct"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["mlp_tiny", "gnmt_tiny"])
def test_cuda_devices(name):
    """GPU-type devices on CUDA: several virtual devices share a GPU (a stream each) when there is one."""
    backend = TorchBackend(granularity="module", device="cuda")
    model = backend.build(load_model_cfg(name))
    graph = backend.profile(model, backend.capture(model), warmup=1, steps=2)
    assert all(a["profiled_on"] == "cuda" for _, a in graph.nx.nodes(data=True))
    cluster = uniform_cluster(2, memory_bytes=1e9, type="GPU")
    fit = backend.comm_benchmark(cluster, sizes=[4096, 1048576], repeats=2)
    assert fit.bytes_per_s > 0
    r = backend.run(model, graph, random_placement(graph, cluster, 0), None, cluster, warmup=1, steps=2)
    assert r.extra["correct"], r.extra
    assert all(v.startswith("cuda") for v in r.extra["physical_devices"].values())
    assert max(r.peak_memory_bytes.values()) > 0


def test_placed_run_times_every_op_on_request():
    backend, model, graph = _setup("mlp_tiny")
    cluster = uniform_cluster(2)
    rng = random.Random(5)
    pl = {op: rng.choice(cluster.names) for op in graph.ops}
    groups = graph.colocation_groups()
    for members in groups.values():  # keep colocation
        for m in members:
            pl[m] = pl[members[0]]
    res = backend.run(
        model, graph, pl, topological_schedule(graph, pl, cluster.names), cluster, warmup=1, steps=2, time_ops=True
    )
    times = res.extra["op_times_s"]
    assert set(times) == set(graph.ops)
    assert all(t >= 0 for t in times.values())
    assert sum(times.values()) <= 2 * sum(res.step_times_s)  # per-op times fit inside the measured steps
    assert "op_times_s" not in backend.run(model, graph, pl, None, cluster, warmup=0, steps=1).extra


@pytest.mark.parametrize("name", ["mlp_tiny", "gnmt_tiny", "transformer_tiny", "inception_v3_tiny"])
def test_single_device_live_memory_is_the_simulated_peak(name):
    """On one device the runtime's live-tensor accounting and the simulator agree byte for byte: gradients
    are freed after their last use and a parameter's new value replaces it (an in-place optimizer step)."""
    backend, model, graph = _setup(name)
    cluster = uniform_cluster(2)
    assign = {op: "cpu0" for op in graph.ops}
    schedule = topological_schedule(graph, assign, cluster.names)
    r = backend.run(model, graph, assign, schedule, cluster, warmup=0, steps=2)
    assert r.extra["correct"], r.extra
    sim = simulate(graph, cluster, assign, schedule)
    assert r.peak_memory_bytes["cpu0"] == pytest.approx(sim.peak_memory["cpu0"], rel=1e-9)


def _items_late_order(graph):
    """A topological order that runs each op of a tuple's items (``items_of``) as late as it can: only when no
    other op is ready."""
    import heapq

    idx = graph.index()
    late = [graph.op(n).get("items_of") is not None for n in idx.names]
    missing = [len(p) for p in idx.pred]
    ready = [(late[i], i) for i in range(idx.n) if missing[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(idx.names[i])
        for j, _ in idx.succ[i]:
            missing[j] -= 1
            if missing[j] == 0:
                heapq.heappush(ready, (late[j], j))
    return out


@pytest.mark.parametrize("name", ["transformer_tiny", "inception_v3_tiny"])
def test_items_run_with_their_producer_in_the_schedule(name):
    """A runtime holds a tuple's items from their producer's run on. An order that runs other ops between the
    producer and the op of its items made the simulator's count differ from the worker's; the schedule
    stage's `items_follow_their_producer` runs that op right after its producer, and the runtime's live peak is
    the simulated one again, byte for byte, on the same placement."""
    from algorithms.placement import items_follow_their_producer
    from orchestrator.stages.schedule import check_replays

    backend, model, graph = _setup(name)
    cluster = uniform_cluster(2)
    assign = {op: "cpu0" for op in graph.ops}
    late = {"cpu0": _items_late_order(graph), "cpu1": []}
    fixed = items_follow_their_producer(graph, late)
    check_replays(graph, cluster, fixed)
    pos = {op: k for k, op in enumerate(fixed["cpu0"])}
    items = [op for op in graph.ops if graph.op(op).get("items_of")]
    assert items
    for op in items:  # each right after its producer, or after an earlier items' op of the same producer
        k = pos[graph.op(op)["items_of"]] + 1
        while fixed["cpu0"][k] != op:
            assert graph.op(fixed["cpu0"][k]).get("items_of") == graph.op(op)["items_of"]
            k += 1
    r = backend.run(model, graph, assign, late, cluster, warmup=0, steps=1)
    assert r.extra["correct"], r.extra
    # the late order: the items are not counted between producer and items' op, and the producer's output is
    # held until the items' op, which reads it; either error can decide the peak
    assert simulate(graph, cluster, assign, late).peak_memory["cpu0"] != pytest.approx(
        r.peak_memory_bytes["cpu0"], rel=1e-3
    )
    assert simulate(graph, cluster, assign, fixed).peak_memory["cpu0"] == pytest.approx(
        r.peak_memory_bytes["cpu0"], rel=1e-9
    )


@pytest.mark.parametrize("name,seed", [("gnmt_tiny", 0), ("gnmt_tiny", 1), ("transformer_tiny", 0)])
def test_planned_run_follows_the_simulated_memory(name, seed):
    """`plan=` (runtime.order=planned): one thread runs ops and copies in the simulated order; the placed step
    stays correct and each device's live peak is the simulated one or a little below (ops run atomically at
    their start, while the simulator frees an op's inputs at its end). A storage that a device reads as several
    values (a tensor and its views) crosses once, as the simulator counts: copied value by value, as before
    session 31, the peaks were up to 0.6 % above the simulated ones here and the traffic 4-6 % above
    (gnmt_mem_limited under m-ETF: 18 % above on one device, from a 10 MB log-softmax gradient and its view)."""
    backend, model, graph = _setup(name)
    cluster = uniform_cluster(3, latency_s=1e-5, bytes_per_s=1e9)
    assign = random_placement(graph, cluster, seed)
    schedule = topological_schedule(graph, assign, cluster.names)
    sim = simulate(graph, cluster, assign, schedule)
    plan = (
        {n: sim.start[i] for i, n in enumerate(sim.names)},
        [(op, dst, arrive) for op, _, dst, _, arrive, _ in sim.transfers],
    )
    r = backend.run(model, graph, assign, schedule, cluster, warmup=0, steps=2, plan=plan)
    assert r.extra["correct"], r.extra
    assert r.extra["losses"][1] != r.extra["losses"][0]  # parameters were updated between steps
    for d in cluster.names:
        assert 0.9 * sim.peak_memory[d] <= r.peak_memory_bytes[d] <= sim.peak_memory[d] * (1 + 1e-9), d
    # 0.6-1.2 % above in the runs seen: a few views cannot be rebuilt on the receiver (StepAnalysis._view_chain)
    assert r.traffic_bytes == pytest.approx(sim.traffic_bytes, rel=0.02)
    # a cap the plan cannot keep is reported as out of memory on that device
    d = max(sim.peak_memory, key=sim.peak_memory.get)
    tight = cluster.with_memory({d: sim.peak_memory[d] * 0.5})
    with pytest.raises(OutOfMemory, match=d):
        backend.run(model, graph, assign, schedule, tight, warmup=0, steps=1, plan=plan)
