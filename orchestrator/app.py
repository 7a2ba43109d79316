"""One job: compose the stages of orchestrator/stages/ and record the outcome.

    graph -> profile -> comm -> optimize -> place -> schedule -> simulate -> run   (op-level placement)
    [graph -> ... -> place ->] pipeline [-> run]                                    (pipeline=...)

Each stage's output is cached (orchestrator.cache) under a key built from the stage's resolved config and the
keys of its inputs. The job writes result.json, placement.json, schedule.json and timeline.json into its output
folder (formats: docs/formats.md) and logs everything to MLflow.

Outcomes: an out-of-memory placement (the simulator crosses a device's limit, or a placer finds no device that
can hold an op or group) is a legitimate result: status "oom", exit code 0. Any other failure writes status
"error" with the message, marks the MLflow run FAILED, and raises `JobFailed` (non-zero exit).
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from algorithms import compiled_mode
from algorithms.errors import InfeasiblePlacement, LabError
from algorithms.graph import atomic_write_json, atomic_write_json_list

from .cache import StageCache
from .context import JobContext, JobFailed, build_cluster
from .registry import build_runtime, is_none, plain
from .stages.graph import stage_comm, stage_graph, stage_profile
from .stages.optimize import stage_optimize
from .stages.pipeline import run_pipeline_stage
from .stages.place import Placed, place_graph, stage_place
from .stages.regime import runs_model
from .stages.run import stage_run
from .stages.schedule import stage_schedule
from .stages.simulate import plots, run_ccr, stage_simulate
from .trace import measured_part, write_trace
from .tracking import announce, start_job_run

# the job's public names, and the stages' for code that imported them from here before they had modules
__all__ = [
    "JobContext",
    "JobFailed",
    "Placed",
    "build_cluster",
    "place_graph",
    "run_job",
    "stage_comm",
    "stage_graph",
    "stage_optimize",
    "stage_place",
    "stage_profile",
    "stage_schedule",
    "stage_simulate",
]

log = logging.getLogger("orchestrator")


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
    resolved: dict[str, Any] = dict(plain(cfg))
    atomic_write_json(out / "config.json", resolved, indent=1)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    pipeline_only = choices.get("pipeline") not in (None, "none") and cfg.pipeline.get("shape") != "from_placement"
    if pipeline_only:  # a built-in block shape: no placer or op scheduler takes part
        choices = {k: v for k, v in choices.items() if k not in ("placer", "scheduler")}
        result["placer"] = result["scheduler"] = None
    tracker = start_job_run(resolved, choices, sweep_dir)
    result["mlflow_run_id"] = tracker.run_id
    artifacts: list[Path] = [out / "config.yaml"]
    metrics: dict[str, Any] = {}
    ctx = JobContext(cfg, out, choices, StageCache(cfg.cache.dir, bool(cfg.cache.enabled)))
    kernels_were = compiled_mode.mode()
    try:
        compiled_mode.set_mode(str(cfg.get("compiled", "auto")))  # the kernels' choice for this job (conf/config.yaml)
        if choices.get("pipeline") not in (None, "none"):
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
        compiled_mode.set_mode(kernels_were)
        if ctx.froze_gc:  # JobContext.freeze_graph: the job's objects go back to the collector
            gc.unfreeze()
            ctx.froze_gc = False
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
                    "placement_cpu_s",
                    "optimize_time_s",
                    "optimize_cpu_s",
                    "predicted_step_s",
                    "measured_step_s",
                    "traffic_bytes",
                    "n_ops",
                    "n_ops_placed",
                    "ccr",
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
            announce(tracker)
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


def _run_placement(ctx: JobContext, result: dict[str, Any], metrics: dict[str, Any], artifacts: list[Path]) -> None:
    """The op-level job: place, schedule, simulate, and run when a runtime is configured."""
    out = ctx.out
    runtime = (
        None
        if is_none(ctx.cfg.runtime) or not runs_model(ctx.cfg)
        else build_runtime(ctx.cfg.runtime, ctx.get_backend())
    )
    p = place_graph(ctx, result, metrics)
    artifacts.append(out / "placement.json")
    schedule, skey = stage_schedule(ctx, p.graph, p.cluster, p.coarse_placement, p.cmap, p.assignment, p.key)
    atomic_write_json(out / "schedule.json", schedule, indent=0)
    artifacts.append(out / "schedule.json")
    sim = stage_simulate(ctx, p.graph, p.cluster, p.assignment, schedule, skey, result)
    atomic_write_json_list(out / "timeline.json", sim.iter_timeline, indent=0)
    artifacts.append(out / "timeline.json")
    runtime_name = ctx.choices.get("runtime")
    artifacts.append(
        write_trace(out / "trace.json", sim, p.graph, p.cluster, other=measured_part(None, runtime_name)[1])
    )
    # the makespan, plus what every step of the workers' runtime pays besides ops and messages (TensorFlow)
    result["predicted_step_s"] = sim.makespan + result.get("predicted_fixed_step_s", 0.0)
    result["peak_memory_bytes"] = dict(sim.peak_memory)
    result["traffic_bytes"] = sim.traffic_bytes
    result["ccr"] = run_ccr(p.graph, p.cluster)
    metrics["cut_edge_bytes"] = sim.cut_edge_bytes
    for d, u in sim.utilization().items():
        metrics[f"utilization.{d}"] = u
    artifacts.extend(plots(sim, out, p.graph, p.assignment))
    if sim.oom is not None:
        result["status"], result["error"] = "oom", sim.oom.message()
        result["oom"] = sim.oom.to_dict()
        log.warning("%s", sim.oom.message())
    else:
        result["status"] = "ok"
    if runtime is not None:
        if result["status"] == "oom":
            log.warning("not running the placed model: the simulator predicts out of memory")
        else:
            rr = stage_run(ctx, runtime, p.graph, p.assignment, schedule, p.cluster, result, metrics, sim)
            timeline, other = measured_part(rr, runtime_name)  # trace.json: the measured step beside the predicted
            write_trace(out / "trace.json", sim, p.graph, p.cluster, timeline, other=other)
