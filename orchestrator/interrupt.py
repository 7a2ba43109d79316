"""Closing a job honestly when it is stopped, and when it fails outside the job's own error handling.

`install()` makes SIGINT (Ctrl-C) and SIGTERM raise `Interrupted` (a `KeyboardInterrupt`, so the job's
`except Exception` handlers let it through while its `finally` blocks still run). `guard(out, ...)` wraps the
job (see `orchestrator.__main__`):

* on `Interrupted`: `result.json` in the job folder says ``status: "error"`` and ``error: "interrupted by
  SIGTERM ..."`` (the job's own partial result is kept where it wrote one), the MLflow run ends KILLED with an
  `error` tag, and the process exits 130 (SIGINT) or 143 (SIGTERM), the shell's 128 + signal number;
* on any other exception that escaped the job (e.g. a tracking store that cannot be opened, raised before the
  job's own handler): `result.json` is written with status "error" and the message, and the exception goes on.

A second signal while the job closes is logged and ignored (closing is short); a third exits at once.
A SIGKILL cannot be handled: the next process that opens the store marks the dead run FAILED
(`orchestrator.mlflow_store.mark_dead_runs_failed`).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from algorithms.graph import atomic_write_json

log = logging.getLogger("orchestrator")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []


class Interrupted(KeyboardInterrupt):
    """The process received SIGINT or SIGTERM."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _handler(signum: int, frame: Any) -> None:
    _received.append(signum)
    name = signal.Signals(signum).name
    if len(_received) == 1:
        raise Interrupted(signum)
    if len(_received) >= 3:
        os._exit(128 + signum)
    log.warning("%s received again: still closing the run (a third signal exits at once)", name)


def install() -> bool:
    """Route SIGINT and SIGTERM to `Interrupted`; False where that is impossible (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    _received.clear()
    for s in _SIGNALS:
        signal.signal(s, _handler)
    return True


def _fresh_result(path: Path, since: float) -> dict[str, Any] | None:
    """The job's own result.json when it wrote one after `since`, else None."""
    try:
        if path.stat().st_mtime >= since:
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        pass
    return None


def write_error_result(out: Path, skeleton: Mapping[str, Any], error: str, since: float) -> dict[str, Any]:
    """Set status "error" and `error` in `out/result.json`, keeping what the job wrote after `since`; fields of
    `skeleton` fill a result the job had not written yet."""
    path = out / "result.json"
    result = _fresh_result(path, since) or {**skeleton, "mlflow_run_id": None}
    result["status"] = "error"
    result["error"] = error
    try:
        atomic_write_json(path, result, indent=1)
    except Exception as exc:  # the job folder itself may be the problem: say so, keep the original error
        log.error("could not write %s: %s", path, exc)
    return result


def _kill_mlflow_run(run_id: str | None, uri: str | None, error: str) -> None:
    """End the job's MLflow run with status KILLED (the active run of this process, else `run_id`)."""
    try:
        import sys

        if "mlflow" not in sys.modules:  # tracking never started in this process
            return
        import mlflow

        from .mlflow_store import retrying_client

        active = mlflow.active_run()
        if active is not None:
            run_id = active.info.run_id
            mlflow.set_tags({"status": "error", "error": error})
            mlflow.end_run(status="KILLED")
            return
        if run_id and uri:
            client = retrying_client(uri)
            client.set_tag(run_id, "status", "error")
            client.set_tag(run_id, "error", error)
            client.set_terminated(run_id, status="KILLED")
    except Exception as exc:
        log.error("could not mark MLflow run %s KILLED: %s", run_id, exc)


@contextmanager
def guard(
    out: Path,
    skeleton: Mapping[str, Any],
    tracking_uri: str | None,
    reported: tuple[type[BaseException], ...] = (),
) -> Iterator[None]:
    """Run the body as a job writing into `out`; see the module docstring for what happens when it stops.
    Exceptions of the `reported` types already have their result.json and pass through untouched."""
    since = time.time() - 1.0  # mtime granularity
    try:
        yield
    except Interrupted as exc:
        msg = f"interrupted by {signal.Signals(exc.signum).name} (exit {exc.exit_code})"
        log.error("job %s: %s", out, msg)
        result = write_error_result(out, skeleton, msg, since)
        _kill_mlflow_run(result.get("mlflow_run_id"), tracking_uri, msg)
        raise SystemExit(exc.exit_code) from None
    except reported:
        raise
    except Exception as exc:
        write_error_result(out, skeleton, f"{type(exc).__name__}: {exc}", since)
        raise
