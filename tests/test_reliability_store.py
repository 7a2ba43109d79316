"""Parallel use of a fresh MLflow store loses no runs (issue 19).

Without `orchestrator.mlflow_store.prepare_store`, processes opening a new SQLite store at once race on
MLflow's schema migrations: in a trial here 10 of 12 runs were lost (duplicate column, alembic_version
mismatch errors). The repeat counts are read from the environment so a long soak can be run on purpose:
LAB_FRESH_STORE_REPEATS (Hydra joblib sweeps, default 20) and LAB_FRESH_PROCESS_REPEATS (default 5).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3
import time
from pathlib import Path

import pytest

from .conftest import Lab


def _job(uri: str, barrier, q) -> None:
    from orchestrator.tracking import RunTracker

    barrier.wait()
    try:
        t = RunTracker(uri, "lab")
        t.log_params({f"p{i}": i for i in range(40)})
        t.log_metrics({"m": 1.0})
        t.end(True)
        q.put("ok")
    except Exception as exc:
        q.put(f"{type(exc).__name__}: {exc}"[:300])


def _finished(db: Path) -> int:
    with sqlite3.connect(db) as c:
        return c.execute("select count(*) from runs where status = 'FINISHED'").fetchone()[0]


@pytest.mark.slow
def test_processes_opening_a_fresh_store_at_once_lose_no_runs(tmp_path):
    """Four processes released by one barrier each open a brand-new store (no launcher prepared it)."""
    repeats = int(os.environ.get("LAB_FRESH_PROCESS_REPEATS", "5"))
    ctx = mp.get_context("spawn")
    for k in range(repeats):
        db = tmp_path / f"r{k}" / "mlflow.db"
        barrier, q = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_job, args=(f"sqlite:///{db}", barrier, q)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        outcomes = [q.get(timeout=10) for _ in procs]
        assert outcomes == ["ok"] * 4, (k, outcomes)
        assert _finished(db) == 4, k


@pytest.mark.slow
def test_joblib_sweeps_on_fresh_stores_lose_no_runs(tmp_path):
    repeats = int(os.environ.get("LAB_FRESH_STORE_REPEATS", "20"))
    for k in range(repeats):
        lab = Lab(tmp_path / f"r{k}")
        lab.cwd.mkdir()
        sweep = lab.cwd / "sweep"
        lab.run(
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            "model.generator.levels=3",
            "placer=single",
            "seed=0,1,2,3",
            f"hydra.sweep.dir={sweep}",
        )
        summary = json.loads((sweep / "sweep_summary.json").read_text())
        assert summary["failed"] == [] and len(summary["jobs"]) == 4, k
        assert _finished(lab.db) == 5, k  # four jobs and the sweep's parent run


_MIGRATE = """
import sys, sqlalchemy
from mlflow.store.db.utils import _initialize_tables
engine = sqlalchemy.create_engine(sys.argv[1])
print("go", flush=True)
_initialize_tables(engine)
"""


@pytest.mark.slow
def test_a_store_whose_first_migration_was_killed_is_recreated(tmp_path):
    """SIGKILL during MLflow's first migration leaves a half-migrated store (a duplicate column, an empty
    alembic_version, an `_alembic_tmp_*` table, depending on when); the next process gets a working store."""
    import random
    import signal
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    from orchestrator import mlflow_store

    rng = random.Random(7)
    for k in range(4):
        db = tmp_path / f"t{k}" / "mlflow.db"
        db.parent.mkdir()
        uri = f"sqlite:///{db}"
        p = subprocess.Popen([sys.executable, "-c", _MIGRATE, uri], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None and p.stdout.readline().strip() == "go"
        time.sleep(rng.uniform(0.0, 3.0))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        mlflow_store._PREPARED.clear()
        exp = mlflow_store.prepare_store(uri, "lab")
        client = MlflowClient(tracking_uri=uri)
        run = client.create_run(exp)
        client.set_terminated(run.info.run_id)
        assert client.get_run(run.info.run_id).info.status == "FINISHED"
    mlflow_store._PREPARED.clear()
