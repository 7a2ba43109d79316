"""Sweeps through the scale-out launchers: a local Ray cluster (hydra-ray-launcher) and submitit's local executor
(the same code path as `hydra/launcher=submitit_slurm` on a Slurm cluster). Both need the optional launcher
packages; they are skipped where those are not installed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# a small synthetic graph: the jobs finish in seconds, the launchers are what is tested
SMALL = ["model.generator.levels=8", "placer=single,expert"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_sweep(lab, sweep_dir: Path, experiment: str = "lab") -> None:
    results = sorted(sweep_dir.glob("*/result.json"))
    assert [p.parent.name for p in results] == ["0", "1"]
    rs = [json.loads(p.read_text()) for p in results]
    assert sorted(r["placer"] for r in rs) == ["expert", "single"]
    assert all(r["status"] == "ok" and r["predicted_step_s"] > 0 for r in rs)
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["failed"] == [] and len(summary["jobs"]) == 2
    runs = lab.runs(experiment)
    parent = [r for r in runs if r.data.tags.get("kind") == "sweep"]
    assert len(parent) == 1 and parent[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert sorted(r.data.tags["placer"] for r in children) == ["expert", "single"]
    assert all(r.info.status == "FINISHED" for r in children)
    assert {r.info.run_id for r in children} == {r["mlflow_run_id"] for r in rs}


@pytest.mark.slow
def test_sweep_on_a_local_ray_cluster(lab):
    pytest.importorskip("ray")
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    port = _free_port()
    env = dict(lab.env, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    lab.env = env
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    # the head's workers inherit this environment: the cache folder and the MLflow store of the test
    start = subprocess.run(
        [
            *ray,
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
        ],
        cwd=lab.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    try:
        assert start.returncode == 0, start.stdout[-2000:] + start.stderr[-2000:]
        sweep_dir = lab.cwd / "multirun" / "ray"
        lab.run(
            *SMALL,
            "hydra/launcher=ray",
            f"+hydra.launcher.ray.init.address=127.0.0.1:{port}",
            "+hydra.launcher.ray.init.object_store_memory=null",
            f"hydra.sweep.dir={sweep_dir}",
            "-m",
            timeout=600,
        )
        _check_sweep(lab, sweep_dir)
    finally:
        subprocess.run([*ray, "stop", "--force"], cwd=lab.cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_sweep_through_submitit_local(lab):
    pytest.importorskip("submitit")
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    sweep_dir = lab.cwd / "multirun" / "submitit"
    lab.run(
        *SMALL,
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        f"hydra.sweep.dir={sweep_dir}",
        "-m",
        timeout=600,
    )
    _check_sweep(lab, sweep_dir)
    # submitit kept each job's own stdout/stderr next to the jobs
    assert list((sweep_dir / ".submitit").rglob("*_log.out"))
