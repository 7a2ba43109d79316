"""Entry point: python -m orchestrator [+experiment=NAME] [group=choice ...] [-m].

Exit codes: 0 when every job ended "ok" or "oom"; 1 when a job (or a job of the sweep) ended "error"; 130 / 143
when stopped by SIGINT (Ctrl-C) / SIGTERM (the job's result.json and MLflow run say so: see
`orchestrator.interrupt`).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from algorithms.errors import LabError

from . import interrupt
from .plugins import register_search_path

log = logging.getLogger("orchestrator")

register_search_path()


def _skeleton(cfg: DictConfig, choices: dict[str, str]) -> dict[str, Any]:
    """The result.json fields known before the job runs (for a job that stops before writing its own)."""
    try:
        model = cfg.model.get("name")
    except Exception:
        model = None
    return {"model": model, **{k: choices.get(k) for k in ("placer", "scheduler", "cluster", "optimizer")}}


def _tracking_uri(cfg: DictConfig) -> str | None:
    try:
        tracking = cfg.get("tracking") or {}
        return str(tracking.get("uri")) if tracking.get("enabled", True) else None
    except Exception:  # an interpolation that does not resolve: the job reports it itself
        return None


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    from .app import JobFailed, run_job

    interrupt.install()
    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra/")}
    out = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    try:
        with interrupt.guard(out, _skeleton(cfg, choices), _tracking_uri(cfg), reported=(JobFailed,)):
            return run_job(cfg, out, choices, hc.sweep.dir if multirun else None)
    except Exception as exc:
        # a failing job does not stop a sweep: its result.json (and MLflow run, where one started) says
        # "error", the other jobs go on, and the sweep summary names it (the launching process exits 1)
        msg = str(exc) if isinstance(exc, JobFailed) else f"{type(exc).__name__}: {exc}"
        trace = not isinstance(exc, (JobFailed, LabError))  # an unforeseen error: keep its traceback in the log
        log.error("job failed: %s (see %s/result.json)", msg, out, exc_info=trace)
        if multirun:
            return {"status": "error", "error": msg}
        sys.exit(1)


if __name__ == "__main__":
    interrupt.install()
    try:
        main()
    except interrupt.Interrupted as exc:  # stopped outside a job (Hydra's start, a sweep between jobs)
        log.error("%s", exc)
        sys.exit(exc.exit_code)
    from .callbacks import SWEEP_FAILED

    if SWEEP_FAILED:
        sys.exit(1)
