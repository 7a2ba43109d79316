"""The MLflow UI shows the runs of a sweep: start `mlflow server` on a free port, render the experiment page in
headless Chromium (Debian's `chromium` package), and find the runs on the page."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_mlflow_ui_lists_the_runs_of_a_sweep(lab, tmp_path):
    lab.run("-m", "placer=single,expert", "tracking.experiment=ui_check")
    runs = lab.runs("ui_check")
    children = [r for r in runs if r.data.tags.get("kind") != "sweep"]
    assert len(children) == 2
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{lab.db}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=lab.cwd,
        env=lab.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(1)
        exp_id = children[0].info.experiment_id
        parent = next(r for r in runs if r.data.tags.get("kind") == "sweep")

        def page(fragment: str) -> str:
            return subprocess.run(
                [
                    CHROMIUM,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    f"--user-data-dir={tmp_path / 'chrome'}",
                    "--virtual-time-budget=30000",
                    "--dump-dom",
                    f"http://127.0.0.1:{port}/#/experiments/{exp_id}/{fragment}",
                ],
                capture_output=True,
                text=True,
                timeout=180,
            ).stdout

        listing = page("runs")
        assert parent.info.run_name in listing  # the sweep, whose children are folded under it
        for r in children:  # each job's own page shows its name, its placer param and its metrics
            dom = page(f"runs/{r.info.run_id}")
            assert r.info.run_name in dom, f"run {r.info.run_name!r} not on its page"
            assert "predicted_step_s" in dom
    finally:
        server.terminate()
        server.wait(30)
