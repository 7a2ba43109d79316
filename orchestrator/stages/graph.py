"""Stages graph, profile and comm: the model's op graph, its measured costs, the communication model.

graph: a model config with `_target_` is a GraphModel and gives its graph itself; otherwise the backend builds
the model from its zoo and captures the training step. profile: the configured Profiler (registry). comm: the
backend's micro-benchmark between the cluster's devices, when the profiler asks for it.

The setting measured in (issue 16): when the job's runtime is one the backend declares as one pinned process
per device (`capabilities.worker_runtimes`, e.g. `runtime=real`), a `measured` profiler with `setting: auto`
profiles every op in one such worker (its cores, its thread count) and fits the communication model from two
workers' own transfers, with the processor time per message; the workers' setting is part of both cache keys,
so one profile serves every placer and every cluster whose workers look alike, and no other setting.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import statistics
from pathlib import Path
from typing import Any

from algorithms.cluster import Cluster, Link
from algorithms.graph import OpGraph, atomic_write_json
from backends.base import CommFit, Profiler
from backends.profilers import MeasuredProfiler

from ..context import JobContext, load_json, save_json
from ..registry import build_profiler, check_framework_model, plain, runs_in_workers

log = logging.getLogger("orchestrator")


def _save_graph(g: OpGraph, p: Path) -> None:
    g.save(p / "graph.json")


def _load_graph(p: Path) -> OpGraph:
    return OpGraph.load(p / "graph.json")


def stage_graph(ctx: JobContext) -> tuple[OpGraph, str]:
    """The model's op graph (cached under the model config, plus the backend's for framework models)."""
    mcfg = ctx.model_cfg()
    config: dict[str, Any]
    if "_target_" in mcfg:
        model = ctx.get_model()
        config = {"model": {k: v for k, v in mcfg.items() if k != "name"}, **model.fingerprint()}

        def compute() -> OpGraph:
            return model.graph()
    else:
        backend = ctx.get_backend()
        check_framework_model(mcfg, backend, ctx.choices.get("model"))
        config = {"model": mcfg, "backend": plain(ctx.cfg.backend)}

        def compute() -> OpGraph:
            assert backend is not None  # check_framework_model refuses a missing backend
            return backend.capture(ctx.get_model())

    res = ctx.stage("graph", config, [], compute, _save_graph, _load_graph)
    return res.value, res.key


def runtime_in_workers(ctx: JobContext) -> bool:
    """Whether the job's runtime runs one pinned OS process per device (declared by the backend)."""
    return runs_in_workers(ctx.cfg.runtime, ctx.get_backend())


def job_profiler(ctx: JobContext, cluster: Cluster) -> Profiler:
    """The configured profiler; a `MeasuredProfiler` is set to the setting it measures in: the workers' of the
    job's process-per-device runtime (`setting: auto` with such a runtime, or `setting: worker`), described by
    the profiler's `worker_setting` (cores per worker, threads: the runtime config's `threads`, else one per
    core), or this process."""
    backend = ctx.get_backend()
    profiler = build_profiler(ctx.cfg.profiler, backend)
    if isinstance(profiler, MeasuredProfiler) and backend is not None:
        if profiler.resolve(runtime_in_workers(ctx), cluster):
            rt = ctx.cfg.get("runtime")
            threads = rt.get("threads") if rt is not None else None
            # only when asked: a plugin's worker_setting written before runtime.cuda_graph keeps working
            graphed = {"cuda_graph": True} if rt is not None and rt.get("cuda_graph", False) else {}
            profiler.use_workers(profiler.worker_setting(backend, cluster, threads, **graphed))
            if ctx.cfg.get("runtime") is not None and ctx.cfg.runtime.get("transport_priority") is not None:
                profiler.transport_policy = str(ctx.cfg.runtime.transport_priority)
    return profiler


def predicts_workers(ctx: JobContext, cluster: Cluster) -> bool:
    """Whether the job predicts the step of the process-per-device runtime's workers: its runtime is one, or
    its profiler measures in that setting."""
    if runtime_in_workers(ctx):
        return True
    profiler = job_profiler(ctx, cluster)
    return isinstance(profiler, MeasuredProfiler) and profiler.workers is not None


def stage_profile(ctx: JobContext, graph: OpGraph, gkey: str, cluster: Cluster) -> tuple[OpGraph, str]:
    """The configured profiler's graph; a profiler that measures nothing (`file`) passes the graph through."""
    profiler = job_profiler(ctx, cluster)
    if not profiler.measures:
        return graph, gkey
    # the communication fit is its own stage: its keys do not change the profile
    # the class a named profiler resolved to is part of the key (and its code of the cache's code version)
    cls = type(profiler)
    skip: tuple[str, ...] = ()
    if isinstance(profiler, MeasuredProfiler):  # the resolved setting is keyed below; trial 0 as before trials
        skip = ("setting", "trial") if profiler.trial == 0 else ("setting",)
    config: dict[str, Any] = {
        "profiler": {k: v for k, v in plain(ctx.cfg.profiler).items() if not k.startswith("comm_") and k not in skip},
        "profiler_class": {"_target_": f"{cls.__module__}.{cls.__qualname__}"},
        "backend": plain(ctx.cfg.backend),
    }
    if profiler.uses_cluster:
        config["cluster"] = plain(ctx.cfg.cluster)
    workers = profiler.workers if isinstance(profiler, MeasuredProfiler) else None
    if workers is not None:  # measured in the runtime's workers: their setting, not the cluster, is the key
        config["worker_setting"] = workers

    def compute() -> tuple[OpGraph, dict[str, Any]]:
        return profiler.profile(ctx.get_backend(), ctx.get_model(), graph, cluster, model_cfg=ctx.model_cfg())

    def save(v: tuple[OpGraph, dict[str, Any]], p: Path) -> None:
        v[0].save(p / "graph.json")
        atomic_write_json(p / "profile_report.json", v[1])

    def load(p: Path) -> tuple[OpGraph, dict[str, Any]]:
        return OpGraph.load(p / "graph.json"), json.loads((p / "profile_report.json").read_text())

    res = ctx.stage("profile", config, [gkey], compute, save, load)
    if workers is not None:
        log.info("profile measured in the runtime's workers: %s", workers)
    g, report = res.value
    ctx.profile = dict(report or {})
    if report:
        metrics, paths = profiler.publish(report, ctx.out)
        ctx.metrics.update(metrics)
        ctx.artifacts.extend(paths)
    return g, res.key


def stage_comm(ctx: JobContext, cluster: Cluster) -> Cluster:
    """Fit the communication model with the backend's micro-benchmark (in the setting the profiler measures
    in) and write it into the cluster; the fit as written to comm.json (docs/formats.md) is kept in `ctx.comm`
    and its figures logged as metrics `comm.<key>`."""
    profiler = job_profiler(ctx, cluster)
    backend = ctx.get_backend()
    if not profiler.measures or not profiler.comm_benchmark or len(cluster) < 2 or backend is None:
        return cluster
    sizes, repeats = profiler.comm_sizes, profiler.comm_repeats
    workers = profiler.workers if isinstance(profiler, MeasuredProfiler) else None
    cfg: dict[str, Any] = {
        "backend": plain(ctx.cfg.backend),
        "devices": [d.to_dict() for d in cluster.devices],
        "sizes": sizes,
        "repeats": repeats,
    }
    if workers is not None:
        cfg["worker_setting"] = workers
    if isinstance(profiler, MeasuredProfiler):  # keys only where they differ from the defaults (older entries stay)
        if profiler.calibration() != "benchmark":
            cfg["calibration"] = profiler.calibration()
        if workers is not None and profiler.transport_policy != "idle":
            cfg["transport_priority"] = profiler.transport_policy
        if workers is not None and profiler.comm_shared_core_slowdown:
            cfg["shared_core_slowdown"] = profiler.comm_shared_core_slowdown
        if workers is not None and profiler.calibration() == "in_step":
            # since session 34 the in-step fit keeps the ping-pong's latency where workers share host cores
            # (backends.torch.calibrate, "Which latency"): entries fitted before are not reused
            cfg["in_step_latency"] = "pingpong_where_cores_shared"
            if backend.name == "torch":
                # since session 35 PyTorch's CPU workers wait at a barrier after each step too (the calibration's
                # placed steps on shared cores measure shorter): entries fitted before are not reused
                cfg["step_barriers"] = "before_and_after"
        if workers is not None and profiler.comm_send_wake and profiler.calibration() == "in_step":
            cfg["send_wake"] = True  # the in-step costs fitted with sends to idle receivers charged more
        if workers is not None and profiler.comm_recv_work != "in_consumer":
            cfg["recv_work"] = profiler.comm_recv_work  # the simulator's model the in-step costs are fitted under
        if profiler.trial:  # another independent measurement (MeasuredProfiler.trial)
            cfg["trial"] = profiler.trial

    def compute() -> dict[str, Any]:
        if isinstance(profiler, MeasuredProfiler):
            fit = profiler.fit_comm(backend, cluster)
        else:
            fit = backend.comm_benchmark(cluster, sizes, repeats)
        calibration = profiler.calibration() if isinstance(profiler, MeasuredProfiler) else "benchmark"
        return comm_json(fit, "worker" if workers is not None else "process", calibration)

    res = ctx.stage("comm", cfg, [], compute, save_json("comm.json"), load_json("comm.json"))
    fit = res.value
    ctx.comm = dict(fit)
    links = {(s, d): Link(float(lat), _bandwidth(bw)) for s, d, lat, bw in fit["links"]}
    log.info(
        "communication fit (%s): latency %.3g s, bandwidth %.3g B/s, median relative residual %s; per message "
        "%.3g s to send, %.3g s to receive",
        fit.get("setting", "process"),
        fit["latency_s"],
        _bandwidth(fit["bytes_per_s"]),
        "-" if fit.get("residual_rel_median") is None else f"{100 * fit['residual_rel_median']:.1f}%",
        fit.get("send_overhead_s", 0.0),
        fit.get("recv_overhead_s", 0.0),
    )
    for k, v in fit.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            ctx.metrics[f"comm.{k}"] = float(v)
    return cluster.with_comm(float(fit["latency_s"]), _bandwidth(fit["bytes_per_s"]), links)


def comm_json(fit: CommFit, setting: str, calibration: str = "benchmark") -> dict[str, Any]:
    """comm.json of a fit (docs/formats.md): latency, bandwidth (null: unlimited, strict JSON), per-pair links,
    the samples; the setting measured in; the fit's relative residual over the samples (median of |fit - t| / t
    and its root mean square; null without samples); the processor time per message sent and received (0 when
    the benchmark does not measure it); and every other number the backend's fit adds (e.g. TensorFlow's
    `step_overhead_s`, `per_transfer_s`), and `calibration`, where the per-message costs come from
    (`MeasuredProfiler.calibration`). With the in-step calibration the samples are the ping-pong's, fitted
    with its own latency (`pingpong_latency_s`), which the residual uses; `recv_work`, the simulator's model of
    where a receive's processor time goes that the costs were fitted under, where it is not the default
    (``"in_consumer"``). O(samples)."""
    bw = fit.bytes_per_s
    lat = getattr(fit, "pingpong_latency_s", math.nan)
    lat = lat if math.isfinite(lat) else fit.latency_s
    rel = [(lat + (b / bw if math.isfinite(bw) else 0.0) - t) / t for _, _, b, t in fit.samples if t > 0]
    out: dict[str, Any] = {
        "latency_s": fit.latency_s,
        "bytes_per_s": _finite_or_none(bw),
        "links": [[s, d, lat, _finite_or_none(lbw)] for (s, d), (lat, lbw) in fit.links.items()],
        "samples": [list(x) for x in fit.samples],
        "setting": setting,
        "residual_rel_median": statistics.median(abs(r) for r in rel) if rel else None,
        "residual_rel_rms": math.sqrt(statistics.fmean(r * r for r in rel)) if rel else None,
        "send_overhead_s": 0.0,
        "recv_overhead_s": 0.0,
        "calibration": calibration,
    }
    base = {f.name for f in dataclasses.fields(CommFit)}
    for f in dataclasses.fields(fit):
        v = getattr(fit, f.name)
        if f.name not in base and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[f.name] = float(v)
    recv_work = getattr(fit, "recv_work", "in_consumer")
    if recv_work != "in_consumer":  # the simulator's model the costs were fitted under (`simulate(recv_work=)`)
        out["recv_work"] = recv_work
    return out


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _bandwidth(x: float | None) -> float:
    """A fitted bandwidth read back from comm.json: null means unlimited."""
    return math.inf if x is None else float(x)
