"""Entry point: python -m orchestrator [+experiment=NAME] [group=choice ...] [-m]."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from .plugins import register_search_path

log = logging.getLogger("orchestrator")

register_search_path()


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> dict:
    from .app import JobFailed, run_job

    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if not k.startswith("hydra/")}
    if hc.mode == RunMode.MULTIRUN:
        # a failing job does not raise: its result.json and MLflow run say "error", the sweep goes on with the
        # others, and the sweep summary names it (the launching process then exits non-zero)
        try:
            return run_job(cfg, Path(hc.runtime.output_dir), choices, hc.sweep.dir)
        except JobFailed as exc:
            log.error("job failed: %s", exc)
            return {"status": "error", "error": str(exc)}
    try:
        return run_job(cfg, Path(hc.runtime.output_dir), choices, None)
    except JobFailed as exc:
        log.error("job failed: %s (see %s/result.json)", exc, hc.runtime.output_dir)
        sys.exit(1)


if __name__ == "__main__":
    main()
    from .callbacks import SWEEP_FAILED

    if SWEEP_FAILED:
        sys.exit(1)
