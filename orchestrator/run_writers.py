"""Where a job's run is written: `_ClientStore` through MlflowClient (any tracking URI, calls retried while the
database is locked), or the opt-in `_DirectSqlite` (`tracking.direct=true`) that writes a local SQLite store whose
schema revision is in DIRECT_SCHEMAS with the standard library's sqlite3, as MLflow's SqlAlchemyStore does.
Both offer create_run, log_batch, log_artifacts and set_terminated (orchestrator.tracking.RunTracker drives them).

MLflow's anonymous usage telemetry is turned off for everything the lab starts (`MLFLOW_DISABLE_TELEMETRY=true`,
set here before MLflow is imported, unless the user set it).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .runs_view import VIEW_KEY, VIEW_TAG_PREFIX, set_runs_view

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

#: MLflow's limits on one log_batch request.
_BATCH_PARAMS, _BATCH_TAGS, _BATCH_TOTAL = 100, 100, 1000


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
