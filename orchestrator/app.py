"""The job: graph -> profile -> optimize -> place -> schedule -> simulate -> run -> track.

Each stage's output is cached (orchestrator.cache) under a key built from the stage's resolved config and the
keys of its inputs. The job writes result.json, placement.json, schedule.json and timeline.json into its output
folder (formats: docs/formats.md) and logs everything to MLflow.

Outcomes: an out-of-memory placement (the simulator crosses a device's limit, or a placer finds no device that
can hold an op or group) is a legitimate result: status "oom", exit code 0. Any other failure writes status
"error" with the message, marks the MLflow run FAILED, and raises `JobFailed` (non-zero exit).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algorithms.cluster import Cluster, Link
from algorithms.errors import ConfigError, InfeasiblePlacement, InvalidSchedule, LabError
from algorithms.graph import OpGraph, atomic_write_json
from algorithms.placement import CoarseMap, Placement, Schedule, check_placement, check_schedule
from algorithms.simulator import RankPolicy, SimResult, sim_result_from_dict, sim_result_to_dict, simulate

from .cache import StageCache
from .tracking import RunTracker, flatten, read_parent_run_id

log = logging.getLogger("orchestrator")


class JobFailed(RuntimeError):
    """The job ended with status "error" (its result.json and MLflow run say why)."""


def _plain(node: Any) -> Any:
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def _instantiate(node: Any, group: str) -> Any:
    from hydra.utils import instantiate

    if node is None or "_target_" not in node:
        raise ConfigError(f"config group {group!r} has no _target_: {OmegaConf.to_yaml(node) if node else None}")
    try:
        return instantiate(node, _convert_="all")
    except Exception as exc:  # hydra wraps import/constructor errors
        raise ConfigError(f"cannot build {group} from {node.get('_target_')!r}: {exc}") from exc


# --------------------------------------------------------------------------- stage helpers
def _save_json(name: str) -> Callable[[Any, Path], None]:
    def save(obj: Any, folder: Path) -> None:
        atomic_write_json(folder / name, obj)

    return save


def _load_json(name: str) -> Callable[[Path], Any]:
    def load(folder: Path) -> Any:
        with open(folder / name) as f:
            return json.load(f)

    return load


def build_cluster(cluster_cfg: Any, name: str) -> Cluster:
    """A Cluster from a conf/cluster YAML (a device list, or `generate:` for the thesis' device generator)."""
    d = dict(_plain(cluster_cfg))
    if "generate" in d:
        from algorithms.workloads.synthetic import thesis_devices

        gen = dict(d.pop("generate"))
        comm = dict(d.get("comm") or {})
        gen.setdefault("latency_s", float(comm.get("latency_s", 0.0)))
        gen.setdefault("mode", comm.get("mode", "parallel"))
        cl = thesis_devices(name=name, **gen)
        if comm.get("bytes_per_s") is not None:
            cl = cl.with_comm(cl.latency_s, float(comm["bytes_per_s"]))
        frac = d.get("memory_fraction")
        return cl.scaled(float(frac)) if frac not in (None, 1, 1.0) else cl
    return Cluster.from_dict(d, name=name)


@dataclass
class JobContext:
    cfg: DictConfig
    out: Path
    choices: dict[str, str]
    cache: StageCache
    hits: dict[str, bool] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)  # extra metrics stages want logged
    artifacts: list[Path] = field(default_factory=list)  # extra files stages want logged
    backend: Any = None
    model: Any = None

    def stage(self, name: str, config: Any, upstream: list[str], compute, save, load):
        res = self.cache.run(name, config, upstream, compute, save, load)
        self.hits[name] = res.hit
        return res

    def get_backend(self):
        if self.backend is None:
            if self.cfg.backend.get("name") == "none" and "_target_" not in self.cfg.backend:
                raise ConfigError(
                    f"model={self.choices.get('model')} is a framework model: choose "
                    f"backend=torch or backend=tensorflow"
                )
            self.backend = _instantiate(self.cfg.backend, "backend")
        return self.backend

    def get_model(self):
        if self.model is None:
            self.model = self.get_backend().build(_plain(self.cfg.model))
        return self.model


# --------------------------------------------------------------------------- stages
def stage_graph(ctx: JobContext) -> tuple[OpGraph, str]:
    m = ctx.cfg.model
    kind = m.get("kind")
    mcfg = _plain(m)
    if kind == "synthetic":
        from algorithms.workloads.synthetic import level_dag

        gen = dict(mcfg["generator"])

        def compute():
            return level_dag(name=f"synthetic-s{gen.get('seed', 0)}", **gen)

        config = {"kind": kind, "generator": gen}
    elif kind == "file":
        path = mcfg.get("path")
        if not path or path == "???":
            raise ConfigError("model=graph_file needs model.path=/abs/path/to/graph.json")
        if not os.path.isfile(path):
            raise ConfigError(f"model.path: graph file {path!r} does not exist")
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()

        def compute():
            return OpGraph.load(path)

        config = {"kind": kind, "sha256": digest}
    elif kind == "linreg_graph":
        from algorithms.workloads.synthetic import linreg_graph

        def compute():
            return linreg_graph(batch=int(mcfg["batch"]), features=int(mcfg["features"]))

        config = {"kind": kind, "batch": mcfg["batch"], "features": mcfg["features"]}
    elif kind == "framework":

        def compute():
            return ctx.get_backend().capture(ctx.get_model())

        config = {"kind": kind, "model": mcfg, "backend": _plain(ctx.cfg.backend)}
    else:
        raise ConfigError(f"model.kind {kind!r} is not one of synthetic, file, linreg_graph, framework")
    res = ctx.stage(
        "graph", config, [], compute, lambda g, p: g.save(p / "graph.json"), lambda p: OpGraph.load(p / "graph.json")
    )
    return res.value, res.key


def stage_profile(ctx: JobContext, graph: OpGraph, gkey: str) -> tuple[OpGraph, str]:
    prof = _plain(ctx.cfg.profiler)
    kind = prof.get("kind", "file")
    if kind == "file":
        return graph, gkey
    if kind == "measured":
        cfg = {k: prof.get(k) for k in ("kind", "warmup", "steps", "batch_size")}

        def compute():
            return ctx.get_backend().profile(
                ctx.get_model(),
                graph,
                warmup=int(prof.get("warmup", 5)),
                steps=int(prof.get("steps", 10)),
                batch_size=prof.get("batch_size"),
            )
    elif kind == "standard_evaluation":
        from .standard_eval import publish, standard_evaluation_profile

        cfg = dict(prof)
        cfg["backend"] = _plain(ctx.cfg.backend)
        cfg["cluster"] = _plain(ctx.cfg.cluster)

        def save(v, p):
            v[0].save(p / "graph.json")
            atomic_write_json(p / "standard_evaluation.json", v[1])

        def load(p):
            return OpGraph.load(p / "graph.json"), json.loads((p / "standard_evaluation.json").read_text())

        res = ctx.stage("profile", cfg, [gkey], lambda: standard_evaluation_profile(ctx, graph, prof), save, load)
        publish(res.value[1], ctx)
        return res.value[0], res.key
    else:
        raise ConfigError(f"profiler.kind {kind!r} is not one of file, measured, standard_evaluation")
    cfg["backend"] = _plain(ctx.cfg.backend)
    res = ctx.stage(
        "profile", cfg, [gkey], compute, lambda g, p: g.save(p / "graph.json"), lambda p: OpGraph.load(p / "graph.json")
    )
    return res.value, res.key


def stage_comm(ctx: JobContext, cluster: Cluster) -> Cluster:
    """Fit the communication model with the backend's micro-benchmark and write it into the cluster."""
    prof = _plain(ctx.cfg.profiler)
    if prof.get("kind") == "file" or not prof.get("comm_benchmark") or len(cluster) < 2:
        return cluster
    sizes = [int(s) for s in prof.get("comm_sizes") or []] or None
    repeats = int(prof.get("comm_repeats", 5))
    cfg = {
        "backend": _plain(ctx.cfg.backend),
        "devices": [d.to_dict() for d in cluster.devices],
        "sizes": sizes,
        "repeats": repeats,
    }

    def compute():
        fit = ctx.get_backend().comm_benchmark(cluster, sizes, repeats)
        return {
            "latency_s": fit.latency_s,
            "bytes_per_s": fit.bytes_per_s,
            "links": [[s, d, l, b] for (s, d), (l, b) in fit.links.items()],
            "samples": [list(x) for x in fit.samples],
        }

    res = ctx.stage("comm", cfg, [], compute, _save_json("comm.json"), _load_json("comm.json"))
    fit = res.value
    links = {(s, d): Link(float(l), float(b)) for s, d, l, b in fit["links"]}
    log.info("communication fit: latency %.3g s, bandwidth %.3g B/s", fit["latency_s"], fit["bytes_per_s"])
    return cluster.with_comm(float(fit["latency_s"]), float(fit["bytes_per_s"]), links)


def stage_optimize(ctx: JobContext, graph: OpGraph, pkey: str, cluster: Cluster) -> tuple[OpGraph, CoarseMap, str]:
    passes_cfg = ctx.cfg.optimizer.get("passes") or []
    if not passes_cfg:
        return graph, CoarseMap.identity(graph), pkey

    def compute():
        g, cmap = graph, CoarseMap.identity(graph)
        for i, pc in enumerate(passes_cfg):
            gp = _instantiate(pc, f"optimizer.passes[{i}]")
            if hasattr(gp, "bind"):
                gp.bind(cluster)
            t0 = time.perf_counter()
            g2, m = gp.apply(g)
            log.info("pass %-24s %d -> %d ops (%.2fs)", type(gp).__name__, len(g), len(g2), time.perf_counter() - t0)
            cmap = cmap.then(m)
            g = g2
        cmap.check_covers(graph)
        # composing passes concatenates member lists; keep each coarse op's members in topological order
        pos = graph.index().pos
        return g, CoarseMap({c: sorted(members, key=pos.__getitem__) for c, members in cmap.items()})

    def save(v, p):
        v[0].save(p / "graph.json")
        atomic_write_json(p / "coarse_map.json", v[1])

    def load(p):
        with open(p / "coarse_map.json") as f:
            return OpGraph.load(p / "graph.json"), CoarseMap(json.load(f))

    cfg = {"optimizer": _plain(ctx.cfg.optimizer), "cluster": cluster.to_dict()}
    res = ctx.stage("optimize", cfg, [pkey], compute, save, load)
    g, cmap = res.value
    return g, cmap, res.key


def stage_place(ctx: JobContext, coarse: OpGraph, okey: str, cluster: Cluster) -> tuple[Placement, float, str]:
    def compute():
        placer = _instantiate(ctx.cfg.placer, "placer")
        t0 = time.perf_counter()
        pl = placer.place(coarse, cluster)
        dt = time.perf_counter() - t0
        return {"assignment": pl.assignment, "order": pl.order, "info": pl.info, "placement_time_s": dt}

    cfg = {"placer": _plain(ctx.cfg.placer), "cluster": cluster.to_dict(), "seed": ctx.cfg.get("seed")}
    res = ctx.stage("place", cfg, [okey], compute, _save_json("placement.json"), _load_json("placement.json"))
    v = res.value
    return Placement(dict(v["assignment"]), v.get("order"), dict(v.get("info") or {})), v["placement_time_s"], res.key


def stage_schedule(
    ctx: JobContext,
    graph: OpGraph,
    cluster: Cluster,
    coarse_pl: Placement,
    cmap: CoarseMap,
    assignment: dict[str, str],
    plkey: str,
) -> tuple[Schedule, str]:
    sched_cfg = ctx.cfg.scheduler

    def compute():
        from algorithms.schedulers.baseline import PlacerOrderScheduler

        scheduler = _instantiate(sched_cfg, "scheduler")
        full = Placement(assignment)
        if isinstance(scheduler, PlacerOrderScheduler) and coarse_pl.order:
            order = cmap.expand_schedule(coarse_pl.order)
            order = {d: list(order.get(d, [])) for d in cluster.names}
            try:
                check_schedule(graph, full, order)
                simulate(graph, cluster, full, order, record_memory=False)
                return order
            except InvalidSchedule as exc:
                log.warning(
                    "the placer's order does not replay on the original graph (%s); running ops by "
                    "the placer's rank instead",
                    exc,
                )
                rank = {o: k for dev_ops in order.values() for k, o in enumerate(dev_ops)}
                r = simulate(graph, cluster, full, policy=RankPolicy(rank), record_memory=False)
                return r.order
        return scheduler.order(graph, cluster, full)

    cfg = {"scheduler": _plain(sched_cfg)}
    res = ctx.stage("schedule", cfg, [plkey], compute, _save_json("schedule.json"), _load_json("schedule.json"))
    return {d: list(v) for d, v in res.value.items()}, res.key


def stage_simulate(
    ctx: JobContext, graph: OpGraph, cluster: Cluster, assignment: dict[str, str], schedule: Schedule, skey: str
) -> SimResult:
    def compute():
        return simulate(graph, cluster, assignment, schedule)

    res = ctx.stage(
        "simulate",
        {"cluster": cluster.to_dict()},
        [skey],
        compute,
        lambda r, p: atomic_write_json(p / "sim.json", sim_result_to_dict(r)),
        lambda p: sim_result_from_dict(json.load(open(p / "sim.json"))),
    )
    return res.value


# --------------------------------------------------------------------------- the job
def _finite(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and (math.isinf(x) or math.isnan(x))) else x


def run_job(cfg: DictConfig, out: Path, choices: dict[str, str], sweep_dir: str | None = None) -> dict[str, Any]:
    """Run one job; always writes result.json; raises JobFailed when status is "error"."""
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "model": cfg.model.get("name"),
        "placer": choices.get("placer"),
        "scheduler": choices.get("scheduler"),
        "n_ops": None,
        "n_ops_placed": None,
        "devices": [],
        "placement_time_s": None,
        "predicted_step_s": None,
        "measured_step_s": None,
        "peak_memory_bytes": {},
        "memory_limit_bytes": {},
        "traffic_bytes": None,
        "status": "error",
        "error": None,
        "mlflow_run_id": None,
        "cluster": choices.get("cluster"),
        "optimizer": choices.get("optimizer"),
        "backend": choices.get("backend"),
        "profiler": choices.get("profiler"),
        "pipeline": choices.get("pipeline"),
        "runtime": choices.get("runtime"),
    }
    resolved = OmegaConf.to_container(cfg, resolve=True)
    atomic_write_json(out / "config.json", resolved, indent=1)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    pipeline_only = choices.get("pipeline") not in (None, "none") and cfg.pipeline.get("shape") != "from_placement"
    if pipeline_only:  # a built-in block shape: no placer or op scheduler takes part
        choices = {k: v for k, v in choices.items() if k not in ("placer", "scheduler")}
        result["placer"] = result["scheduler"] = None
    tracking = cfg.get("tracking") or {}
    tags = {k: str(v) for k, v in choices.items() if v is not None}
    tags.update({"model_name": str(cfg.model.get("name"))})
    tracker = RunTracker(
        str(tracking.get("uri")),
        str(tracking.get("experiment", "lab")),
        enabled=bool(tracking.get("enabled", True)),
        run_name=(
            f"pipeline/{choices.get('pipeline')}/{cfg.pipeline.get('shape')}"
            if pipeline_only
            else f"{choices.get('model')}/{choices.get('placer')}/{choices.get('scheduler')}"
        ),
        parent_run_id=read_parent_run_id(sweep_dir),
        tags=tags,
    )
    result["mlflow_run_id"] = tracker.run_id
    artifacts: list[Path] = [out / "config.yaml"]
    metrics: dict[str, Any] = {}
    ctx = JobContext(cfg, out, choices, StageCache(cfg.cache.dir, bool(cfg.cache.enabled)))
    try:
        tracker.log_params(flatten({k: v for k, v in resolved.items() if k != "hydra"}))
        if choices.get("pipeline") not in (None, "none"):
            from .pipeline_stage import run_pipeline_stage

            run_pipeline_stage(ctx, result, metrics, artifacts)
        else:
            _run_placement(ctx, result, metrics, artifacts)
    except InfeasiblePlacement as exc:
        result["status"], result["error"] = "oom", f"{type(exc).__name__}: {exc}"
        log.warning("out of memory: %s", exc)
    except LabError as exc:
        result["status"], result["error"] = "error", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # report every failure in result.json and MLflow before exiting non-zero
        log.exception("job failed")
        result["status"], result["error"] = "error", f"{type(exc).__name__}: {exc}"
    finally:
        result["cache_hits"] = dict(ctx.hits)
        metrics.update(ctx.metrics)
        artifacts.extend(ctx.artifacts)
        atomic_write_json(out / "result.json", result, indent=1)
        artifacts.insert(0, out / "result.json")
        metrics.update(
            {
                k: result[k]
                for k in (
                    "placement_time_s",
                    "predicted_step_s",
                    "measured_step_s",
                    "traffic_bytes",
                    "n_ops",
                    "n_ops_placed",
                )
                if isinstance(result.get(k), (int, float))
            }
        )
        for d, v in (result.get("peak_memory_bytes") or {}).items():
            metrics[f"peak_memory_bytes.{d}"] = v
        if result.get("peak_memory_bytes"):
            metrics["peak_memory_bytes.max"] = max(result["peak_memory_bytes"].values())
        metrics["oom"] = 1.0 if result["status"] == "oom" else 0.0
        try:
            tracker.log_metrics(metrics)
            tracker.set_tags({"status": result["status"], **({"error": result["error"]} if result["error"] else {})})
            tracker.log_artifacts(artifacts)
        finally:
            tracker.end(ok=result["status"] != "error")
    hits = ", ".join(f"{k}={'hit' if v else 'computed'}" for k, v in ctx.hits.items())
    log.info("stages: %s", hits or "none")
    if result["status"] == "error":
        raise JobFailed(result["error"])
    log.info(
        "status %s: predicted step %s s, placement %s s -> %s",
        result["status"],
        result["predicted_step_s"],
        result["placement_time_s"],
        out,
    )
    return result


@dataclass
class Placed:
    """What the placement half of a job produced (inputs of scheduling, simulation and pipelines)."""

    graph: OpGraph
    cluster: Cluster
    coarse: OpGraph
    cmap: CoarseMap
    coarse_placement: Placement
    assignment: dict[str, str]
    placement_time_s: float
    key: str


def place_graph(ctx: JobContext, result: dict[str, Any], metrics: dict[str, Any]) -> Placed:
    """Stages graph, profile, comm, optimize and place; fills the matching result.json fields."""
    cfg = ctx.cfg
    cluster = build_cluster(cfg.cluster, ctx.choices.get("cluster") or "cluster")
    graph, gkey = stage_graph(ctx)
    graph, pkey = stage_profile(ctx, graph, gkey)
    cluster = stage_comm(ctx, cluster)
    graph.validate(cluster)
    need_fraction = cfg.cluster.get("need_fraction")
    if need_fraction is not None:
        cluster = _memory_from_need(graph, cluster, float(need_fraction), result)
    result["n_ops"] = len(graph)
    result["devices"] = cluster.names
    result["memory_limit_bytes"] = {d.name: _finite(d.memory_bytes) for d in cluster.devices}
    for d in cluster.devices:
        if math.isfinite(d.memory_bytes):
            metrics[f"memory_limit_bytes.{d.name}"] = d.memory_bytes
    if result.get("memory_need_bytes") is not None:
        metrics["memory_need_bytes"] = result["memory_need_bytes"]
    coarse, cmap, okey = stage_optimize(ctx, graph, pkey, cluster)
    result["n_ops_placed"] = len(coarse)
    coarse_pl, ptime, plkey = stage_place(ctx, coarse, okey, cluster)
    result["placement_time_s"] = ptime
    result["placer_info"] = coarse_pl.info
    for k, v in (coarse_pl.info or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            metrics[f"placer.{k}"] = v
    assignment = cmap.expand_assignment(coarse_pl.assignment)
    check_placement(graph, cluster, assignment)
    atomic_write_json(ctx.out / "placement.json", assignment, indent=0)
    return Placed(graph, cluster, coarse, cmap, coarse_pl, assignment, ptime, plkey)


def _memory_from_need(graph: OpGraph, cluster: Cluster, fraction: float, result: dict[str, Any]) -> Cluster:
    """Give every device `fraction` of the model's need: the peak memory of the whole graph on one device of
    the cluster, in topological order (Baechi Table 4 cuts memory to 30% of what the model needs). The need is
    recorded as result.json's `memory_need_bytes`."""
    from algorithms.placement import topological_schedule

    if not fraction > 0:
        raise ConfigError(f"cluster.need_fraction must be > 0, got {fraction}")
    dev = cluster.devices[0].name
    one = {op: dev for op in graph.ops}
    need = simulate(
        graph, cluster.with_memory(math.inf), one, topological_schedule(graph, one, [dev]), record_memory=False
    ).peak_memory[dev]
    result["memory_need_bytes"] = need
    log.info(
        "memory: the model needs %.4g bytes on one device; each device gets %.0f%% of it (%.4g bytes)",
        need,
        100 * fraction,
        fraction * need,
    )
    return cluster.with_memory(fraction * need)


def _run_placement(ctx: JobContext, result: dict[str, Any], metrics: dict[str, Any], artifacts: list[Path]) -> None:
    cfg, out = ctx.cfg, ctx.out
    p = place_graph(ctx, result, metrics)
    artifacts.append(out / "placement.json")
    graph, cluster, coarse_pl, cmap, assignment, plkey = (
        p.graph,
        p.cluster,
        p.coarse_placement,
        p.cmap,
        p.assignment,
        p.key,
    )
    schedule, skey = stage_schedule(ctx, graph, cluster, coarse_pl, cmap, assignment, plkey)
    atomic_write_json(out / "schedule.json", schedule, indent=0)
    artifacts.append(out / "schedule.json")
    sim = stage_simulate(ctx, graph, cluster, assignment, schedule, skey)
    atomic_write_json(out / "timeline.json", sim.timeline(), indent=0)
    artifacts.append(out / "timeline.json")
    result["predicted_step_s"] = sim.makespan
    result["peak_memory_bytes"] = dict(sim.peak_memory)
    result["traffic_bytes"] = sim.traffic_bytes
    metrics["cut_edge_bytes"] = sim.cut_edge_bytes
    for d, u in sim.utilization().items():
        metrics[f"utilization.{d}"] = u
    artifacts.extend(_plots(sim, out, graph, assignment))
    if sim.oom is not None:
        result["status"], result["error"] = "oom", sim.oom.message()
        result["oom"] = sim.oom.to_dict()
        log.warning("%s", sim.oom.message())
    else:
        result["status"] = "ok"
    if cfg.runtime.get("kind", "none") == "real":
        if result["status"] == "oom":
            log.warning("not running the placed model: the simulator predicts out of memory")
        else:
            _run_real(ctx, graph, assignment, schedule, cluster, result, metrics, sim)


RUN_ORDERS = ("threads", "planned")


def _run_real(
    ctx: JobContext,
    graph: OpGraph,
    assignment: dict[str, str],
    schedule: Schedule,
    cluster: Cluster,
    result: dict[str, Any],
    metrics: dict[str, Any],
    sim: SimResult | None = None,
) -> None:
    rt = _plain(ctx.cfg.runtime)
    backend = ctx.get_backend()
    kwargs: dict[str, Any] = {"warmup": int(rt.get("warmup", 5)), "steps": int(rt.get("steps", 20))}
    order = rt.get("order", "threads")
    if order not in RUN_ORDERS:
        raise ConfigError(f"runtime.order: {order!r} is not one of {RUN_ORDERS}")
    if order == "planned":
        if "plan" not in inspect.signature(backend.run).parameters:
            raise ConfigError(
                f"runtime.order=planned: backend {ctx.cfg.backend.name!r} cannot follow a plan; "
                f"use runtime.order=threads"
            )
        if sim is None:
            raise ConfigError("runtime.order=planned needs the simulated step")
        start = {name: sim.start[i] for i, name in enumerate(sim.names)}
        kwargs["plan"] = (start, [(op, dst, arrive) for op, _, dst, _, arrive, _ in sim.transfers])
    if rt.get("check_correctness") is not None and "check_correctness" in inspect.signature(backend.run).parameters:
        kwargs["check_correctness"] = bool(rt["check_correctness"])
    rr = backend.run(ctx.get_model(), graph, assignment, schedule, cluster, **kwargs)
    result["measured_step_s"] = rr.measured_step_s
    result["measured_peak_memory_bytes"] = dict(rr.peak_memory_bytes)
    result["measured_traffic_bytes"] = rr.traffic_bytes
    result["loss"] = rr.loss
    for d, v in rr.peak_memory_bytes.items():
        metrics[f"measured_peak_memory_bytes.{d}"] = v
    metrics["measured_traffic_bytes"] = rr.traffic_bytes
    if rr.loss is not None:
        metrics["loss"] = rr.loss
    for k, v in (rr.extra or {}).items():
        if isinstance(v, (int, float)):
            metrics[f"run.{k}"] = v
    if result.get("predicted_step_s"):
        metrics["prediction_error"] = (result["predicted_step_s"] - rr.measured_step_s) / rr.measured_step_s


def _plots(
    sim: SimResult, out: Path, graph: OpGraph | None = None, assignment: dict[str, str] | None = None
) -> list[Path]:
    """Per-run pictures: the device timeline (Gantt), memory over time with the limits, and for small graphs
    the placement drawn on the graph. A picture never fails a job."""
    from . import plots

    jobs = [
        ("device_timeline.png", lambda p: plots.device_utilization_png(sim, p)),
        ("memory.png", lambda p: plots.memory_png(sim, p)),
    ]
    if graph is not None and assignment is not None:
        jobs.append(
            ("placement_graph.png", lambda p: plots.placement_graph_png(graph, assignment, p, devices=sim.devices))
        )
    paths = []
    for name, fn in jobs:
        try:
            if fn(out / name):
                paths.append(out / name)
        except Exception as exc:
            log.warning("could not draw %s: %s", name, exc)
    return paths
