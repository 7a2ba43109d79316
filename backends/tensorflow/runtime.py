"""Placed execution of a TensorFlow training graph on virtual devices of ONE process (`runtime=threads`).

This is the in-process fallback; `runtime=real` is `distributed.TFDistributedRuntime` (one pinned
`tf.distribute.Server` process per device). Limits of this one, which is why it is not the real runtime
(issue 16):

* the cluster's CPU devices are virtual CPU devices of one process (``device_count={'CPU': n}``): they share
  one inter-op and one intra-op thread pool and the host allocator, and none is pinned to cores, so two
  "devices" are not two workers. The measured step hardly depends on the placement, and a split placement
  may run faster or slower than the hardware it models would (TensorFlow `mlp_tiny` on `cpu2`: 0.22 ms
  measured against 0.12 ms predicted, the issue's figures);
* a cross-device "copy" between virtual CPU devices hands a pointer over, so the measured traffic here is the
  graph-edge estimate, not bytes that moved, and the communication fit of comm.py finds no size dependence;
* peak memory per device comes from allocation records of one traced step (virtual devices share the host
  allocator, whose counters cannot tell them apart);
* the step time reported is the mean (`measured_step_s`; the median is in ``extra``), with no IQR and no
  `workers` list.

`run_placed` rebuilds the model (same config, same op names, same seeded initial weights and data), pins every
op named in the placement to its device with ``op._set_device``, and runs training steps in a session whose
devices are the cluster's (see `session.py`). Ops a step does not run (initialisers) follow their colocation
group, or the variable whose handle they read; TensorFlow places whatever is left. Colocation is kept: the
``_class`` attributes stay on the ops, and a placement that splits a group is refused up front by
`check_placement` (TensorFlow would refuse it too).

The schedule is advisory: TensorFlow's executor runs any op whose inputs are ready, in its own order, so the
per-device orders of `schedule` are not enforced (they are only checked for consistency with the placement).

Measurements:

* step time: wall-clock time of ``session.run([train_op, loss])``; the first `warmup` steps are discarded and
  the mean of the next `steps` is reported (Celeritas 6.3 discards 5 and averages 50).
* peak memory per device: the persistent bytes of the ops placed there (variables, optimizer slots, constants:
  held for the whole step) plus the peak of the allocation records of that device's ops in one extra traced
  step (not timed). Virtual CPU devices share one host allocator, so the allocator's own counters cannot tell
  them apart; the records can.
* traffic: bytes of the cross-device tensor edges, counted once per (producer, destination device) with the
  largest tensor sent there, as TensorFlow's send/receive pairs move them (and as the simulator counts them).
* busy time per device: the summed op times of that device's ops in the traced step (`extra["device_busy_s"]`,
  comparable with the simulator's `busy_s`).
* correctness: the losses of the first steps; with `reference_losses` they are compared with the same steps on
  a single device.

Complexity: O(V + E) to place, plus the cost of the steps.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf
from tqdm import tqdm

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError, InvalidPlacement
from algorithms.graph import OpGraph
from algorithms.placement import check_placement, check_schedule
from backends.base import RunResult

from .capture import colocation_roots, fan_in
from .models import TFModel, build_model
from .profiler import allocation_peaks
from .session import canonical_device, cluster_session_config, device_map

log = logging.getLogger(__name__)
v1 = tf.compat.v1


def apply_placement(model: TFModel, placement: Mapping[str, str], devmap: Mapping[str, str]) -> int:
    """Pin each op of `model.graph` to its device; return how many ops the placement named. O(V + E)."""
    graph = model.graph
    ops = graph.get_operations()
    names = {op.name for op in ops}
    unknown = [n for n in placement if n not in names]
    if unknown:
        raise InvalidPlacement(
            f"placement names ops that model {model.name!r} does not have, e.g. {unknown[:3]}; "
            f"was the graph captured from another config?"
        )
    roots = colocation_roots(graph)
    group_dev: dict[str, str] = {}
    for op_name, dev in placement.items():
        r = roots.get(op_name)
        if r is not None:
            group_dev.setdefault(r, dev)
    placed = 0
    for op in ops:
        dev = placement.get(op.name)
        if dev is None:
            r = roots.get(op.name)
            dev = group_dev.get(r) if r is not None else None
        if dev is None:
            for t in op.inputs:
                if t.dtype.base_dtype == tf.resource and t.op.name in placement:
                    dev = placement[t.op.name]
                    break
        if dev is None:
            continue
        if dev not in devmap:
            raise InvalidPlacement(
                f"op {op.name!r} is placed on {dev!r}, which is not a device of the cluster {sorted(devmap)}"
            )
        op._set_device(devmap[dev])
        placed += op.name in placement
    return placed


def enforce_order(model: TFModel, schedule: Mapping[str, Sequence[str]]) -> int:
    """Make TensorFlow's executor run each device's ops in `schedule`'s order: every op of a device's list gets
    its predecessor in that list as a control input (none where it already reads it). With the worker's one
    inter-op thread, an op then becomes ready only after the op before it has run, so the device runs exactly
    the listed sequence, as the simulator does with a static schedule (`simulate(schedule=...)`); ops the
    schedule does not list (the ``init`` NoOp, ops no training step runs) stay free, and so do the ops the
    initializer needs (variable handles, constants: roots that take no time), so that running ``init_op`` runs
    none of the step. A receive's ``_Recv`` node, which TensorFlow's partitioner adds, stays a root of its
    partition: it is requested when the pool's thread reaches it, i.e. once the device's chain stops for an
    input (the simulator's ``recv_requests="when_idle"``).

    `schedule` must be a valid static order (`check_schedule`: per device, no deadlock against the graph's
    edges); an op it names that the model's graph lacks is refused, naming the op. Returns the control edges
    added. O(V + E)."""
    graph = model.graph
    init_needs = {op.name for op in fan_in([model.init_op])}
    added = 0
    for dev, names in schedule.items():
        prev = None
        for name in names:
            try:
                op = graph.get_operation_by_name(name)
            except KeyError:
                raise InvalidPlacement(
                    f"schedule of device {dev!r} names op {name!r}, which model {model.name!r} does not have"
                ) from None
            if name in init_needs:
                continue
            if prev is not None and prev not in op.control_inputs and all(t.op is not prev for t in op.inputs):
                op._add_control_input(prev)
                added += 1
            prev = op
    return added


def traffic_bytes(graph: OpGraph, placement: Mapping[str, str]) -> float:
    """Bytes crossing devices: per (producer, destination device) the largest tensor edge to that device."""
    sent: dict[tuple[str, str], float] = {}
    for u, v, d in graph.edges():
        du, dv = placement[u], placement[v]
        if du != dv and not d.get("control"):
            key = (u, dv)
            sent[key] = max(sent.get(key, 0.0), float(d.get("bytes", 0)))
    return float(sum(sent.values()))


def crossing_pairs(graph: OpGraph, placement: Mapping[str, str]) -> set[tuple[str, str]]:
    """(source device, destination device) of every tensor edge (not control) between two devices. O(E)."""
    return {
        (placement[u], placement[v])
        for u, v, d in graph.edges()
        if placement[u] != placement[v] and not d.get("control")
    }


def reference_losses(
    model: TFModel, n_steps: int = 2, *, device: str = "/device:CPU:0", config: Any = None
) -> list[float]:
    """Losses of the first `n_steps` training steps with every op on one device (a fresh build)."""
    ref = build_model(model.cfg, model.batch_size)
    for op in ref.graph.get_operations():
        op._set_device(device)
    with v1.Session(graph=ref.graph, config=config) as sess:
        sess.run(ref.init_op)
        return [float(sess.run([ref.train_op, ref.loss])[1]) for _ in range(n_steps)]


def run_placed(
    model: TFModel,
    graph: OpGraph,
    placement: Mapping[str, str],
    schedule: Mapping[str, list[str]],
    cluster: Cluster,
    *,
    warmup: int = 5,
    steps: int = 50,
    inter_op_threads: int = 0,
    intra_op_threads: int = 0,
    graph_rewrites: bool = False,
    check_correctness: bool = True,
    rtol: float = 1e-4,
) -> RunResult:
    """Run `model` placed by `placement` on `cluster` and measure it (module docstring)."""
    if warmup < 0 or steps < 1:
        raise ConfigError(f"runtime needs warmup >= 0 and steps >= 1, got warmup={warmup}, steps={steps}")
    assign = dict(placement.assignment if hasattr(placement, "assignment") else placement)
    check_placement(graph, cluster, assign)
    if schedule:
        check_schedule(graph, assign, {d: list(o) for d, o in schedule.items()})
    devmap = device_map(cluster)
    config = cluster_session_config(
        cluster, inter_op_threads=inter_op_threads, intra_op_threads=intra_op_threads, graph_rewrites=graph_rewrites
    )
    placed_model = build_model(model.cfg, model.batch_size)
    n_placed = apply_placement(placed_model, assign, devmap)
    back = {canonical_device(tfdev): name for name, tfdev in devmap.items()}
    times: list[float] = []
    losses: list[float] = []
    with v1.Session(graph=placed_model.graph, config=config) as sess:
        sess.run(placed_model.init_op)
        fetches = [placed_model.train_op, placed_model.loss]
        for _ in tqdm(
            range(warmup + steps), desc="run (warm-up + measured steps)", unit="step", disable=None, leave=False
        ):
            t0 = time.perf_counter()
            _, loss = sess.run(fetches)
            times.append(time.perf_counter() - t0)
            losses.append(float(loss))
        md = v1.RunMetadata()
        sess.run(fetches, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE), run_metadata=md)
    # where TensorFlow actually ran each op, and how long each device was busy in the traced step
    misplaced = []
    busy: dict[str, float] = {d.name: 0.0 for d in cluster.devices}
    for ds in md.step_stats.dev_stats:
        if "/stream:" in ds.device or "memcpy" in ds.device.lower():
            continue
        dev = back.get(canonical_device(ds.device))
        for ns in ds.node_stats:
            if dev is not None and ns.node_name in assign:
                busy[dev] += (ns.all_end_rel_nanos or ns.all_end_rel_micros * 1000) * 1e-9
            want = assign.get(ns.node_name)
            if want is not None and dev is not None and want != dev:
                misplaced.append(ns.node_name)
    if misplaced:
        log.warning("%d ops ran on another device than placed, e.g. %s", len(misplaced), misplaced[:3])
    peaks_dyn = allocation_peaks(md.step_stats, back)
    persistent: dict[str, float] = {d.name: 0.0 for d in cluster.devices}
    for name, a in graph.nx.nodes(data=True):
        persistent[assign[name]] += float(a["persistent_bytes"])
    peaks = {d.name: persistent[d.name] + peaks_dyn.get(d.name, 0.0) for d in cluster.devices}
    measured = times[warmup : warmup + steps]
    extra: dict[str, Any] = {
        "losses": losses,
        "warmup": warmup,
        "steps": steps,
        "ops_placed": n_placed,
        "misplaced_ops": len(misplaced),
        "step_time_median_s": statistics.median(measured),
        "step_time_stdev_s": statistics.stdev(measured) if len(measured) > 1 else 0.0,
        "device_busy_s": busy,
        "schedule_enforced": False,
        "traffic_source": "graph edges x placement",
        "devices": {name: tfdev for name, tfdev in devmap.items()},
    }
    loss = losses[1] if len(losses) > 1 else losses[0]
    if check_correctness:
        first = cluster.devices[0]
        ref_config = v1.ConfigProto()
        ref_config.CopyFrom(config)
        ref_config.allow_soft_placement = True  # ops without a kernel for the first device may move
        ref = reference_losses(model, min(2, len(losses)), device=devmap[first.name], config=ref_config)
        ref_loss = ref[-1]
        err = abs(loss - ref_loss)
        extra.update(
            reference_loss=ref_loss,
            loss_abs_error=err,
            loss_match=bool(err <= rtol * max(1.0, abs(ref_loss))) and math.isfinite(loss),
        )
        # result.json's `correct`: this runtime checks the loss only (gradients are not fetched here)
        extra["correct"] = extra["loss_match"]
        if not extra["loss_match"]:
            log.warning("placed loss %.8g differs from the single-device loss %.8g", loss, ref_loss)
    result = RunResult(
        measured_step_s=float(statistics.fmean(measured)),
        step_times_s=measured,
        peak_memory_bytes=peaks,
        traffic_bytes=traffic_bytes(graph, assign),
        loss=loss,
        extra=extra,
    )
    log.info(
        "ran %s on %d devices: step %.4g s (mean of %d after %d warm-up), traffic %.4g bytes",
        model.name,
        len(set(assign.values())),
        result.measured_step_s,
        steps,
        warmup,
        result.traffic_bytes,
    )
    return result
