"""Entry point for the orchestrator: the ``pipeline`` config group in, a validated schedule and figures out.

    sched, figures = run_pipeline(cfg.pipeline)                  # built-in shape
    sched, figures = run_pipeline(cfg.pipeline, graph, placement) # shape: from_placement

``pipe_cfg`` is the group as a plain mapping: ``_target_`` (the scheduler class), the case keys of
docs/design.md (shape, n_devices, n_micro, memory, recompute), ``name``, and the scheduler's own
hyper-parameters. No Hydra needed: the class is imported by its dotted path.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .baselines import ConfiguredPipelineScheduler
from .blocks import MicroBatchSpec
from .schedule import PipelineSchedule

log = logging.getLogger(__name__)

CASE_KEYS = ("shape", "n_devices", "n_micro", "memory", "recompute", "name")


def build_scheduler(pipe_cfg: Mapping[str, Any]) -> ConfiguredPipelineScheduler:
    """Import ``_target_`` and construct it with every other key (case keys included)."""
    cfg = dict(pipe_cfg)
    target = cfg.pop("_target_", None)
    if not target:
        raise ConfigError(
            f"pipeline config has no _target_ (name={cfg.get('name')!r}); choose gpipe, 1f1b, "
            f"chimera, 1f1b_plus, tessel or to"
        )
    mod, _, cls = str(target).rpartition(".")
    try:
        klass = getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"pipeline._target_={target!r} cannot be imported: {exc}") from exc
    try:
        return klass(**cfg)
    except TypeError as exc:
        raise ConfigError(f"pipeline {target}: bad keys {sorted(cfg)}: {exc}") from exc


def figures(schedule: PipelineSchedule) -> dict[str, Any]:
    """The numbers a run reports (result.json: bubble_rate, search_time_s; the rest as metrics).

    A Tessel schedule also reports its repetend: ``t_r`` (its period after equation 4's compaction, which lets
    consecutive instances overlap), ``window`` (the length of one instance as searched) and two bubble rates,
    ``repetend_bubble_rate`` = 1 - busy / (D x t_r) and ``window_bubble_rate`` = 1 - busy / (D x window), busy
    the devices' summed load of one micro-batch. The second is what the paper's Figures 11 and 12 plot: the
    authors' search with a given number of micro-batches (``Composer.compose_n`` in the public Tessel code)
    lays repetends end to end, without compaction. They differ where compaction overlaps a long window, e.g. V
    at N_R = 1: window 16, t_R 4 (0.75 against 0)."""
    out = {
        "bubble_rate": float(schedule.bubble_rate),
        "makespan": int(schedule.makespan),
        "n_micro": int(schedule.n_micro),
        "n_devices": len(schedule.spec.devices),
        "search_time_s": float(schedule.info.get("search_time_s", 0.0)),
        "peak_memory_units": schedule.peak_memory(),
        "memory_limit": schedule.memory_limit,
        "repetend": list(schedule.repetend) if schedule.repetend else None,
        "scheduler": schedule.info.get("scheduler"),
    }
    for k in ("n_r", "t_r", "window", "lower_bound", "repetend_bubble_rate", "optimal", "timed_out"):
        if k in schedule.info:
            out[k] = schedule.info[k]
    window = schedule.info.get("window")
    if window:
        busy = sum(schedule.spec.device_load(d) for d in schedule.spec.devices)
        out["window_bubble_rate"] = 1.0 - busy / (len(schedule.spec.devices) * float(window))
    if schedule.spec.time_unit_s:
        out["predicted_step_s"] = schedule.makespan * schedule.spec.time_unit_s
    return out


def run_pipeline(
    pipe_cfg: Mapping[str, Any], graph: Any = None, placement: Any = None
) -> tuple[PipelineSchedule, dict[str, Any]]:
    """Build the scheduler from the config, schedule the configured case, validate, return figures
    (`run_scheduler`)."""
    return run_scheduler(build_scheduler(pipe_cfg), graph, placement)


def run_scheduler(
    sched: ConfiguredPipelineScheduler, graph: Any = None, placement: Any = None
) -> tuple[PipelineSchedule, dict[str, Any]]:
    """Schedule `sched`'s configured case, validate it, return it with its figures.

    With the scheduler's ``steady_bubble`` (a config key) the figures also hold ``steady_bubble_rate``, the
    bubble rate "considering numerous micro-batches" of Tessel's Table II (`steady_bubble_rate`, from two more
    schedules of the same case at n1 = max(24, N_R) and 2 n1 micro-batches, N_R the repetend's micro-batches
    where the scheduler has one): the whole schedule's ``bubble_rate`` counts its warm-up and cool-down, which no
    finite pipeline avoids, so only the steady state can be 0 as in the paper."""
    s = sched.run(graph, placement)
    s.validate()
    f = figures(s)
    if sched.steady_bubble:
        n1 = max(24, int(s.info.get("n_r") or 0))
        f["steady_bubble_rate"] = steady_bubble_rate(
            sched, sched.spec(graph, placement), sched.case["memory"], n1, 2 * n1
        )
    log.info(
        "pipeline %s on %s: N=%d makespan %d bubble %.3f (search %.2fs)",
        sched.name,
        s.spec.name,
        s.n_micro,
        s.makespan,
        s.bubble_rate,
        f["search_time_s"],
    )
    return s, f


def steady_bubble_rate(
    scheduler: Any, spec: MicroBatchSpec, memory: int | None = None, n1: int = 24, n2: int = 48
) -> float:
    """Bubble rate "considering numerous micro-batches" (Table II): the idle share of the extra time that
    n2 - n1 more micro-batches cost, 1 - (n2 - n1) x busy per micro-batch / (D x (makespan2 - makespan1)).
    Warm-up and cool-down cost the same at n1 and n2 for a schedule that repeats a steady pattern, so they cancel.
    Cost: two schedules of the case."""
    a = scheduler.schedule(spec, spec.devices, memory, n1)
    b = scheduler.schedule(spec, spec.devices, memory, n2)
    busy = sum(blk.time * len(blk.devices) for blk in spec.blocks)
    dm = b.makespan - a.makespan
    if dm <= 0:
        return 0.0
    return max(0.0, 1.0 - (n2 - n1) * busy / (len(spec.devices) * dm))
