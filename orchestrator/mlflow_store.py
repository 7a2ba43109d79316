"""The MLflow tracking store used safely by many processes at once.

Three guarantees the jobs of a sweep rely on:

* **One creation and migration.** `prepare_store` creates the SQLite file's folder, the schema (MLflow runs
  its Alembic migrations on first use) and the experiment under a file lock next to the database, once per
  process and store. Without it, parallel first use of a fresh store races on the migrations: most jobs fail,
  and an interrupted migration can leave a store that breaks every later run. Under the same lock, a broken
  store that holds no run yet (a first migration killed mid-way) is moved aside (`mlflow.db.broken-<time>`)
  and created anew; one with runs and `_alembic_tmp_*` tables left by a migration has those dropped and the
  migrations run again; any other broken store is reported (`TrackingError`), never deleted.
* **Writes survive a locked database.** SQLite allows one writer; a busy store answers "database is locked".
  `retry` repeats an MLflow call with exponential backoff and jitter until a deadline
  (`LAB_MLFLOW_RETRY_S`, 120 s by default); `retrying_mlflow` is the `mlflow` module with every function so
  wrapped. A failed write rolls its transaction back, so repeating it does not duplicate a run.
* **No run stays RUNNING for ever.** Every run carries its process' host, pid and start time (`owner_tags`).
  `prepare_store` (the first use of a store in a process: every job, and a sweep's launcher) marks runs left
  RUNNING by a process of this host that no longer exists (killed by SIGKILL, out of memory, power loss) as
  FAILED with an `error` tag saying so. Runs of other hosts are left alone: their liveness is unknown here.

Errors that are not about the store being busy (a bad URI, a folder that cannot be written) become a
`TrackingError` naming the URI.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock

from algorithms.errors import TrackingError

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Messages of the transient errors a busy SQLite store gives (through SQLAlchemy and MLflow wrappers).
_TRANSIENT = ("database is locked", "database table is locked", "database schema is locked", "database is busy")
_PREPARED: dict[tuple[str, str], str] = {}
TAG_HOST, TAG_PID, TAG_START = "lab.host", "lab.pid", "lab.pid_start"


def retry_deadline_s() -> float:
    return float(os.environ.get("LAB_MLFLOW_RETRY_S", "120"))


def is_transient(exc: BaseException) -> bool:
    """True when `exc` (or an exception it was raised from) says the database is locked or busy."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if any(m in str(e).lower() for m in _TRANSIENT):
            return True
        e = e.__cause__ or e.__context__
    return False


def retry(fn: Callable[..., T], *args: Any, what: str | None = None, **kwargs: Any) -> T:
    """Call `fn(*args, **kwargs)`, repeating it while it fails with a locked database: waits 0.05 s, doubling
    up to 2 s, each with +-50% jitter, until `retry_deadline_s()` has passed (then the last error is raised)."""
    deadline = time.monotonic() + retry_deadline_s()
    delay = 0.05
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() >= deadline:
                raise
            wait = delay * random.uniform(0.5, 1.5)
            log.warning(
                "MLflow %s: database is locked (attempt %d); retrying in %.2fs",
                what or getattr(fn, "__name__", "call"),
                attempt,
                wait,
            )
            time.sleep(wait)
            delay = min(2.0, delay * 2)


class _Retrying:
    """A proxy of a module or client whose callables are wrapped with `retry`."""

    def __init__(self, target: Any):
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr) or isinstance(attr, type):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return retry(attr, *args, what=name, **kwargs)

        return call


def _mlflow_module() -> Any:
    import mlflow

    return mlflow


class _LazyMlflow(_Retrying):
    def __init__(self) -> None:  # the import of mlflow is deferred to the first use
        super().__init__(None)

    def __getattr__(self, name: str) -> Any:
        if self._target is None:
            self._target = _mlflow_module()
        return super().__getattr__(name)


#: The `mlflow` module with every function retried on a locked database.
retrying_mlflow: Any = _LazyMlflow()


def retrying_client(uri: str) -> Any:
    """An `MlflowClient` for `uri` whose every method is retried on a locked database."""
    from mlflow.tracking import MlflowClient

    return _Retrying(MlflowClient(tracking_uri=uri))


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI (None for other stores and in-memory SQLite)."""
    if not uri.startswith("sqlite:///"):
        return None
    p = uri[len("sqlite:///") :].split("?", 1)[0]
    return Path(p) if p and p != ":memory:" else None


def _store_lock(uri: str) -> AbstractContextManager[Any]:
    path = sqlite_path(uri)
    if path is None:
        return nullcontext()
    return FileLock(str(path) + ".lock", timeout=600)


def _leftover_alembic_tables(uri: str) -> list[str]:
    import sqlalchemy

    engine = sqlalchemy.create_engine(uri)
    try:
        return [t for t in sqlalchemy.inspect(engine).get_table_names() if t.startswith("_alembic_tmp_")]
    finally:
        engine.dispose()


def _repair(uri: str) -> None:
    """Drop the `_alembic_tmp_*` tables an interrupted migration left, then run the migrations again."""
    import sqlalchemy
    from mlflow.store.db.utils import _upgrade_db

    engine = sqlalchemy.create_engine(uri)
    try:
        with engine.begin() as conn:
            for t in sqlalchemy.inspect(engine).get_table_names():
                if t.startswith("_alembic_tmp_"):
                    log.warning("MLflow store %s: dropping %s left by an interrupted migration", uri, t)
                    conn.execute(sqlalchemy.text(f'DROP TABLE "{t}"'))
        _upgrade_db(engine)
    finally:
        engine.dispose()


def _open_experiment(uri: str, experiment: str) -> str:
    """The experiment's id; a new experiment gets the lab's runs view (which the direct writer checks for)."""
    from .runs_view import VIEW_KEY, VIEW_TAG_PREFIX, set_runs_view

    client = retrying_client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        if VIEW_TAG_PREFIX + VIEW_KEY not in (exp.tags or {}):
            set_runs_view(client, exp.experiment_id)
        return str(exp.experiment_id)
    exp_id = str(client.create_experiment(experiment))
    set_runs_view(client, exp_id)
    return exp_id


def prepare_store(uri: str, experiment: str) -> str:
    """Create (or migrate, or repair) the store at `uri` and the experiment, once per process, under a file
    lock next to a SQLite database; mark runs left RUNNING by dead processes FAILED; return the experiment id.
    Raises `TrackingError` naming the URI when the store cannot be opened."""
    key = (uri, experiment)
    if key in _PREPARED:
        return _PREPARED[key]
    path = sqlite_path(uri)
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        with _store_lock(uri):
            try:
                exp_id = _open_experiment(uri, experiment)
            except Exception as exc:
                if path is None or not path.exists() or is_transient(exc):
                    raise
                if not _has_runs(path):  # a store whose first migration was killed: nothing to lose
                    aside = path.with_name(f"{path.name}.broken-{int(time.time())}")
                    log.warning(
                        "MLflow store %s is broken and holds no runs (%s); moved to %s, starting anew", uri, exc, aside
                    )
                    _forget_engine(uri)
                    os.replace(path, aside)
                elif _leftover_alembic_tables(uri):
                    log.warning("MLflow store %s is half-migrated (%s); repairing it", uri, exc)
                    _forget_engine(uri)
                    _repair(uri)
                else:
                    raise
                _forget_engine(uri)
                exp_id = _open_experiment(uri, experiment)
    except TrackingError:
        raise
    except Exception as exc:
        raise TrackingError(f"tracking.uri={uri!r}: cannot open the MLflow store: {type(exc).__name__}: {exc}") from exc
    import mlflow

    mlflow.set_tracking_uri(uri)
    _PREPARED[key] = exp_id
    try:
        mark_dead_runs_failed(uri, exp_id)
    except Exception as exc:  # never fail a job for the housekeeping of others
        log.warning("could not check %s for runs of dead processes: %s", uri, exc)
    return exp_id


def _has_runs(path: Path) -> bool:
    """Whether the SQLite file holds any run (True where that cannot be read: then nothing is touched)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            tables = {t for (t,) in conn.execute("select name from sqlite_master where type = 'table'")}
            if "runs" not in tables:
                return False
            return conn.execute("select count(*) from runs").fetchone()[0] > 0
    except sqlite3.Error:
        return True


def _forget_engine(uri: str) -> None:
    """Drop the SQLAlchemy engine MLflow cached for `uri` (its pooled connections may hold the old file)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        engine = SqlAlchemyStore._engine_map.pop(uri, None)
        if engine is not None:
            engine.dispose()
    except Exception:  # a private attribute of MLflow: without it a new engine is simply not forced
        pass


# --------------------------------------------------------------------------- runs of dead processes
def _proc_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (Linux /proc), None where unknown."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return data[data.rindex(")") + 2 :].split()[19]


def _proc_state(pid: int) -> str | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return data[data.rindex(")") + 2 :].split()[0]


def owner_tags() -> dict[str, str]:
    """Tags that let a later process tell whether this run's process still exists."""
    pid = os.getpid()
    tags = {TAG_HOST: socket.gethostname(), TAG_PID: str(pid)}
    start = _proc_start(pid)
    if start is not None:
        tags[TAG_START] = start
    return tags


def process_alive(pid: int, start: str | None = None) -> bool:
    """Whether process `pid` of this host exists (and, when `start` is given and /proc says, is the same
    process, not a later one that reused the pid). A zombie counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _proc_state(pid) == "Z":
        return False
    now = _proc_start(pid)
    return not (start is not None and now is not None and now != start)


def mark_dead_runs_failed(uri: str, experiment_id: str) -> list[str]:
    """Set runs of `experiment_id` that are RUNNING but whose process (on this host) is gone to FAILED, with
    an `error` tag; return their ids. O(number of RUNNING runs)."""
    client = retrying_client(uri)
    host = socket.gethostname()
    runs = client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=5000)
    dead = []
    for r in runs:
        tags = r.data.tags
        if tags.get(TAG_HOST) != host or not str(tags.get(TAG_PID, "")).isdigit():
            continue
        pid = int(tags[TAG_PID])
        if process_alive(pid, tags.get(TAG_START)):
            continue
        client.set_tag(
            r.info.run_id, "error", f"process {pid} on {host} ended without closing this run (killed or crashed)"
        )
        client.set_tag(r.info.run_id, "status", "error")
        client.set_terminated(r.info.run_id, status="FAILED")
        dead.append(r.info.run_id)
    if dead:
        log.warning("marked %d run(s) of dead processes FAILED: %s", len(dead), ", ".join(dead))
    return dead
