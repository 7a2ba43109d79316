"""Stage run: execute the placed, scheduled step on real devices with the configured Runtime and record what it
measured. The runtime comes from the registry (a `_target_`, or a name the backend provides, e.g. `threads`,
`real`); it always gets the simulated step as `plan` and follows it where it was asked to (`runtime.order`)."""

from __future__ import annotations

import logging
import math
from typing import Any

from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph
from algorithms.placement import Schedule
from algorithms.sim_result import SimResult
from backends.base import RunResult, Runtime

from ..context import JobContext

log = logging.getLogger("orchestrator")


def sim_plan(sim: SimResult) -> tuple[dict[str, float], list[tuple[str, str, float]]]:
    """The simulated step as a plan: (planned start per op, [(producer op, destination device, arrival)])."""
    start = {name: sim.start[i] for i, name in enumerate(sim.names)}
    return start, [(op, dst, arrive) for op, _, dst, _, arrive, _ in sim.transfers]


def check_devices(ctx: JobContext, cluster: Cluster) -> None:
    """The cluster's device types must be ones the backend declares."""
    backend = ctx.get_backend()
    if backend is None:
        return
    bad = [d for d in cluster.devices if d.type not in backend.capabilities.device_types]
    if bad:
        raise ConfigError(
            f"device {bad[0].name!r} has type {bad[0].type!r}; backend {backend.name!r} runs on "
            f"{list(backend.capabilities.device_types)}"
        )


def requested_peaks(extra: dict[str, Any]) -> dict[str, float]:
    """{device: bytes} of a GPU run's allocator 'requested' peak in the steps after the first, from the runtime's
    `extra["allocator_peaks_bytes"]` (devices without one, or with NaN, left out; {} on CPU runs)."""
    out = {}
    for d, p in (extra.get("allocator_peaks_bytes") or {}).items():
        v = ((p or {}).get("later_steps") or {}).get("requested")
        if v is not None and math.isfinite(v):
            out[d] = float(v)
    return out


def stage_run(
    ctx: JobContext,
    runtime: Runtime,
    graph: OpGraph,
    assignment: dict[str, str],
    schedule: Schedule,
    cluster: Cluster,
    result: dict[str, Any],
    metrics: dict[str, Any],
    sim: SimResult | None = None,
) -> RunResult:
    """Run the step and fill result.json's measured fields (docs/formats.md) and the run's metrics; return what
    the runtime measured."""
    check_devices(ctx, cluster)
    # None (backend=none) reaches runtimes that need no framework; the ones that need one refuse it
    backend: Any = ctx.get_backend()
    rr = runtime.run(
        backend,
        ctx.get_model(),
        graph,
        assignment,
        schedule,
        cluster,
        plan=sim_plan(sim) if sim is not None else None,
    )
    result["measured_step_s"] = rr.measured_step_s
    result["measured_step_iqr_s"] = rr.step_iqr_s
    result["measured_steps"] = len(rr.step_times_s)
    result["measured_peak_memory_bytes"] = dict(rr.peak_memory_bytes)
    result["measured_traffic_bytes"] = rr.traffic_bytes
    result["runtime_workers"] = list(rr.workers)
    result["loss"] = rr.loss
    keys = (
        "oversubscribed",
        "correct",
        "memory_source",
        "host_interference",
        "slow_steps",
        "spells_prevail",
        "late_receives",
    )
    for k in (*keys, "cuda_graph", "cuda_graph_check"):
        if k in (rr.extra or {}):
            result[k] = rr.extra[k]
    for d, v in rr.peak_memory_bytes.items():
        metrics[f"measured_peak_memory_bytes.{d}"] = v
    for d, n in (result.get("late_receives") or {}).items():
        if n is not None:
            metrics[f"late_receives.{d}"] = n
    metrics["measured_traffic_bytes"] = rr.traffic_bytes
    if rr.step_iqr_s is not None:
        metrics["measured_step_iqr_s"] = rr.step_iqr_s
    if rr.loss is not None:
        metrics["loss"] = rr.loss
    for k, v in (rr.extra or {}).items():
        if isinstance(v, (int, float)):
            metrics[f"run.{k}"] = v
    if result.get("predicted_step_s"):
        metrics["prediction_error"] = (result["predicted_step_s"] - rr.measured_step_s) / rr.measured_step_s
    # GPU workers: the allocator's peak also holds cuBLAS's workspaces (backends/torch/cuda_memory.py), which
    # the simulator's tensor accounting leaves out; the prediction of the measured peak adds them
    reserve = {d: float(v) for d, v in ((rr.extra or {}).get("framework_reserve_bytes") or {}).items() if v}
    if reserve:
        result["framework_reserve_bytes"] = reserve
        for d, v in reserve.items():
            metrics[f"framework_reserve_bytes.{d}"] = v
    # GPU workers: the bytes the tensors asked the allocator for at its peak (no rounding to its blocks), in the
    # steps after the first (backends/torch/worker.allocator_peaks)
    requested = requested_peaks(rr.extra or {})
    if requested:
        result["allocator_requested_peak_bytes"] = requested
        for d, v in requested.items():
            metrics[f"allocator_requested_peak_bytes.{d}"] = v
    errors = [
        (result["peak_memory_bytes"][d] + reserve.get(d, 0.0) - v) / v
        for d, v in rr.peak_memory_bytes.items()
        if v and d in (result.get("peak_memory_bytes") or {})
    ]
    if errors:  # predicted against measured peak memory, beside the step-time error
        metrics["memory_prediction_error"] = sorted(errors)[len(errors) // 2]
    return rr
