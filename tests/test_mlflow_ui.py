"""What a user sees of the runs in MLflow: short params, readable run names, the real memory limit, one batch per
run written either by MlflowClient or straight into SQLite (the same rows either way), and, in a real browser
(Debian's chromium driven by Playwright; tools/install_browser.sh installs it), a sweep whose child runs can be
expanded, selected and compared with the placer names visible."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from orchestrator import run_naming, run_writers, runs_view, tracking
from orchestrator.mlflow_store import prepare_store

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _config(need_fraction=None, bound=0.4):
    return {
        "model": {"name": "gnmt"},
        "cluster": {"memory_fraction": 1.0, "need_fraction": need_fraction, "devices": [{"name": "cpu0"}]},
        "optimizer": {"passes": [{"_target_": "x.A"}, {"_target_": "x.B", "bound": bound}]},
        "seed": 0,
        "tracking": {"uri": "sqlite:///x.db", "experiment": "e", "enabled": True},
        "cache": {"dir": "/tmp/c"},
    }


CHOICES = {
    "model": "gnmt",
    "backend": "torch",
    "cluster": "cpu4",
    "profiler": "measured",
    "optimizer": "baechi",
    "placer": "m_sct",
    "scheduler": "placer_order",
    "pipeline": "none",
    "runtime": "real",
    "tracking": "mlflow",
    "experiment": "gnmt_mem_limited",
}


def test_short_params_are_the_choices_and_the_overridden_keys_and_the_name_reads_at_a_glance():
    overrides = ["placer=m_sct", "cluster.need_fraction=0.3", "+optimizer.passes.1.bound=0.4", "cache.dir=/x"]
    params = run_naming.short_params(_config(need_fraction=0.3), CHOICES, overrides)
    assert params == {
        "placer": "m_sct",
        "model": "gnmt",
        "cluster": "cpu4",
        "backend": "torch",
        "scheduler": "placer_order",
        "optimizer": "baechi",
        "profiler": "measured",
        "runtime": "real",
        "pipeline": "none",
        "experiment": "gnmt_mem_limited",
        "seed": "0",
        "memory_fraction": "1.0",
        "need_fraction": "0.3",
        "optimizer.passes.1.bound": "0.4",
    }
    assert run_naming.run_name(CHOICES, params, overrides) == "m_sct · gnmt · cpu4 · need_fraction=0.3 · bound=0.4"
    assert run_naming.run_name(CHOICES, params) == "m_sct · gnmt · cpu4"
    pipe = {"model": "none", "cluster": "cpu4", "pipeline": "tessel"}
    assert run_naming.run_name(pipe, {}) == "tessel · none · cpu4"
    # a sweep value of a key no choice covers becomes a param; output folders never do
    p2 = run_naming.short_params(
        _config(), CHOICES, ["hydra.run.dir=/o", "tracking.uri=sqlite:///y", "thesis_graph=g2"]
    )
    assert p2["thesis_graph"] == "g2" and "hydra.run.dir" not in p2 and "need_fraction" not in p2
    assert runs_view.runs_page_url("7") == "http://127.0.0.1:5000/#/experiments/7/runs"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    runs_view.set_runs_view(MlflowClient(tracking_uri=uri), prepare_store(uri, "writers"))  # the lab's view
    return uri, MlflowClient(tracking_uri=uri), folder


def _log(uri, tmp_path, direct, parent=None, ok=True):
    art = tmp_path / f"result-{direct}.json"
    art.write_text(json.dumps({"status": "ok"}))
    t = tracking.RunTracker(
        uri, "writers", run_name="m_etf · gnmt · cpu4", parent_run_id=parent, tags={"placer": "m_etf"}, direct=direct
    )
    t.log_params({"placer": "m_etf", "seed": 0, "memory_fraction": 0.3})
    t.log_metrics({"predicted_step_s": 0.25, "memory_limit_bytes.cpu0": 2e9, "memory_limit_bytes.cpu1": 1e9, "x": 1})
    t.log_metrics({"nan": float("nan"), "oom": False})
    t.set_tags({"status": "ok" if ok else "error"})
    t.log_artifacts([art, tmp_path / "missing.json"])
    t.log_dict({"a": 1}, "extra/info.json")
    t.end(ok=ok)
    return t


def test_the_direct_sqlite_writer_and_mlflow_client_write_the_same_run(store, tmp_path):
    uri, client, folder = store
    rev = {r[0] for r in sqlite3.connect(folder / "mlflow.db").execute("SELECT version_num FROM alembic_version")}
    # a new MLflow schema revision: check _DirectSqlite against it, then add it to DIRECT_SCHEMAS
    assert rev <= run_writers.DIRECT_SCHEMAS, rev
    parent = client.create_run(client.get_experiment_by_name("writers").experiment_id).info.run_id
    via_client = _log(uri, tmp_path, direct=False, parent=parent)
    direct = _log(uri, tmp_path, direct=True, parent=parent, ok=False)
    assert (via_client.writer, direct.writer) == ("mlflow", "sqlite3")
    a, b = client.get_run(via_client.run_id), client.get_run(direct.run_id)
    assert a.info.run_name == b.info.run_name == "m_etf · gnmt · cpu4"
    assert (a.info.status, b.info.status) == ("FINISHED", "FAILED")
    assert b.info.end_time >= b.info.start_time and b.info.lifecycle_stage == "active"
    assert a.info.user_id == b.info.user_id and a.info.experiment_id == b.info.experiment_id
    for r in (a, b):  # both under the experiment's artifact location, where MLflow's artifact repository looks
        assert r.info.artifact_uri.endswith(f"/{r.info.run_id}/artifacts")
    assert a.info.artifact_uri.rsplit("/", 2)[0] == b.info.artifact_uri.rsplit("/", 2)[0]
    assert a.data.params == b.data.params == {"placer": "m_etf", "seed": "0", "memory_fraction": "0.3"}
    assert a.data.metrics == b.data.metrics
    # the real per-device limits, and the smallest as one column
    assert b.data.metrics["memory_limit_bytes"] == 1e9 and "nan" not in b.data.metrics and b.data.metrics["oom"] == 0
    assert {k: v for k, v in a.data.tags.items() if k != "status"} == {
        k: v for k, v in b.data.tags.items() if k != "status"
    }
    assert b.data.tags["mlflow.parentRunId"] == parent and b.data.tags["placer"] == "m_etf"
    for r, flag in ((a, False), (b, True)):  # the missing file is skipped, the dict lands in its folder
        assert sorted(f.path for f in client.list_artifacts(r.info.run_id)) == ["extra", f"result-{flag}.json"]
        assert [f.path for f in client.list_artifacts(r.info.run_id, "extra")] == ["extra/info.json"]
    assert client.get_metric_history(direct.run_id, "predicted_step_s")[0].value == 0.25
    found = client.search_runs([a.info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    assert {r.info.run_id for r in found} == {via_client.run_id, direct.run_id}
    view = client.get_experiment(a.info.experiment_id).tags[runs_view.VIEW_TAG_PREFIX + runs_view.VIEW_KEY]
    assert "params.`placer`" in json.loads(view)["selectedColumns"]


def test_the_direct_writer_falls_back_to_the_client_and_never_imports_mlflow_itself(store, tmp_path):
    uri, client, folder = store
    prepare_store(uri, "made by the sweep's launcher")  # what a launcher prepares, its first job writes directly
    for experiment, writer in (
        ("no such experiment yet", "mlflow"),  # created through the client
        ("no such experiment yet", "sqlite3"),  # then written directly
        ("made by the sweep's launcher", "sqlite3"),
    ):
        t = tracking.RunTracker(uri, experiment)
        t.end(ok=True)
        assert t.writer == writer, experiment
    code = (
        "import sys; from orchestrator import tracking\n"
        f"t = tracking.RunTracker({uri!r}, 'writers', run_name='x', direct=True)\n"
        "t.log_metrics({'m': 1.0}); t.end(ok=True)\n"
        "print(t.writer, 'mlflow' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["sqlite3", "False"], out.stderr[-2000:]
    # a store of a schema revision the direct writer does not know goes through MlflowClient
    other = folder / "other.db"
    shutil.copyfile(folder / "mlflow.db", other)
    with sqlite3.connect(other) as db:
        db.execute("UPDATE alembic_version SET version_num = 'not-a-known-revision'")
    with pytest.raises(run_writers._NoDirect, match="not-a-known-revision"):
        run_writers._DirectSqlite(f"sqlite:///{other}", "writers")


_WRITER = """
import sys
from orchestrator import tracking
config = {{"tracking": {{"uri": {uri!r}, "experiment": "writers", "enabled": True}}, "seed": 0}}
writers = set()
for k in range(5):
    t = tracking.start_job_run(config, {{"placer": "w{{}}-{{}}".format(sys.argv[1], k)}}, overrides=[])
    t.log_metrics({{"predicted_step_s": k}})
    t.set_tags({{"status": "ok"}})
    t.end(ok=True)
    writers.add(t.writer)
print(*writers, "mlflow" in sys.modules)
"""


def test_the_direct_writer_is_the_default_and_processes_write_the_store_at_once(store):
    uri, client, _ = store
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER.format(uri=uri), str(w)], env=env, stdout=subprocess.PIPE, text=True
        )
        for w in range(4)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [o.split() for o in outs] == [["sqlite3", "False"]] * 4, outs
    exp = client.get_experiment_by_name("writers").experiment_id
    runs = client.search_runs([exp], "tags.placer LIKE 'w%-%'", max_results=1000)
    assert len(runs) == 20 and {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(r.data.metrics["predicted_step_s"] for r in runs) == sorted([0.0, 1.0, 2.0, 3.0, 4.0] * 4)
    assert {r.data.params["placer"] for r in runs} == {f"w{w}-{k}" for w in range(4) for k in range(5)}


def test_the_direct_writer_marks_runs_of_dead_processes_failed(store):
    uri, client, _ = store
    code = (
        "import os; from orchestrator import tracking\n"
        f"t = tracking.RunTracker({uri!r}, 'writers', run_name='killed')\n"
        "print(t.writer, t.run_id, flush=True); os.kill(os.getpid(), 9)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    writer, run_id = out.stdout.split()
    assert writer == "sqlite3" and client.get_run(run_id).info.status == "RUNNING"
    run_writers._SWEPT.clear()  # this process checks each store once
    t = tracking.RunTracker(uri, "writers", run_name="next")
    t.end(ok=True)
    dead = client.get_run(run_id)
    assert dead.info.status == "FAILED" and dead.info.end_time is not None
    assert "ended without closing this run" in dead.data.tags["error"] and dead.data.tags["status"] == "error"
    assert client.get_run(t.run_id).info.status == "FINISHED"  # a live process' run is left alone


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _browser_ready() -> str | None:
    """Why the browser test cannot run here, or None. LAB_REQUIRE_BROWSER=1 (CI) turns a skip into a failure."""
    if CHROMIUM is None:
        return "needs Debian's chromium: bash tools/install_browser.sh"
    try:
        importlib.import_module("playwright.sync_api")  # availability check
    except ImportError:
        return "needs Playwright's Python package (pip install -e '.[test]')"
    return None


@pytest.mark.slow
def test_mlflow_ui_expands_selects_and_compares_the_runs_of_a_sweep(lab, tmp_path):
    why = _browser_ready()
    if why:
        if os.environ.get("LAB_REQUIRE_BROWSER"):
            pytest.fail(why)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    from orchestrator import report

    lab.run("-m", "placer=single,expert,m_etf", "tracking.experiment=ui_check")
    runs = lab.runs("ui_check")
    children = [r for r in runs if r.data.tags.get("kind") != "sweep"]
    parent = next(r for r in runs if r.data.tags.get("kind") == "sweep")
    assert len(children) == 3
    if "best_placer" not in parent.data.tags:  # the sweep callback did not summarise it: do it as it would
        report.summarize_sweep(f"sqlite:///{lab.db}", parent.info.run_id)
    exp_id = parent.info.experiment_id
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{lab.db}"]
        + ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=lab.cwd,
        # no telemetry; no background job runner (a dozen huey worker processes this test does not need)
        env=dict(lab.env, MLFLOW_DISABLE_TELEMETRY="true", MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # `mlflow server` starts uvicorn as a child: stop the whole group
    )
    try:
        deadline = time.time() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(2)
        url = runs_view.runs_page_url(exp_id, f"http://127.0.0.1:{port}", share_key=runs_view.VIEW_KEY)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 1900, "height": 1000})
                page.set_default_timeout(180_000)
                page.goto(url, wait_until="domcontentloaded")
                page.wait_for_selector(f"text={parent.info.run_name}")
                # the lab's view shows the placer and the step-time columns
                header = page.locator('[role="columnheader"]').all_inner_texts()
                assert "placer" in header and "predicted_step_s" in header, header
                # expand the sweep: its jobs appear, named by placer
                if not page.locator('[role="row"]', has_text="m_etf · ").count():
                    name_cell = page.locator('[role="gridcell"][col-id="attributes.`Run Name`"]')
                    name_cell.filter(has_text=parent.info.run_name).locator("button").first.click()
                for r in children:
                    page.wait_for_selector(f"text={r.info.run_name}")
                # select two jobs and compare them
                for placer in ("single", "m_etf"):
                    row = page.locator('[role="row"]', has_text=f"{placer} · ").first
                    row.locator("input.ag-checkbox-input").check()
                page.locator("button", has_text="Compare").first.click()
                page.wait_for_url("**/compare-runs**")
                # the compare page fills its params, metrics and tags tables after the run names: poll its text
                # for a row `placer <first run's placer> <second's>` (tab-separated cells); its metrics table
                # scrolls virtually, so only its first rows are in the text
                rows: list[list[str]] = []
                deadline = time.time() + 180
                while time.time() < deadline:
                    text = page.inner_text("body")
                    rows = [ln.split("\t") for ln in text.splitlines() if ln.startswith("placer\t")]
                    if ["placer", "single", "m_etf"] in rows:
                        break
                    page.wait_for_timeout(2000)
                assert ["placer", "single", "m_etf"] in rows, rows
                assert "single · " in text and "m_etf · " in text and "expert · " not in text
                page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
            finally:
                browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)
