"""Hydra callbacks: a parent MLflow run per multirun, and a sweep summary naming failed jobs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from algorithms.errors import TrackingError
from algorithms.graph import atomic_write_json

from .mlflow_store import owner_tags, prepare_store, retrying_client
from .tracking import PARENT_FILE

log = logging.getLogger("orchestrator")

#: Jobs of the last multirun in this process that ended with status "error" (read by __main__ for the exit code).
SWEEP_FAILED: list[str] = []


class MlflowSweepCallback(Callback):
    """Before the jobs of a multirun start: create the tracking schema and experiment (so parallel jobs do not
    race on a fresh SQLite store) and a parent run whose id the jobs read from the sweep folder. After: close the
    parent run and write `sweep_summary.json` listing every job's status, naming the failed ones."""

    def __init__(self) -> None:
        self.parent_id: str | None = None
        self.uri: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not HydraConfig.initialized():  # lets ${hydra:...} interpolations in tracking.uri resolve
            HydraConfig.instance().set_config(config)
        tracking: Any = config.get("tracking") or {}
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not tracking.get("enabled", True):
            return
        try:
            exp_id = prepare_store(str(tracking.uri), str(tracking.experiment))
        except TrackingError as exc:  # each job then writes its result.json with the same error
            log.error("no parent MLflow run for the sweep: %s", exc)
            return
        self.uri = str(tracking.uri)
        client = retrying_client(self.uri)
        overrides = list(HydraConfig.get().overrides.task)
        run = client.create_run(
            exp_id,
            run_name=f"sweep {sweep_dir.name}",
            tags={
                "sweep_dir": str(sweep_dir),
                "overrides": " ".join(overrides)[:5000],
                "kind": "sweep",
                **owner_tags(),
            },
        )
        self.parent_id = run.info.run_id
        (sweep_dir / PARENT_FILE).write_text(self.parent_id)
        log.info("MLflow parent run %s for sweep %s", self.parent_id, sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        jobs = []
        # a job folder without result.json: the job's process died (killed, out of host memory) mid-way
        for folder in sorted(sweep_dir.iterdir(), key=lambda p: (len(p.name), p.name)):
            if folder.is_dir() and folder.name.isdigit() and not (folder / "result.json").exists():
                jobs.append({"job": folder.name, "status": "error", "error": "no result.json: the job died"})
        for res in sorted(sweep_dir.glob("*/result.json"), key=lambda p: p.parent.name):
            try:
                r = json.loads(res.read_text())
            except Exception as exc:
                jobs.append({"job": res.parent.name, "status": "error", "error": f"unreadable result: {exc}"})
                continue
            jobs.append(
                {
                    "job": res.parent.name,
                    "status": r.get("status"),
                    "placer": r.get("placer"),
                    "scheduler": r.get("scheduler"),
                    "model": r.get("model"),
                    "predicted_step_s": r.get("predicted_step_s"),
                    "measured_step_s": r.get("measured_step_s"),
                    "error": r.get("error"),
                    "mlflow_run_id": r.get("mlflow_run_id"),
                }
            )
        jobs.sort(key=lambda j: (len(j["job"]), j["job"]))
        failed = [j for j in jobs if j["status"] == "error"]
        summary = {
            "sweep_dir": str(sweep_dir),
            "jobs": jobs,
            "failed": [j["job"] for j in failed],
            "parent_run_id": self.parent_id,
        }
        atomic_write_json(sweep_dir / "sweep_summary.json", summary, indent=1)
        for j in jobs:
            log.info(
                "job %s: %-5s %s/%s predicted %s%s",
                j["job"],
                j["status"],
                j.get("placer"),
                j.get("scheduler"),
                j.get("predicted_step_s"),
                f"  ERROR {j['error']}" if j["status"] == "error" else "",
            )
        SWEEP_FAILED[:] = [j["job"] for j in failed]
        if failed:
            log.error("%d of %d jobs failed: %s", len(failed), len(jobs), ", ".join(j["job"] for j in failed))
        if self.parent_id and self.uri:
            client = retrying_client(self.uri)
            client.set_tag(self.parent_id, "failed_jobs", ",".join(j["job"] for j in failed) or "none")
            client.set_tag(self.parent_id, "n_jobs", str(len(jobs)))
            try:  # the comparison on the parent run: report, chart, best placer and its speed-up
                from .report.sweep import summarize_sweep

                summarize_sweep(self.uri, self.parent_id)
            except Exception as exc:  # the summary is a convenience; the sweep's own outcome stands
                log.warning("could not summarise sweep %s: %s", self.parent_id, exc)
            client.set_terminated(self.parent_id, status="FAILED" if failed else "FINISHED")
