"""MLflow tracking: one run per job, a parent run per multirun, schema created before jobs start.

What a job's run holds (`start_job_run`):

* name: the choices a user reads first, `m_etf · gnmt · cpu4` (placer, or pipeline for a pipeline-only run;
  model; cluster), then the values of the other settings the command line set (`bound=0.4`);
* params: short, the names users type: every config-group choice (`placer=m_etf`, `model=gnmt`,
  `backend`, `cluster`, `scheduler`, `optimizer`, `profiler`, `runtime`, `pipeline`, `experiment`),
  `seed`, `memory_fraction`, `need_fraction`, and every other key the command line or the sweep overrode
  (`optimizer.passes.4.bound`), taken from Hydra's choices and task overrides. The whole resolved config is
  an artifact (`config.yaml`, logged by the job), not ~90 params;
* tags: the choices again (the report keys rows on them), `status`, `error` when it failed;
* metrics: the numbers of result.json, with `memory_limit_bytes` (the smallest device limit the run used)
  beside the per-device `memory_limit_bytes.<device>`.

Speed: a cached rerun of the default experiment spent more time on tracking than on its work. Importing MLflow
alone (it pulls in pandas, FastAPI, SQLAlchemy and Alembic) and opening its store take seconds of CPU. So params,
metrics and tags are buffered and sent in one batch, artifacts copied once from one staging folder, and by
default (`tracking.direct=true`) a run of an existing local SQLite store whose schema revision is known
(DIRECT_SCHEMAS) is written with the standard library's sqlite3, the rows MLflow's SqlAlchemyStore writes
(`_DirectSqlite`: MLflow is not imported; tests write the same run both ways and compare what MlflowClient
reads). The first run of a store or experiment, another schema revision, a remote URI or `tracking.direct=false`
go through `mlflow.tracking.MlflowClient` (never the fluent API, whose `start_run` resolves source and git
context), five store calls per job, each retried while the database is locked (orchestrator.mlflow_store, which
also creates and migrates the store once). benchmarks/bench_tracking.py prints the share of each path.
MLflow's anonymous usage telemetry is turned off for everything the lab starts (`MLFLOW_DISABLE_TELEMETRY=true`,
set by orchestrator.run_writers, imported here, before MLflow is, unless the user set it).

Modules: orchestrator.run_naming (short params, run names), orchestrator.run_writers (`_ClientStore`,
`_DirectSqlite`), orchestrator.runs_view (the runs-table view); this one drives a run (`RunTracker`).

A job that fails ends its run with status FAILED and an `error` tag, so no failed run looks successful.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .run_naming import _scalar, run_name, short_params, task_overrides
from .run_writers import _ClientStore, _DirectSqlite, _NoDirect
from .runs_view import VIEW_KEY, runs_page_url

log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent_run.txt"
MAX_TAG_LEN = 5000


class RunTracker:
    """Wraps one MLflow run for a job; every method is a no-op when tracking is disabled.

    The run is created at once (its id goes into result.json); params, metrics, tags and artifacts are buffered
    and sent by `end` in one batch. With `direct` (the default) a local SQLite store whose schema is known is
    written without importing MLflow (`_DirectSqlite`); else, or where that does not apply, through
    MlflowClient. `elapsed_s` is the time spent on tracking (imports included), `writer` which path wrote the
    run ("sqlite3" or "mlflow")."""

    def __init__(
        self,
        uri: str,
        experiment: str,
        enabled: bool = True,
        run_name: str | None = None,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
        direct: bool = True,
    ):
        self.enabled = enabled
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.uri = uri
        self.writer = ""
        self.elapsed_s = 0.0
        self._params: dict[str, str] = {}
        self._metrics: dict[str, float] = {}
        self._tags: dict[str, str] = {}
        self._artifacts: list[tuple[Path, str | None]] = []
        self._dicts: list[tuple[Any, str]] = []
        if not enabled:
            return
        t0 = time.perf_counter()
        from .mlflow_store import owner_tags, prepare_store

        self._store: _ClientStore | _DirectSqlite
        try:
            if not direct:
                raise _NoDirect("direct=False")
            self._store = _DirectSqlite(uri, experiment)
            self.writer = "sqlite3"
        except _NoDirect as exc:
            log.debug("MLflow through MlflowClient: %s", exc)
            prepare_store(uri, experiment)  # created, migrated or repaired once, under a lock; dead runs FAILED
            self._store = _ClientStore(uri, experiment)
            self.writer = "mlflow"
        self.experiment_id = self._store.experiment_id
        all_tags = {k: str(v)[:MAX_TAG_LEN] for k, v in {**dict(tags or {}), **owner_tags()}.items()}
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        all_tags.setdefault("mlflow.user", os.environ.get("USER") or "lab")
        self.run_id = self._store.create_run(run_name, all_tags)
        self.elapsed_s += time.perf_counter() - t0

    def log_config(
        self,
        config: Mapping[str, Any],
        choices: Mapping[str, Any],
        overrides: Sequence[str] | None = None,
    ) -> dict[str, str]:
        """Buffer the short params of `short_params` (overrides default to the Hydra job's); return them."""
        params = short_params(config, choices, task_overrides() if overrides is None else overrides)
        self.log_params(params)
        return params

    def log_params(self, params: Mapping[str, Any]) -> None:
        if self.enabled:
            self._params.update({k: _scalar(v) for k, v in params.items()})

    def log_metrics(self, metrics: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        for k, v in metrics.items():
            if isinstance(v, bool):
                v = float(v)
            if isinstance(v, (int, float)) and not math.isnan(v) and not math.isinf(v):
                self._metrics[_metric_name(k)] = float(v)
        limits = [v for k, v in self._metrics.items() if k.startswith("memory_limit_bytes.")]
        if limits:
            self._metrics["memory_limit_bytes"] = min(limits)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        if self.enabled:
            self._tags.update({k: str(v)[:MAX_TAG_LEN] for k, v in tags.items()})

    def log_artifacts(self, paths: Iterable[str | os.PathLike], artifact_path: str | None = None) -> None:
        if self.enabled:
            self._artifacts.extend((Path(p), artifact_path) for p in paths)

    def log_dict(self, obj: Any, name: str) -> None:
        if self.enabled:
            self._dicts.append((obj, name))

    def flush(self) -> None:
        """Send what is buffered: one batch of params, metrics and tags, one artifact copy."""
        if not (self.enabled and self.run_id):
            return
        t0 = time.perf_counter()
        if self._params or self._metrics or self._tags:
            self._store.log_batch(self._params, self._metrics, self._tags)
        self._params, self._metrics, self._tags = {}, {}, {}
        files = [(f, a) for f, a in self._artifacts if f.is_file()]
        if files or self._dicts:
            with tempfile.TemporaryDirectory(prefix="lab-artifacts-") as tmp:
                for f, a in files:
                    dest = Path(tmp, a or "", f.name)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f, dest)
                for obj, name in self._dicts:
                    dest = Path(tmp, name)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_text(json.dumps(obj, indent=1, default=str))
                self._store.log_artifacts(tmp)
        self._artifacts, self._dicts = [], []
        self.elapsed_s += time.perf_counter() - t0

    def end(self, ok: bool) -> None:
        if not (self.enabled and self.run_id):
            return
        try:
            self.flush()
        finally:
            t0 = time.perf_counter()
            self._store.set_terminated("FINISHED" if ok else "FAILED")
            self.elapsed_s += time.perf_counter() - t0
            log.debug("MLflow (%s): %.3f s for run %s", self.writer, self.elapsed_s, self.run_id)


def start_job_run(
    config: Mapping[str, Any],
    choices: Mapping[str, Any],
    sweep_dir: str | os.PathLike | None = None,
    overrides: Sequence[str] | None = None,
) -> RunTracker:
    """The run of one job, named and tagged from its choices, with its short params buffered.

    `config` is the resolved job config (plain containers; its `tracking` section gives uri, experiment and
    enabled), `choices` Hydra's config-group choices (those a pipeline-only job drops left out), `sweep_dir` the
    multirun folder whose PARENT_FILE names the parent run. Replaces `RunTracker(...)` + `log_params(flatten(
    config))` in the job."""
    tracking = config.get("tracking") or {}
    overrides = task_overrides() if overrides is None else overrides
    params = short_params(config, choices, overrides)
    tags = {k: str(v) for k, v in choices.items() if v is not None}
    model = config.get("model") or {}
    tags["model_name"] = str(model.get("name") if isinstance(model, Mapping) else model)
    tracker = RunTracker(
        str(tracking.get("uri")),
        str(tracking.get("experiment", "lab")),
        enabled=bool(tracking.get("enabled", True)),
        run_name=run_name(choices, params, overrides),
        parent_run_id=read_parent_run_id(sweep_dir),
        tags=tags,
        direct=bool(tracking.get("direct", True)),
    )
    tracker.log_params(params)
    return tracker


def announce(tracker: RunTracker) -> str | None:
    """Log where to look at the run: the runs page of its experiment in the MLflow UI, and the command that
    serves it. Returns the URL (None when tracking is off)."""
    if not (tracker.enabled and tracker.experiment_id):
        return None
    url = runs_page_url(tracker.experiment_id, share_key=VIEW_KEY)
    log.info("MLflow run %s: %s  (serve it: mlflow ui --backend-store-uri %s)", tracker.run_id, url, tracker.uri)
    return url


def _metric_name(k: str) -> str:
    # MLflow metric names allow alphanumerics, _ - . / and spaces
    return "".join(ch if ch.isalnum() or ch in "_-./ " else "_" for ch in k)


def read_parent_run_id(sweep_dir: str | os.PathLike | None) -> str | None:
    if sweep_dir is None:
        return None
    p = Path(sweep_dir) / PARENT_FILE
    return p.read_text().strip() if p.exists() else None
