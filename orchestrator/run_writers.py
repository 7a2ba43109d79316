"""Where a job's run is written: `_DirectSqlite` (the default, `tracking.direct=true`) writes a local SQLite store
whose schema revision is in DIRECT_SCHEMAS with the standard library's sqlite3, the rows MLflow's SqlAlchemyStore
writes; `_ClientStore` goes through MlflowClient (any tracking URI, calls retried while the database is locked) and
does the work wherever the direct writer does not apply (no store yet, another schema revision, a new experiment,
a remote URI, `tracking.direct=false`). Both offer create_run, log_batch, log_artifacts and set_terminated
(orchestrator.tracking.RunTracker drives them).

MLflow's anonymous usage telemetry is turned off for everything the lab starts (`MLFLOW_DISABLE_TELEMETRY=true`,
set here before MLflow is imported, unless the user set it).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .runs_view import VIEW_KEY, VIEW_TAG_PREFIX, set_runs_view

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

log = logging.getLogger(__name__)
#: (database file, experiment id) pairs this process has checked for runs of dead processes.
_SWEPT: set[tuple[str, str]] = set()

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
    """A run written straight into a local SQLite MLflow store with the standard library's sqlite3, as MLflow's
    SqlAlchemyStore writes it (create_run, log_batch, set_terminated) and its local artifact repository copies
    files. Importing MLflow (pandas, FastAPI, SQLAlchemy, Alembic) and opening its store costs seconds of CPU;
    this costs milliseconds.

    Used only when the store exists, its schema revision is in DIRECT_SCHEMAS and the experiment exists, is
    active, has a local artifact location and carries the lab's runs view (so the store was prepared by
    `mlflow_store.prepare_store` or MLflow itself); otherwise it raises `_NoDirect` and `_ClientStore` does the
    work. What MLflow's path guarantees holds here too:

    * many processes at once: every write is one `BEGIN IMMEDIATE` transaction, and sqlite3's busy handler waits
      for a locked database up to `mlflow_store.retry_deadline_s()` (the deadline of the client path's retries);
    * no run stays RUNNING for ever: once per process and store, runs of this experiment left RUNNING by a dead
      process of this host are marked FAILED with an `error` tag (`mark_dead_runs_failed`, as
      `mlflow_store.mark_dead_runs_failed` does through MlflowClient).

    tests/test_mlflow_ui.py writes the same run through both writers and compares what MlflowClient reads."""

    def __init__(self, uri: str, experiment: str):
        import sqlite3

        from .mlflow_store import retry_deadline_s, sqlite_path

        path = sqlite_path(uri)
        if path is None or "?" in uri or not path.is_file():
            raise _NoDirect("not an existing local SQLite store")
        self.db = sqlite3.connect(path, timeout=retry_deadline_s(), isolation_level=None)
        try:
            rev = {r[0] for r in self.db.execute("SELECT version_num FROM alembic_version")}
            if not rev or not rev <= DIRECT_SCHEMAS:
                raise _NoDirect(f"schema revision {sorted(rev)} not in DIRECT_SCHEMAS")
            row = self.db.execute(
                "SELECT experiment_id, artifact_location, lifecycle_stage FROM experiments "
                "WHERE name = ? AND workspace = 'default'",
                (experiment,),
            ).fetchone()
            view = (
                row is not None
                and self.db.execute(
                    "SELECT 1 FROM experiment_tags WHERE experiment_id = ? AND key = ?",
                    (row[0], VIEW_TAG_PREFIX + VIEW_KEY),
                ).fetchone()
            )
        except sqlite3.Error as exc:
            self.db.close()
            raise _NoDirect(f"cannot read the store: {exc}") from exc
        except _NoDirect:
            self.db.close()
            raise
        location = str(row[1] or "") if row else ""
        if location.startswith("file://"):
            location = unquote(urlparse(location).path)
        if row is None or row[2] != "active" or not location.startswith("/") or not view:
            self.db.close()
            raise _NoDirect("no active experiment with a local artifact location and the lab's runs view")
        self.experiment_id = str(row[0])
        self.location = location
        self.run_id = ""
        key = (str(path.resolve()), self.experiment_id)
        if key not in _SWEPT:
            _SWEPT.add(key)
            try:
                self.mark_dead_runs_failed()
            except Exception as exc:  # never fail a job for the housekeeping of others
                log.warning("could not check %s for runs of dead processes: %s", uri, exc)

    def mark_dead_runs_failed(self) -> list[str]:
        """Set runs of this experiment that are RUNNING but whose process (on this host) is gone to FAILED, with
        `error` and `status` tags, as `mlflow_store.mark_dead_runs_failed` does; return their ids. One query,
        then O(number of RUNNING runs of this host)."""
        from .mlflow_store import TAG_HOST, TAG_PID, TAG_START, process_alive

        host = socket.gethostname()
        rows = self.db.execute(
            "SELECT r.run_uuid, p.value, s.value FROM runs r "
            "JOIN tags h ON h.run_uuid = r.run_uuid AND h.key = ? AND h.value = ? "
            "JOIN tags p ON p.run_uuid = r.run_uuid AND p.key = ? "
            "LEFT JOIN tags s ON s.run_uuid = r.run_uuid AND s.key = ? "
            "WHERE r.experiment_id = ? AND r.status = 'RUNNING'",
            (TAG_HOST, host, TAG_PID, TAG_START, int(self.experiment_id)),
        ).fetchall()
        dead = [(r, int(pid)) for r, pid, start in rows if pid.isdigit() and not process_alive(int(pid), start)]
        if not dead:
            return []
        now = int(time.time() * 1000)
        tags = []
        for r, pid in dead:
            tags.append(("error", f"process {pid} on {host} ended without closing this run (killed or crashed)", r))
            tags.append(("status", "error", r))
        self._tx(
            [
                ("INSERT OR REPLACE INTO tags (key, value, run_uuid) VALUES (?, ?, ?)", tags),
                (
                    "UPDATE runs SET status = 'FAILED', end_time = ? WHERE run_uuid = ? AND status = 'RUNNING'",
                    [(now, r) for r, _ in dead],
                ),
            ]
        )
        log.warning("marked %d run(s) of dead processes FAILED: %s", len(dead), ", ".join(r for r, _ in dead))
        return [r for r, _ in dead]

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
