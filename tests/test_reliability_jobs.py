"""Jobs stopped or failing at awkward points close honestly (issue 19): signals, SIGKILL, a tracking store
that cannot be opened, an unforeseen plugin error inside a sweep."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.mlflow_store import is_transient, process_alive, retry

SMALL = ["model.generator.levels=4", "placer=single"]
SLEEP = "placer._target_=tests.reliability_plugins.SleepPlacer"


def _run_statuses(db: Path) -> list[str]:
    with sqlite3.connect(db) as c:
        return sorted(s for (s,) in c.execute("select status from runs"))


def _start(lab, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=lab.cwd,
        env=lab.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    t0 = time.monotonic()
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else ""
        assert time.monotonic() - t0 < timeout, f"{path} never appeared"
        time.sleep(0.2)


# --------------------------------------------------------------------------- unit: retry and liveness
def test_retry_repeats_locked_errors_only(monkeypatch):
    import sqlalchemy.exc

    monkeypatch.setenv("LAB_MLFLOW_RETRY_S", "30")
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database is locked"))
        return "done"

    assert retry(flaky) == "done" and len(calls) == 3

    def broken():
        calls.append(1)
        raise ValueError("no such table: runs")

    calls.clear()
    with pytest.raises(ValueError):
        retry(broken)
    assert len(calls) == 1
    # the locked error wrapped by MLflow (raised "from" the SQLAlchemy one) is recognised too
    try:
        try:
            raise sqlite3.OperationalError("database is locked")
        except sqlite3.OperationalError as e:
            raise RuntimeError("MLflow: SQLAlchemy database error") from e
    except RuntimeError as wrapped:
        assert is_transient(wrapped)


def test_retry_gives_up_at_the_deadline(monkeypatch):
    monkeypatch.setenv("LAB_MLFLOW_RETRY_S", "0.3")

    def always():
        raise sqlite3.OperationalError("database is locked")

    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError):
        retry(always)
    assert time.monotonic() - t0 < 5


def test_process_alive_tells_dead_and_reused_pids():
    assert process_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not process_alive(p.pid)
    assert not process_alive(os.getpid(), start="1")  # same pid, another start time: a reused pid


def test_runs_of_dead_processes_are_marked_failed(tmp_path):
    from mlflow.tracking import MlflowClient

    from orchestrator import mlflow_store
    from orchestrator.mlflow_store import TAG_HOST, TAG_PID, mark_dead_runs_failed, owner_tags, prepare_store

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    exp = prepare_store(uri, "lab")
    client = MlflowClient(tracking_uri=uri)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    mine = client.create_run(exp, tags=owner_tags()).info.run_id
    gone = client.create_run(exp, tags={**owner_tags(), TAG_PID: str(dead.pid)}).info.run_id
    other_host = client.create_run(exp, tags={TAG_HOST: "elsewhere", TAG_PID: str(dead.pid)}).info.run_id
    untagged = client.create_run(exp).info.run_id
    assert mark_dead_runs_failed(uri, exp) == [gone]
    status = {r: client.get_run(r).info.status for r in (mine, gone, other_host, untagged)}
    assert status == {mine: "RUNNING", gone: "FAILED", other_host: "RUNNING", untagged: "RUNNING"}
    assert "ended without closing" in client.get_run(gone).data.tags["error"]
    mlflow_store._PREPARED.clear()


# --------------------------------------------------------------------------- whole jobs
@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_job_ends_killed_with_an_interrupted_result(lab, sig, code):
    marker = lab.cwd / "placing"
    out = lab.cwd / "out"
    p = _start(lab, *SMALL, SLEEP, f"+placer.marker={marker}", f"hydra.run.dir={out}")
    _wait_for(marker, p)
    p.send_signal(sig)
    assert p.wait(timeout=300) == code
    r = json.loads((out / "result.json").read_text())
    assert r["status"] == "error" and "interrupted" in r["error"] and signal.Signals(sig).name in r["error"]
    assert r["n_ops"] and r["mlflow_run_id"]  # the job's own partial result is kept
    assert _run_statuses(lab.db) == ["KILLED"]


@pytest.mark.slow
def test_after_sigkill_the_next_run_marks_the_dead_run_failed(lab):
    marker = lab.cwd / "placing"
    p = _start(lab, *SMALL, SLEEP, f"+placer.marker={marker}")
    _wait_for(marker, p)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert _run_statuses(lab.db) == ["RUNNING"]
    lab.run(*SMALL)
    assert _run_statuses(lab.db) == ["FAILED", "FINISHED"]


@pytest.mark.slow
def test_a_tracking_store_that_cannot_open_still_writes_result_json(lab):
    lab.env["MLFLOW_TRACKING_URI"] = "sqlite:////proc/no-such-folder/mlflow.db"
    out = lab.cwd / "out"
    p = lab.run(*SMALL, f"hydra.run.dir={out}", check=False)
    assert p.returncode == 1
    r = json.loads((out / "result.json").read_text())
    assert r["status"] == "error" and "TrackingError" in r["error"] and "/proc/no-such-folder" in r["error"]
    assert r["placer"] == "single"
    assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_an_unforeseen_plugin_error_does_not_stop_a_basic_sweep(lab):
    p = lab.run(
        "-m",
        "model.generator.levels=4",
        "placer=single",
        "placer._target_=tests.reliability_plugins.FailPlacer,algorithms.placers.baseline.SinglePlacer",
        check=False,
    )
    assert p.returncode == 1
    (sweep,) = list((lab.cwd / "multirun").rglob("sweep_summary.json"))
    summary = json.loads(sweep.read_text())
    assert summary["failed"] == ["0"] and [j["status"] for j in summary["jobs"]] == ["error", "ok"]
    assert "plugin exploded" in summary["jobs"][0]["error"]
