"""Per-op profiles from TensorFlow's step statistics (`RunMetadata.step_stats` with ``FULL_TRACE``).

Baechi 4.1 and 5.1: the standard TensorFlow profiler gives each op's compute time and its temporary,
persistent and output memory; 5 warm-up steps run first (Baechi 4.3: bootstrap steps are slow), then sampled
profiled steps whose costs are averaged. Choices made here:

* compute time of an op in one step = the sum over its step-stats records of ``all_end_rel`` (the node's
  whole execution, output allocation included). Where an op has kernel records on device streams (GPU), the
  kernels are summed and the launch record is not (Baechi 4.3: an op implemented by several kernels counts
  whole); a ``stream:all`` record is used only when there is no per-stream record.
* temporary memory = the node's ``memory_stats.temp_memory_size`` (+ device temp); persistent memory = the
  node's ``persistent_memory_size`` (+ device persistent), never below the static size of a variable or
  constant (resource variables are allocated by the initialiser, outside the profiled step); output memory =
  the bytes the node allocated in the step (``memory[].total_bytes``) less its temporary memory, so ops that
  forward their input buffer (Identity, Reshape, in-place ReLU) allocate nothing.
* across profiled steps: time by `statistic` (mean, as Baechi, or median); memory by the maximum.
* ops absent from the step stats (none when graph rewrites are off) keep compute 0 and their static sizes.
* tracing is not free: on the CPU build here a traced step takes about 1.5x an untraced one and the op times
  inflate with it. `calibration="untraced_step"` scales them back (see `profile`); the backend uses it by
  default, ``"none"`` keeps the raw times as Baechi did.

The profiling session has one device (the first GPU when the machine has one, else one CPU), graph rewrites
off (see `session.py`), so step-stats records map one to one onto captured ops.
Complexity: O(steps x records) plus the cost of running the steps.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import tensorflow as tf
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from algorithms.errors import ConfigError
from algorithms.graph import OpGraph

from .capture import capture
from .models import TFModel, build_model
from .session import physical_gpus, session_config

log = logging.getLogger(__name__)
v1 = tf.compat.v1
CALIBRATIONS = ("none", "untraced_step")


@dataclass
class NodeStat:
    """One op's costs in one traced step."""

    time_s: float = 0.0
    temporary_bytes: float = 0.0
    persistent_bytes: float = 0.0
    output_bytes: float = 0.0
    devices: set[str] = field(default_factory=set)


def _record_time_ns(ns: Any) -> float:
    if ns.all_end_rel_nanos:
        return float(ns.all_end_rel_nanos)
    return float(ns.all_end_rel_micros) * 1e3


def _node_name(raw: str, known: set[str] | None) -> str:
    """Step-stats names of GPU kernels may read ``name:Type``; keep ``name`` when that is an op."""
    if known is not None and raw not in known and ":" in raw:
        head = raw.split(":")[0]
        if head in known:
            return head
    return raw


def parse_step_stats(step_stats: Any, known: set[str] | None = None) -> dict[str, NodeStat]:
    """node name -> `NodeStat` for one traced step (see the module docstring for the rules). O(records)."""
    launch: dict[str, list[Any]] = {}
    streams: dict[str, list[Any]] = {}
    stream_all: dict[str, list[Any]] = {}
    for ds in step_stats.dev_stats:
        dev = ds.device
        if "memcpy" in dev.lower():
            continue
        bucket = launch
        if "/stream:" in dev:
            bucket = stream_all if dev.endswith("stream:all") else streams
        for ns in ds.node_stats:
            bucket.setdefault(_node_name(ns.node_name, known), []).append((dev, ns))
    out: dict[str, NodeStat] = {}
    for name in set(launch) | set(streams) | set(stream_all):
        st = NodeStat()
        timed = streams.get(name) or stream_all.get(name) or launch.get(name, [])
        st.time_s = sum(_record_time_ns(ns) for _, ns in timed) * 1e-9
        for dev, ns in launch.get(name, []) + streams.get(name, []):
            st.devices.add(dev.split("/stream:")[0])
            ms = ns.memory_stats
            temp = float(ms.temp_memory_size + ms.device_temp_memory_size)
            st.temporary_bytes += temp
            st.persistent_bytes += float(ms.persistent_memory_size + ms.device_persistent_memory_size)
            allocated = float(sum(m.total_bytes for m in ns.memory))
            st.output_bytes += max(0.0, allocated - temp)
        out[name] = st
    return out


def allocation_peaks(step_stats: Any, device_of: dict[str, str] | None = None) -> dict[str, float]:
    """Per step-stats device (canonical ``CPU:0`` form unless `device_of` maps it): the peak of the bytes
    allocated minus freed by that device's ops during the step, from the allocation records. O(records log
    records)."""
    from .session import canonical_device

    events: dict[str, list[tuple[int, int]]] = {}
    for ds in step_stats.dev_stats:
        if "/stream:" in ds.device or "memcpy" in ds.device.lower():
            continue
        dev = canonical_device(ds.device)
        if device_of is not None:
            dev = device_of.get(dev, dev)
        lst = events.setdefault(dev, [])
        for ns in ds.node_stats:
            for m in ns.memory:
                for r in m.allocation_records:
                    lst.append((int(r.alloc_micros), int(r.alloc_bytes)))
    peaks: dict[str, float] = {}
    for dev, lst in events.items():
        lst.sort(key=lambda e: (e[0], -e[1]))
        cur = peak = 0
        for _, b in lst:
            cur += b
            peak = max(peak, cur)
        peaks[dev] = float(peak)
    return peaks


def profile_steps(
    model: TFModel, *, warmup: int, steps: int, config: Any, untraced: int = 0
) -> tuple[list[dict[str, NodeStat]], list[float]]:
    """Run `warmup` untraced steps, then `steps` traced ones, then `untraced` timed untraced ones; return each
    traced step's parsed stats and the wall-clock times of the untraced timed steps."""
    known = {op.name for op in model.graph.get_operations()}
    out = []
    walls = []
    bar = tqdm(
        total=warmup + steps + untraced,
        desc="profiling (warm-up, traced, untraced steps)",
        unit="step",
        disable=None,
        leave=False,
    )
    with v1.Session(graph=model.graph, config=config) as sess, bar, logging_redirect_tqdm():
        sess.run(model.init_op)
        fetches = [model.train_op, model.loss]
        for _ in range(warmup):
            sess.run(fetches)
            bar.update()
        opts = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE)
        for _ in range(steps):
            md = v1.RunMetadata()
            sess.run(fetches, options=opts, run_metadata=md)
            out.append(parse_step_stats(md.step_stats, known))
            bar.update()
        for _ in range(untraced):
            t0 = time.perf_counter()
            sess.run(fetches)
            walls.append(time.perf_counter() - t0)
            bar.update()
    return out, walls


def _reduce(values: Iterable[float], statistic: str) -> float:
    vals = list(values)
    if not vals:
        return 0.0
    return float(statistics.median(vals) if statistic == "median" else statistics.fmean(vals))


def resized(model: TFModel, graph: OpGraph, batch_size: int | None) -> tuple[TFModel, OpGraph]:
    """(model, a copy of `graph`) at `batch_size`: unchanged when it is None or the model's own; otherwise the
    model rebuilt at that batch size (same op names) and the copy's static sizes (edge bytes, static memory)
    taken from a capture of the rebuilt model."""
    out = graph.copy()
    if batch_size is not None and int(batch_size) != model.batch_size:
        model = build_model(model.cfg, int(batch_size))
        sized = capture(model)
        for name, a in out.nx.nodes(data=True):
            if name in sized:
                b = sized.op(name)
                for key in ("persistent_bytes", "output_bytes", "temporary_bytes"):
                    a[key] = b[key]
        for u, v, d in out.nx.edges(data=True):
            if sized.nx.has_edge(u, v):
                d["bytes"] = sized.nx.edges[u, v]["bytes"]
        out.name = sized.name
    return model, out


def apply_records(out: OpGraph, records: list[dict[str, NodeStat]], statistic: str) -> int:
    """Write the per-step records into `out`'s op attributes (time by `statistic`, memory by the maximum, a
    persistent size never below the static one); return how many ops had records. O(V x steps)."""
    seen = 0
    for name, a in out.nx.nodes(data=True):
        per_step = [r[name] for r in records if name in r]
        if not per_step:
            continue
        seen += 1
        a["compute_s"] = _reduce((s.time_s for s in per_step), statistic)
        a["temporary_bytes"] = max(s.temporary_bytes for s in per_step)
        a["output_bytes"] = max(s.output_bytes for s in per_step)
        a["persistent_bytes"] = max(float(a["persistent_bytes"]), max(s.persistent_bytes for s in per_step))
    return seen


def profile(
    model: TFModel,
    graph: OpGraph,
    *,
    warmup: int = 5,
    steps: int = 5,
    batch_size: int | None = None,
    statistic: str = "mean",
    inter_op_threads: int = 1,
    intra_op_threads: int = 0,
    calibration: str = "none",
) -> OpGraph:
    """A copy of `graph` with measured costs of `model`'s training step (module docstring).

    `calibration="untraced_step"` (only with `inter_op_threads=1`, where the device runs one op at a time)
    also times `steps` untraced steps and scales every compute time by (median untraced step) / (sum of the
    profiled op times), removing the tracer's own overhead and folding the executor's gaps between ops into the
    ops; the factor is logged and kept in ``graph.nx.graph["profile"]``. ``"none"`` keeps the raw step stats
    (what Baechi used).

    With `batch_size` other than the model's, the model is rebuilt at that batch size (same op names) and
    both the measured costs and the static tensor sizes (edge bytes, static memory) come from that build,
    which is what Celeritas' Standard Evaluation needs.
    """
    if calibration not in CALIBRATIONS:
        raise ConfigError(f"profile calibration {calibration!r} is not one of {list(CALIBRATIONS)}")
    if calibration == "untraced_step" and inter_op_threads != 1:
        raise ConfigError(
            "profile calibration 'untraced_step' needs profile_inter_op_threads=1 (one op at a "
            "time), otherwise the untraced step overlaps ops and is no sum of op times"
        )
    if statistic not in ("mean", "median"):
        raise ConfigError(f"profile statistic {statistic!r} is not one of ['mean', 'median']")
    if steps < 1:
        raise ConfigError(f"profiler.steps must be >= 1, got {steps}")
    model, out = resized(model, graph, batch_size)
    gpu = physical_gpus() > 0
    config = session_config(
        n_cpu=1,
        n_gpu=1 if gpu else 0,
        inter_op_threads=inter_op_threads,
        intra_op_threads=intra_op_threads,
        allow_soft_placement=True,
    )
    device = "GPU:0" if gpu else "CPU:0"  # TensorFlow's default placement on a one-device session
    calibrate = calibration == "untraced_step"
    records, walls = profile_steps(model, warmup=warmup, steps=steps, config=config, untraced=steps if calibrate else 0)
    seen = apply_records(out, records, statistic)
    traced_sum = sum(a["compute_s"] for _, a in out.nx.nodes(data=True))
    scale = 1.0
    if calibrate and traced_sum > 0:
        scale = statistics.median(walls) / traced_sum
        for _, a in out.nx.nodes(data=True):
            a["compute_s"] *= scale
    out.invalidate()
    out.nx.graph["profile"] = {
        "device": device,
        "warmup": warmup,
        "steps": steps,
        "statistic": statistic,
        "traced_op_sum_s": traced_sum,
        "calibration": calibration,
        "scale": scale,
        "untraced_step_s": statistics.median(walls) if walls else None,
    }
    if calibrate:
        log.info(
            "profile calibration: untraced step %.4g s, traced op sum %.4g s, op times scaled by %.3f",
            statistics.median(walls),
            traced_sum,
            scale,
        )
    total = sum(a["compute_s"] for _, a in out.nx.nodes(data=True))
    log.info(
        "profiled %s on %s: %d of %d ops measured over %d steps after %d warm-up; sum of op times %.4g s",
        out.name,
        device,
        seen,
        len(out),
        steps,
        warmup,
        total,
    )
    return out.validate()
