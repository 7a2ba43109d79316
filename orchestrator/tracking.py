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

Speed (a cached rerun of the default experiment spends most of its time on tracking otherwise): params,
metrics and tags are buffered and sent in one batch, artifacts copied once from one staging folder, five store
calls per job, through `mlflow.tracking.MlflowClient` (never the fluent API, whose `start_run` resolves source
and git context), each call retried while the database is locked (orchestrator.mlflow_store, which also creates
and migrates the store once). Importing MLflow alone (it pulls in pandas, FastAPI, SQLAlchemy and Alembic) takes
seconds; `tracking.direct=true` opts in to writing a run in an existing local SQLite store whose schema revision
is known (DIRECT_SCHEMAS) with the standard library's sqlite3, rows as MLflow's SqlAlchemyStore writes them
(`_DirectSqlite`; tests read them back through MlflowClient). It is off by default: it bypasses MLflow's own
API, its lock retries and the store preparation, so it is for single-process use of a known store.
MLflow's anonymous usage telemetry is turned off for everything the lab starts (`MLFLOW_DISABLE_TELEMETRY=true`,
set here before MLflow is imported, unless the user set it).

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
from urllib.parse import unquote, urlparse

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

log = logging.getLogger(__name__)

PARENT_FILE = "mlflow_parent_run.txt"
MAX_PARAM_LEN = 500
MAX_TAG_LEN = 5000

#: Config-group choices logged as params, in this order (others Hydra reports follow, sorted).
CHOICE_PARAMS = (
    "placer",
    "model",
    "cluster",
    "backend",
    "scheduler",
    "optimizer",
    "profiler",
    "runtime",
    "pipeline",
    "experiment",
)
#: Choices not logged as params (the tracking choice is where the run is logged, not what it computed).
_CHOICES_SKIP = frozenset({"tracking"})
#: Short params read from the resolved config: name -> dotted key.
CONFIG_PARAMS = {
    "seed": "seed",
    "memory_fraction": "cluster.memory_fraction",
    "need_fraction": "cluster.need_fraction",
}
#: Overridden keys that are not logged as params: where things are written, not what is computed.
_OVERRIDE_SKIP = ("hydra.", "tracking.", "cache.")

#: MLflow's limits on one log_batch request.
_BATCH_PARAMS, _BATCH_TAGS, _BATCH_TOTAL = 100, 100, 1000


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, Mapping):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(d, (list, tuple)) and d and any(isinstance(x, (Mapping, list, tuple)) for x in d):
        for i, v in enumerate(d):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = d
    return out


def _select(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _scalar(v: Any) -> str:
    if isinstance(v, (Mapping, list, tuple)):
        return json.dumps(v, separators=(",", ":"), default=str)[:MAX_PARAM_LEN]
    return "None" if v is None else str(v)[:MAX_PARAM_LEN]


def task_overrides() -> list[str]:
    """The job's command-line and sweep overrides (Hydra's `overrides.task`); [] outside a Hydra job."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    except Exception:  # no Hydra job: no overrides
        return []


def short_params(
    config: Mapping[str, Any], choices: Mapping[str, Any], overrides: Sequence[str] | None = None
) -> dict[str, str]:
    """The params a job's run logs (see the module docstring): choices, seed/memory_fraction/need_fraction,
    then each overridden key (without `+`/`++`/`~`) that is neither a choice nor one of those, with its resolved
    value. `config` is the resolved config (plain containers), `overrides` Hydra's task overrides."""
    out: dict[str, str] = {}
    for k in CHOICE_PARAMS + tuple(sorted(set(choices) - set(CHOICE_PARAMS))):
        v = choices.get(k)
        if v is not None and not k.startswith("hydra/") and k not in _CHOICES_SKIP:
            out[k] = _scalar(v)
    for name, key in CONFIG_PARAMS.items():
        v = _select(config, key)
        if v is not None:
            out[name] = _scalar(v)
    covered = set(CONFIG_PARAMS.values()) | set(out)
    for ov in overrides or ():
        key, sep, raw = ov.lstrip("+~").partition("=")
        key = key.strip()
        if not sep or key in covered or key.startswith(_OVERRIDE_SKIP) or "/" in key:
            continue
        v = _select(config, key)
        out[key] = _scalar(v if v is not None else raw)
        covered.add(key)
    return out


def overridden(overrides: Sequence[str] | None) -> list[str]:
    """The param names (as `short_params` logs them) of the keys that `overrides` set, config-group choices
    excepted: `cluster.need_fraction=0.3` -> `need_fraction`, `+optimizer.passes.4.bound=0.4` -> the key."""
    short = {v: k for k, v in CONFIG_PARAMS.items()}
    out = []
    for ov in overrides or ():
        key, sep, _ = ov.lstrip("+~").partition("=")
        key = key.strip()
        if sep and "/" not in key and not key.startswith(_OVERRIDE_SKIP):
            out.append(short.get(key, key))
    return out


def run_name(
    choices: Mapping[str, Any], params: Mapping[str, str] | None = None, overrides: Sequence[str] | None = None
) -> str:
    """`m_etf · gnmt · cpu4` (placer, or the pipeline of a pipeline-only run; model; cluster), then
    `tail=value` for each setting the overrides set beyond the choices (`need_fraction=0.3`, `bound=0.4`,
    `seed=1`): what tells the runs of a sweep apart at a glance."""
    pipeline = choices.get("pipeline")
    first = choices.get("placer") or (pipeline if pipeline not in (None, "none") else None) or "run"
    parts = [str(first), str(choices.get("model") or "-"), str(choices.get("cluster") or "-")]
    if choices.get("placer") and pipeline not in (None, "none"):
        parts.append(str(pipeline))
    params = params or {}
    for k in overridden(overrides):
        if k in params and k not in choices:
            parts.append(f"{k.rsplit('.', 1)[-1]}={params[k]}")
    return " · ".join(parts)


def _client(uri: str) -> Any:
    """An MlflowClient for `uri` whose calls are retried while the database is locked."""
    from .mlflow_store import retrying_client

    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return retrying_client(uri)


def _experiment_id(client: Any, uri: str, experiment: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        if VIEW_TAG_PREFIX + VIEW_KEY not in (exp.tags or {}):  # made by prepare_store or another tool
            set_runs_view(client, exp.experiment_id)
        return exp.experiment_id
    try:
        exp_id = client.create_experiment(experiment)
        set_runs_view(client, exp_id)
        return exp_id
    except Exception:  # another process created it first
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise
        return exp.experiment_id


def runs_page_url(experiment_id: str, host: str = "http://127.0.0.1:5000", share_key: str | None = None) -> str:
    """The MLflow UI page that lists an experiment's runs (MLflow 3 opens an experiment on its GenAI overview;
    the runs live at `#/experiments/<id>/runs`), with the lab's saved column view when `share_key` is given."""
    url = f"{host}/#/experiments/{experiment_id}/runs"
    return f"{url}?viewStateShareKey={share_key}" if share_key else url


#: The experiment tag prefix under which the MLflow UI keeps a shared view of the runs table.
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_KEY = "placement-lab"
#: Columns the lab's view shows in the runs table, beside the run name.
VIEW_COLUMNS = (
    "params.`placer`",
    "params.`model`",
    "params.`cluster`",
    "params.`need_fraction`",
    "tags.`status`",
    "metrics.`predicted_step_s`",
    "metrics.`measured_step_s`",
    "metrics.`peak_memory_bytes.max`",
    "metrics.`memory_limit_bytes`",
    "metrics.`placement_time_s`",
)


def set_runs_view(client: Any, experiment_id: str, expanded: Iterable[str] = ()) -> str:
    """Save the lab's view of the runs table as the experiment's shared view (an experiment tag the MLflow UI
    reads for `?viewStateShareKey=`): the columns of VIEW_COLUMNS, newest first, with the parent runs in
    `expanded` unfolded so that a sweep's jobs show. Returns the share key."""
    state = {
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "searchFilter": "",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": ["attributes.`Run Name`", *VIEW_COLUMNS],
        "runsExpanded": {r: True for r in expanded},
        "runsPinned": [],
        "runsHidden": [],
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "groupBy": None,
        "groupsExpanded": {},
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
    }
    client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + VIEW_KEY, json.dumps(state))
    return VIEW_KEY


#: MLflow SQL schema revisions (the store's `alembic_version`) whose runs, tags, params, metrics and
#: latest_metrics tables `_DirectSqlite` writes as MLflow's SqlAlchemyStore does (checked by
#: tests/test_mlflow_ui.py, which reads its runs back through MlflowClient and fails on a new revision).
DIRECT_SCHEMAS = frozenset({"dc11669786a5"})


class _NoDirect(Exception):
    """The direct SQLite writer does not apply (not a local SQLite store, unknown schema, no experiment yet)."""


class _ClientStore:
    """A run through MlflowClient (any tracking URI)."""

    def __init__(self, uri: str, experiment: str):
        self.client = _client(uri)
        self.experiment_id = _experiment_id(self.client, uri, experiment)
        self.run_id = ""

    def create_run(self, run_name: str | None, tags: Mapping[str, str]) -> str:
        self.run_id = self.client.create_run(self.experiment_id, run_name=run_name, tags=dict(tags)).info.run_id
        return self.run_id

    def log_batch(self, params: dict[str, str], metrics: dict[str, float], tags: dict[str, str]) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        ps = [Param(k, v) for k, v in params.items()]
        ms = [Metric(k, v, now, 0) for k, v in metrics.items()]
        ts = [RunTag(k, v) for k, v in tags.items()]
        while ps or ms or ts:
            p, ps = ps[:_BATCH_PARAMS], ps[_BATCH_PARAMS:]
            t, ts = ts[:_BATCH_TAGS], ts[_BATCH_TAGS:]
            room = _BATCH_TOTAL - len(p) - len(t)
            m, ms = ms[:room], ms[room:]
            self.client.log_batch(self.run_id, metrics=m, params=p, tags=t)

    def log_artifacts(self, folder: str) -> None:
        self.client.log_artifacts(self.run_id, folder)

    def set_terminated(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


class _DirectSqlite:
    """A run written straight into a local SQLite MLflow store with the standard library's sqlite3, as
    MLflow's SqlAlchemyStore writes it (create_run, log_batch, set_terminated) and its local artifact
    repository copies files. Importing MLflow (pandas, FastAPI, SQLAlchemy, Alembic) costs seconds; this costs
    milliseconds. Used only when the store exists, its schema revision is in DIRECT_SCHEMAS and the experiment
    exists with a local artifact location; otherwise `_ClientStore` does the work (raise `_NoDirect`)."""

    def __init__(self, uri: str, experiment: str):
        import sqlite3

        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else None
        if not path or not os.path.isfile(path):
            raise _NoDirect("not an existing local SQLite store")
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
        try:
            rev = {r[0] for r in self.db.execute("SELECT version_num FROM alembic_version")}
            if not rev or not rev <= DIRECT_SCHEMAS:
                raise _NoDirect(f"schema revision {sorted(rev)} not in DIRECT_SCHEMAS")
            row = self.db.execute(
                "SELECT experiment_id, artifact_location, lifecycle_stage FROM experiments "
                "WHERE name = ? AND workspace = 'default'",
                (experiment,),
            ).fetchone()
        except sqlite3.Error as exc:
            self.db.close()
            raise _NoDirect(f"cannot read the store: {exc}") from exc
        except _NoDirect:
            self.db.close()
            raise
        location = str(row[1] or "") if row else ""
        if location.startswith("file://"):
            location = unquote(urlparse(location).path)
        if row is None or row[2] != "active" or not location.startswith("/"):
            self.db.close()
            raise _NoDirect("no active experiment with a local artifact location")
        self.experiment_id = str(row[0])
        self.location = location
        self.run_id = ""

    def _tx(self, statements: list[tuple[str, Iterable[Sequence[Any]]]]) -> None:
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for sql, rows in statements:
                cur.executemany(sql, rows)
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise

    def create_run(self, run_name: str | None, tags: Mapping[str, str]) -> str:
        import uuid

        run_id = uuid.uuid4().hex
        name = run_name or run_id[:8]
        tags = {**tags, "mlflow.runName": name}
        self.artifact_uri = f"{self.location.rstrip('/')}/{run_id}/artifacts"
        run = (
            run_id,
            name,
            "UNKNOWN",
            "",
            "",
            tags.get("mlflow.user", ""),
            "RUNNING",
            int(time.time() * 1000),
            None,
            "",
            "active",
            self.artifact_uri,
            int(self.experiment_id),
            None,
        )
        self._tx(
            [
                (
                    "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
                    "start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id, "
                    "deleted_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [run],
                ),
                ("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", [(k, v, run_id) for k, v in tags.items()]),
            ]
        )
        self.run_id = run_id
        return run_id

    def log_batch(self, params: dict[str, str], metrics: dict[str, float], tags: dict[str, str]) -> None:
        now = int(time.time() * 1000)
        r = self.run_id
        self._tx(
            [
                ("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)", [(k, v, r) for k, v in params.items()]),
                (
                    "INSERT OR REPLACE INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                    [(k, v, r) for k, v in tags.items()],
                ),
                (
                    "INSERT OR IGNORE INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                    "VALUES (?, ?, ?, ?, 0, 0)",
                    [(k, v, now, r) for k, v in metrics.items()],
                ),
                (
                    "INSERT OR REPLACE INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                    "VALUES (?, ?, ?, 0, 0, ?)",
                    [(k, v, now, r) for k, v in metrics.items()],
                ),
            ]
        )

    def log_artifacts(self, folder: str) -> None:
        shutil.copytree(folder, self.artifact_uri, dirs_exist_ok=True)

    def set_terminated(self, status: str) -> None:
        self._tx(
            [
                (
                    "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?",
                    [(status, int(time.time() * 1000), self.run_id)],
                )
            ]
        )
        self.db.close()


class RunTracker:
    """Wraps one MLflow run for a job; every method is a no-op when tracking is disabled.

    The run is created at once (its id goes into result.json); params, metrics, tags and artifacts are buffered
    and sent by `end` in one batch. With `direct` (opt-in) a local SQLite store whose schema is known is
    written without importing MLflow (`_DirectSqlite`); else through MlflowClient. `elapsed_s` is the time
    spent on tracking (imports included), `writer` which path wrote the run ("sqlite3" or "mlflow")."""

    def __init__(
        self,
        uri: str,
        experiment: str,
        enabled: bool = True,
        run_name: str | None = None,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
        direct: bool = False,
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
        direct=bool(tracking.get("direct", False)),
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
