"""Stages graph, profile and comm: the model's op graph, its measured costs, the communication model.

graph: a model config with `_target_` is a GraphModel and gives its graph itself; otherwise the backend builds
the model from its zoo and captures the training step. profile: the configured Profiler (registry). comm: the
backend's micro-benchmark between the cluster's devices, when the profiler asks for it.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from algorithms.cluster import Cluster, Link
from algorithms.graph import OpGraph, atomic_write_json

from ..context import JobContext, load_json, save_json
from ..registry import build_profiler, check_framework_model, plain

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


def stage_profile(ctx: JobContext, graph: OpGraph, gkey: str, cluster: Cluster) -> tuple[OpGraph, str]:
    """The configured profiler's graph; a profiler that measures nothing (`file`) passes the graph through."""
    profiler = build_profiler(ctx.cfg.profiler, ctx.get_backend())
    if not profiler.measures:
        return graph, gkey
    # the communication fit is its own stage: its keys do not change the profile
    # the class a named profiler resolved to is part of the key (and its code of the cache's code version)
    cls = type(profiler)
    config: dict[str, Any] = {
        "profiler": {k: v for k, v in plain(ctx.cfg.profiler).items() if not k.startswith("comm_")},
        "profiler_class": {"_target_": f"{cls.__module__}.{cls.__qualname__}"},
        "backend": plain(ctx.cfg.backend),
    }
    if profiler.uses_cluster:
        config["cluster"] = plain(ctx.cfg.cluster)

    def compute() -> tuple[OpGraph, dict[str, Any]]:
        return profiler.profile(ctx.get_backend(), ctx.get_model(), graph, cluster, model_cfg=ctx.model_cfg())

    def save(v: tuple[OpGraph, dict[str, Any]], p: Path) -> None:
        v[0].save(p / "graph.json")
        atomic_write_json(p / "profile_report.json", v[1])

    def load(p: Path) -> tuple[OpGraph, dict[str, Any]]:
        return OpGraph.load(p / "graph.json"), json.loads((p / "profile_report.json").read_text())

    res = ctx.stage("profile", config, [gkey], compute, save, load)
    g, report = res.value
    if report:
        metrics, paths = profiler.publish(report, ctx.out)
        ctx.metrics.update(metrics)
        ctx.artifacts.extend(paths)
    return g, res.key


def stage_comm(ctx: JobContext, cluster: Cluster) -> Cluster:
    """Fit the communication model with the backend's micro-benchmark and write it into the cluster."""
    profiler = build_profiler(ctx.cfg.profiler, ctx.get_backend())
    backend = ctx.get_backend()
    if not profiler.measures or not profiler.comm_benchmark or len(cluster) < 2 or backend is None:
        return cluster
    sizes, repeats = profiler.comm_sizes, profiler.comm_repeats
    cfg = {
        "backend": plain(ctx.cfg.backend),
        "devices": [d.to_dict() for d in cluster.devices],
        "sizes": sizes,
        "repeats": repeats,
    }

    def compute() -> dict[str, Any]:
        fit = backend.comm_benchmark(cluster, sizes, repeats)
        return {  # strict JSON: an unlimited bandwidth (copies that cost no time per byte) is null
            "latency_s": fit.latency_s,
            "bytes_per_s": _finite_or_none(fit.bytes_per_s),
            "links": [[s, d, lat, _finite_or_none(bw)] for (s, d), (lat, bw) in fit.links.items()],
            "samples": [list(x) for x in fit.samples],
        }

    res = ctx.stage("comm", cfg, [], compute, save_json("comm.json"), load_json("comm.json"))
    fit = res.value
    links = {(s, d): Link(float(lat), _bandwidth(bw)) for s, d, lat, bw in fit["links"]}
    log.info("communication fit: latency %.3g s, bandwidth %.3g B/s", fit["latency_s"], _bandwidth(fit["bytes_per_s"]))
    return cluster.with_comm(float(fit["latency_s"]), _bandwidth(fit["bytes_per_s"]), links)


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _bandwidth(x: float | None) -> float:
    """A fitted bandwidth read back from comm.json: null means unlimited."""
    return math.inf if x is None else float(x)
