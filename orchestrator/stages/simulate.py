"""Stage simulate: the simulator's prediction of the placed, scheduled step; and the per-run pictures."""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from algorithms.ccr import graph_ccr
from algorithms.cluster import RECV_POST_MARGIN, Cluster, oversubscription
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.placement import Schedule
from algorithms.sim_result import SimResult, sim_result_from_dict, sim_result_to_dict
from algorithms.simulator import simulate
from backends.profilers import MeasuredProfiler

from ..context import JobContext
from ..registry import posts_receives_up_front, posts_receives_within_limit
from .graph import job_profiler, predicts_workers
from .regime import regime_cfg

log = logging.getLogger("orchestrator")


def _save(r: SimResult, p: Path) -> None:
    atomic_write_json(p / "sim.json", sim_result_to_dict(r))


def _load(p: Path) -> SimResult:
    with open(p / "sim.json") as f:
        return sim_result_from_dict(json.load(f))


def stage_simulate(
    ctx: JobContext,
    graph: OpGraph,
    cluster: Cluster,
    assignment: dict[str, str],
    schedule: Schedule,
    skey: str,
    result: dict[str, Any] | None = None,
) -> SimResult:
    """The simulator's step; in the workers' setting (`worker_sim_options`) with shared host cores and the
    per-message processor time, recorded in `result` (`host_cores`, `oversubscribed`) when they apply, and
    the fixed per-step cost of the workers' runtime (`fixed_step_s`) as `result["predicted_fixed_step_s"]`,
    which the job adds to the makespan for `predicted_step_s`."""
    opts = worker_sim_options(ctx, cluster)
    within = predicts_this_host(ctx, cluster) and posts_receives_within_limit(ctx.cfg.get("runtime"))

    def compute() -> SimResult:
        if within:
            return simulate_within_limit(graph, cluster, assignment, schedule, opts)
        return simulate(graph, cluster, assignment, schedule, **opts)

    key = {"cluster": cluster.to_dict(), **opts, **({"post_receives": "within_limit"} if within else {})}
    # only options that apply enter the key: simulations without them keep their cache entries
    res = ctx.stage("simulate", key, [skey], compute, _save, _load)
    if "host_cores" in opts and result is not None:
        result["host_cores"] = opts["host_cores"]
        result["oversubscribed"] = oversubscription(cluster, opts["host_cores"])
    fixed = fixed_step_s(ctx, cluster, assignment)
    if fixed > 0 and result is not None:
        result["predicted_fixed_step_s"] = fixed
    return res.value


def simulate_within_limit(
    graph: OpGraph, cluster: Cluster, assignment: dict[str, str], schedule: Schedule, opts: dict[str, Any]
) -> SimResult:
    """The step of workers that post each receive as early as their device's limit allows
    (``runtime.post_receives=within_limit``, `backends.torch.worker.plan_receive_posts`): where every device
    holds its copies from the step's start within its limit less `RECV_POST_MARGIN`, the workers post every
    receive up front, and so does the prediction. Otherwise the step is the one the placers planned, copies held
    from their arrival (the least a device holds: where that overflows, the run is out of memory), and each
    device's predicted peak is what its plan fills: its peak with every copy held from the step's start when
    that is within its budget, else the budget (the plan posts early until the next receive would pass it),
    never less than the arrival peak. Only the peaks change; the memory timeline stays the arrival one. Two
    simulations at most (the timing does not depend on when a copy's memory is taken)."""
    roomy = replace(cluster, devices=[replace(d, memory_bytes=math.inf) for d in cluster.devices])
    first = simulate(graph, roomy, assignment, schedule, **opts, recv_buffers="step_start")
    early = first.peak_memory
    budget = {d.name: d.memory_bytes * (1.0 - RECV_POST_MARGIN) for d in cluster.devices}
    if all(early[d] <= budget[d] for d in early):
        # within every limit: the same step as on the cluster itself, which only records other limits
        first.memory_limit = {d.name: d.memory_bytes for d in cluster.devices}
        return first
    res = simulate(graph, cluster, assignment, schedule, **opts, recv_buffers="arrival")
    if res.ok:
        for d, late in res.peak_memory.items():
            res.peak_memory[d] = early[d] if early[d] <= budget[d] else max(late, budget[d])
    return res


def predicts_this_host(ctx: JobContext, cluster: Cluster) -> bool:
    """Whether the job's step is this host's workers' (`graph.predicts_workers`) and not a model of another
    machine: a job in the papers' regime (`regime.regime_cfg`) predicts the paper's devices and links, whose
    GPUs share no host core and pay no gloo processor time per message, even when its profile was measured in
    the workers' setting. (Before this check the Baechi and Celeritas regime runs on cpu4 made the paper's four
    GPUs take turns on this host's two cores, each op 1.35 times longer while another GPU ran.)"""
    return regime_cfg(ctx.cfg) is None and predicts_workers(ctx, cluster)


def fixed_step_s(ctx: JobContext, cluster: Cluster, assignment: dict[str, str]) -> float:
    """The per-step cost besides ops and messages that the job's worker profile measured for a placement on
    this many devices (`MeasuredProfiler.fixed_step_s`: TensorFlow's empty step; 0 for PyTorch, whose op costs
    add up to the step, and for every job that does not predict this host's workers, `predicts_this_host`)."""
    if not ctx.profile or not predicts_this_host(ctx, cluster):
        return 0.0
    profiler = job_profiler(ctx, cluster)
    if not isinstance(profiler, MeasuredProfiler) or profiler.workers is None:
        return 0.0
    return profiler.fixed_step_s(ctx.profile, ctx.comm, len(set(assignment.values())))


def worker_sim_options(ctx: JobContext, cluster: Cluster, n_host_cores: int | None = None) -> dict[str, Any]:
    """`simulate()` options for a job that predicts the process-per-device runtime's step (issue 16;
    `graph.predicts_workers`): `host_cores` (this host's cores, `n_host_cores` to override) when the cluster's
    devices ask for more cores than that (`algorithms.cluster.oversubscription`): devices sharing a core take
    turns; `send_overhead_s` / `recv_overhead_s`, the processor time per message of the communication fit
    (comm.json), and `send_byte_s` / `recv_byte_s`, per byte of a message, when measured (non-zero);
    `shared_core_slowdown`, the charge for time-sharing a core that the fit carries (comm.json), where devices
    share cores and it is non-zero; `recv_work`, where a receive's processor time goes, as the fit was made
    (comm.json, where not the default); `send_wake_s`, the extra time of a send to an idle receiver that the fit
    was made with (comm.json, where non-zero); the processor times multiplied by `comm_rescale`'s factor where
    ``profiler.comm_rescale=reference``; and `recv_buffers="step_start"` when the job's runtime holds every receive
    buffer from the step's start on CPU devices (`Capabilities.receives_up_front`). Empty for any other job: a
    simulation of an abstract cluster, or of the paper's machine in the papers' regime (`predicts_this_host`),
    does not depend on the host it runs on."""
    if not predicts_this_host(ctx, cluster):
        return {}
    n = n_host_cores if n_host_cores is not None else host_core_count()
    opts: dict[str, Any] = {}
    if oversubscription(cluster, n) > 1:
        opts["host_cores"] = int(n)
        log.info(
            "cluster %r asks for %d cores, the host has %d: the simulator lets devices that share a core take turns",
            cluster.name,
            sum(d.cores for d in cluster.devices),
            n,
        )
    scale = comm_rescale(ctx, cluster)
    for k in ("send_overhead_s", "recv_overhead_s", "send_byte_s", "recv_byte_s"):
        v = float(ctx.comm.get(k) or 0.0) * (scale or 1.0)
        if v > 0:
            opts[k] = v
    slowdown = float(ctx.comm.get("shared_core_slowdown") or 0.0)
    if "host_cores" in opts and slowdown > 0:
        opts["shared_core_slowdown"] = slowdown
    wake = float(ctx.comm.get("send_wake_s") or 0.0) * (scale or 1.0)
    if wake > 0:
        opts["send_wake_s"] = wake
    recv_work = ctx.comm.get("recv_work") or "in_consumer"
    if recv_work != "in_consumer" and ("recv_overhead_s" in opts or "recv_byte_s" in opts):
        opts["recv_work"] = recv_work
    if runtime_recv_buffers(ctx, cluster) == "step_start":
        opts["recv_buffers"] = "step_start"
    return opts


def comm_rescale(ctx: JobContext, cluster: Cluster) -> float | None:
    """The factor the workers' in-step message costs are multiplied by under ``profiler.comm_rescale=reference``
    (`backends.calibration.rescale_factor`: the profile's `speed_reference_s` over comm.json's), or None where the
    option is off or a reference is missing (logged; the costs are then used as calibrated). Recorded as the
    MLflow metric `comm.rescale`."""
    from backends.calibration import rescale_factor

    profiler = job_profiler(ctx, cluster)
    if not isinstance(profiler, MeasuredProfiler) or profiler.comm_rescale != "reference":
        return None
    prof_ref, cal_ref = ctx.profile.get("speed_reference_s"), ctx.comm.get("speed_reference_s")
    factor = rescale_factor(prof_ref, cal_ref)
    if factor is None:
        log.warning(
            "profiler.comm_rescale=reference: no speed reference in the %s; the message costs are used as calibrated",
            "profile" if rescale_factor(prof_ref, 1.0) is None else "communication fit",
        )
        return None
    log.info(
        "message costs rescaled by %.3f: the wide calibration program's single-device step %.4g s at the profile, "
        "%.4g s at the calibration",
        factor,
        float(prof_ref),  # type: ignore[arg-type]
        float(cal_ref),  # type: ignore[arg-type]
    )
    ctx.metrics["comm.rescale"] = factor
    return factor


def runtime_recv_buffers(ctx: JobContext, cluster: Cluster) -> str:
    """When the job's runtime takes a received copy's memory (`Cluster.recv_buffers`): ``step_start`` for a job
    that predicts this host's workers (`predicts_this_host`) whose runtime posts every receive up front on CPU
    devices (`Capabilities.receives_up_front` with ``runtime.post_receives=up_front``; NCCL workers post each
    receive when it is needed), else ``arrival`` (the default workers post within the memory limit, for which
    the placers plan with copies held from their arrival: `simulate_within_limit`)."""
    if not predicts_this_host(ctx, cluster) or all(d.type == "GPU" for d in cluster.devices):
        return "arrival"
    return "step_start" if posts_receives_up_front(ctx.cfg.get("runtime"), ctx.get_backend()) else "arrival"


def run_ccr(graph: OpGraph, cluster: Cluster) -> float | None:
    """result.json's `ccr`: the graph's communication-to-computation ratio on the cluster it was placed on
    (Celeritas eq. 1, `algorithms.ccr`), or None where it is not finite (no computation)."""
    c = graph_ccr(graph, cluster)
    return c if math.isfinite(c) else None


def plots(
    sim: SimResult, out: Path, graph: OpGraph | None = None, assignment: dict[str, str] | None = None
) -> list[Path]:
    """Per-run pictures: the device timeline (Gantt), memory over time with the limits, and for small graphs
    the placement drawn on the graph. A picture never fails a job."""
    from .. import plots as draw

    jobs: list[tuple[str, Callable[[Path], object]]] = [
        ("device_timeline.png", lambda p: draw.device_utilization_png(sim, p)),
        ("memory.png", lambda p: draw.memory_png(sim, p)),
    ]
    if graph is not None and assignment is not None:
        jobs.append(
            ("placement_graph.png", lambda p: draw.placement_graph_png(graph, assignment, p, devices=sim.devices))
        )
    paths = []
    for name, fn in jobs:
        try:
            if fn(out / name):
                paths.append(out / name)
        except Exception as exc:
            log.warning("could not draw %s: %s", name, exc)
    return paths


def host_core_count() -> int:
    """The cores this process may run on (its affinity mask; `os.cpu_count()` where there is none), the cores the
    runtime pins its workers to."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
