"""Stage place, and `place_graph`: the placement half of a job (graph -> profile -> comm -> optimize -> place),
shared by op-level runs and pipelines derived from a placement."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from algorithms import compiled, compiled_mode
from algorithms.cluster import Cluster
from algorithms.errors import ConfigError
from algorithms.graph import OpGraph, atomic_write_json, gc_paused
from algorithms.placement import CoarseMap, Placement, check_placement

from ..context import JobContext, build_cluster, load_json, save_json
from ..registry import instantiate, plain
from .graph import stage_comm, stage_graph, stage_profile
from .optimize import stage_optimize
from .regime import apply_regime
from .simulate import runtime_recv_buffers

log = logging.getLogger("orchestrator")


def finite(x: float | None) -> float | None:
    """`x`, or None for an infinite or NaN value (JSON has neither)."""
    return None if x is None or (isinstance(x, float) and (math.isinf(x) or math.isnan(x))) else x


def stage_place(
    ctx: JobContext, coarse: OpGraph, okey: str, cluster: Cluster
) -> tuple[Placement, float, float | None, str]:
    """The placer's placement of the (coarse) graph, its wall-clock time and the CPU time of this process
    meanwhile (None from a cache entry written before it was recorded), and the stage's cache key. The CPU
    time is the steadier figure on a shared machine (other jobs stretch the wall clock, not the CPU time; a
    placer's solver threads add theirs)."""

    def compute() -> dict[str, Any]:
        placer = instantiate(ctx.cfg.placer, "placer")
        loaded = compiled.preload(coarse.index().n)  # a one-off per process: not the placer's time
        if loaded:
            log.info("compiled kernels loaded in %.2f s (before the placement timer)", loaded)
        t0, c0 = time.perf_counter(), time.process_time()
        pl = placer.place(coarse, cluster)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        return {
            "assignment": pl.assignment,
            "order": pl.order,
            "info": pl.info,
            "placement_time_s": dt,
            "placement_cpu_s": dc,
        }

    # the kernels' choice changes the placement time, not the placement: a cached time must come from the same
    cfg = {
        "placer": plain(ctx.cfg.placer),
        "cluster": cluster.to_dict(),
        "seed": ctx.cfg.get("seed"),
        "compiled": compiled_mode.mode(),
    }
    res = ctx.stage("place", cfg, [okey], compute, save_json("placement.json"), load_json("placement.json"))
    v = res.value
    pl = Placement(dict(v["assignment"]), v.get("order"), dict(v.get("info") or {}))
    return pl, v["placement_time_s"], v.get("placement_cpu_s"), res.key


@dataclass
class Placed:
    """What the placement half of a job produced (inputs of scheduling, simulation and pipelines)."""

    graph: OpGraph
    cluster: Cluster
    coarse: OpGraph
    #: None: no graph pass ran, the coarse graph is the graph (`stage_optimize`)
    cmap: CoarseMap | None
    coarse_placement: Placement
    assignment: dict[str, str]
    placement_time_s: float
    key: str


def memory_from_need(graph: OpGraph, cluster: Cluster, fraction: float, result: dict[str, Any]) -> Cluster:
    """Give every device `fraction` of the model's need: the peak memory of the whole graph on one device of
    the cluster, in topological order (Baechi Table 4 cuts memory to 30% of what the model needs). The need is
    recorded as result.json's `memory_need_bytes`. O(simulation of the graph on one device)."""
    from algorithms.memory import single_device_need

    if not fraction > 0:
        raise ConfigError(f"cluster.need_fraction must be > 0, got {fraction}")
    need = single_device_need(graph)
    result["memory_need_bytes"] = need
    log.info(
        "memory: the model needs %.4g bytes on one device; each device gets %.0f%% of it (%.4g bytes)",
        need,
        100 * fraction,
        fraction * need,
    )
    return cluster.with_memory(fraction * need)


def place_graph(ctx: JobContext, result: dict[str, Any], metrics: dict[str, Any]) -> Placed:
    """Stages graph, profile, comm, optimize and place; fills the matching result.json fields."""
    cfg = ctx.cfg
    cluster = build_cluster(cfg.cluster, ctx.choices.get("cluster") or "cluster")
    graph, gkey = stage_graph(ctx)
    graph, pkey = stage_profile(ctx, graph, gkey, cluster)
    cluster = stage_comm(ctx, cluster)
    graph, pkey, cluster = apply_regime(ctx, graph, pkey, cluster, result, metrics)
    with gc_paused():  # the index validate builds is frozen before any collection walks its objects
        graph.validate(cluster)
        ctx.freeze_graph()  # the graph and its index live until the job ends: no collection walks them again
    need_fraction = cfg.cluster.get("need_fraction")
    if need_fraction is not None:
        cluster = memory_from_need(graph, cluster, float(need_fraction), result)
    # the runtime's receive buffers, for the placers' replays and the simulation alike (Cluster.recv_buffers)
    buffers = runtime_recv_buffers(ctx, cluster)
    if buffers != cluster.recv_buffers:
        cluster = replace(cluster, recv_buffers=buffers)
    result["n_ops"] = len(graph)
    result["devices"] = cluster.names
    result["memory_limit_bytes"] = {d.name: finite(d.memory_bytes) for d in cluster.devices}
    for d in cluster.devices:
        if math.isfinite(d.memory_bytes):
            metrics[f"memory_limit_bytes.{d.name}"] = d.memory_bytes
    if result.get("memory_need_bytes") is not None:
        metrics["memory_need_bytes"] = result["memory_need_bytes"]
    coarse, cmap, okey = stage_optimize(ctx, graph, pkey, cluster, result)
    result["n_ops_placed"] = len(coarse)
    coarse_pl, ptime, pcpu, plkey = stage_place(ctx, coarse, okey, cluster)
    result["placement_time_s"] = ptime
    result["placement_cpu_s"] = pcpu
    result["placer_info"] = coarse_pl.info
    for k, v in (coarse_pl.info or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            metrics[f"placer.{k}"] = v
    assignment = cmap.expand_assignment(coarse_pl.assignment) if cmap is not None else dict(coarse_pl.assignment)
    check_placement(graph, cluster, assignment)
    atomic_write_json(ctx.out / "placement.json", assignment, indent=0)
    return Placed(graph, cluster, coarse, cmap, coarse_pl, assignment, ptime, plkey)
