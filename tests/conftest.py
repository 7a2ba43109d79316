"""Shared fixtures: run `python -m orchestrator` in a scratch folder with its own MLflow store and cache."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# test files that import a framework at the top are not collected where it is not installed
# (the backend tests under tests/backends/ have the same rule in their conftest)
collect_ignore = ["test_pipeline_torch.py"] if importlib.util.find_spec("torch") is None else []


class Lab:
    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.db = cwd / "mlflow.db"
        self.env = dict(
            os.environ,
            LAB_CACHE_DIR=str(cwd / "cache"),
            PYTHONPATH=str(ROOT),
            HYDRA_FULL_ERROR="0",
            MLFLOW_TRACKING_URI=f"sqlite:///{cwd}/mlflow.db",
        )

    def run(self, *args: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
        p = subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and p.returncode != 0:
            raise AssertionError(f"orchestrator {args} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p

    def outputs(self) -> list[Path]:
        return sorted(p.parent for p in (self.cwd / "outputs").rglob("result.json"))

    def runs(self, experiment: str = "lab"):
        import mlflow

        mlflow.set_tracking_uri(f"sqlite:///{self.db}")
        return mlflow.search_runs(experiment_names=[experiment], output_format="list")


@pytest.fixture
def lab(tmp_path) -> Lab:
    return Lab(tmp_path)


@pytest.fixture(autouse=True)
def _fresh_spell_streak(monkeypatch):
    """Each test starts with no streak of slow spells (`backends.interference.spells_prevail`): the streak is
    this process's, and real runs in earlier tests on a VM in its slow state would otherwise decide whether a
    later test's steps are judged at all."""
    import backends.interference as interference

    monkeypatch.setattr(interference, "_spell_streak", [0])
