"""Stage pipeline (`pipeline` other than none): a micro-batch schedule for a block shape.

Built-in shapes (v, x, m, nn, k) need no graph; `pipeline.shape=from_placement` first places the model with the
configured placer and derives the blocks from that placement. The schedule search is cached like any stage.
Writes pipeline_schedule.json (docs/formats.md), its picture, a Chrome trace and the schedule as
torch.distributed.pipelining's per-rank action lists (pipeline_actions.csv / .json, algorithms/pipeline/export.py);
with a runtime (`runtime` other than none) the schedule is also executed by the PyTorch pipeline runner on a
GPT-style model split into the schedule's stages (`runtime.steps` iterations, at least 2).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from algorithms.graph import atomic_write_json

from ..context import JobContext
from ..registry import instantiate, is_none, plain
from .place import place_graph

log = logging.getLogger("orchestrator")


def run_pipeline_stage(ctx: JobContext, result: dict[str, Any], metrics: dict[str, Any], artifacts: list[Path]) -> None:
    from algorithms.pipeline.api import run_scheduler
    from algorithms.pipeline.schedule import PipelineSchedule

    pipe = plain(ctx.cfg.pipeline)
    graph = placement = None
    upstream: list[str] = []
    if pipe.get("shape") == "from_placement":
        placed = place_graph(ctx, result, metrics)
        artifacts.append(ctx.out / "placement.json")
        graph, placement, upstream = placed.graph, placed.assignment, [placed.key]

    def compute() -> dict[str, Any]:
        sched, figs = run_scheduler(instantiate(ctx.cfg.pipeline, "pipeline"), graph, placement)
        return {"schedule": sched.to_json(), "figures": figs}

    res = ctx.stage(
        "pipeline",
        {"pipeline": pipe},
        upstream,
        compute,
        lambda v, p: atomic_write_json(p / "pipeline.json", v),
        lambda p: json.loads((p / "pipeline.json").read_text()),
    )
    schedule = PipelineSchedule.from_json(res.value["schedule"])
    schedule.spec.name = f"{pipe.get('name') or ctx.choices.get('pipeline')} on shape {pipe.get('shape')}"
    figs = dict(res.value["figures"])
    schedule.validate(figs.get("memory_limit"))
    from ..pipeline_plots import write_pipeline_artifacts

    paths = write_pipeline_artifacts(schedule, ctx.out)
    artifacts.extend(Path(p) for p in paths.values())
    from algorithms.pipeline.export import write_export

    exported = write_export(schedule, ctx.out)  # torch.distributed.pipelining's action lists (docs/formats.md)
    artifacts.extend(Path(p) for p in exported.values())
    result["pipeline_torch_export"] = "pipeline_actions.csv" in {Path(p).name for p in exported.values()}
    result["devices"] = list(schedule.spec.devices)
    result["bubble_rate"] = figs["bubble_rate"]
    result["search_time_s"] = figs["search_time_s"]
    result["pipeline_figures"] = figs
    if figs.get("predicted_step_s") is not None:
        result["predicted_step_s"] = figs["predicted_step_s"]
    for k in (
        "bubble_rate",
        "search_time_s",
        "makespan",
        "n_micro",
        "n_r",
        "t_r",
        "lower_bound",
        "repetend_bubble_rate",
        "window",
        "window_bubble_rate",
        "steady_bubble_rate",
    ):
        v = figs.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            metrics[f"pipeline.{k}" if k not in ("bubble_rate", "search_time_s") else k] = v
    result["status"] = "ok"
    if not is_none(ctx.cfg.runtime):
        from backends.torch.pipeline import run_schedule

        rt = plain(ctx.cfg.runtime)
        run = run_schedule(schedule, iterations=max(2, int(rt.get("steps", 3))), seed=int(ctx.cfg.get("seed", 0)))
        result["measured_step_s"] = run["measured_step_s"]
        result["predicted_step_s"] = run["predicted_step_s"]
        result["loss"] = run["loss"]
        metrics["pipeline.reference_loss"] = run["reference_loss"]
        metrics["pipeline.max_grad_diff"] = run["max_grad_diff"]
        metrics["pipeline.seconds_per_unit"] = run["seconds_per_unit"]
        if abs(run["loss"] - run["reference_loss"]) > 1e-4 * max(1.0, abs(run["reference_loss"])):
            raise RuntimeError(
                f"pipelined loss {run['loss']} differs from the single-device loss {run['reference_loss']}"
            )
